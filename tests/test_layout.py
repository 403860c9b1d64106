import pytest

from inline_backbones import InLineAttention, InLineSwinTransformer, WindowAttention, parse_attn_layout

SWIN = InLineSwinTransformer.family      # its layout letters and mixed pair


def test_presets():
    assert parse_attn_layout('IIIS', [2, 2, 6, 2], SWIN.letters, SWIN.mixed) == [
        ['inline'] * 2, ['inline'] * 2, ['inline'] * 6, ['window'] * 2]
    mixed = parse_attn_layout('IIMS2', [2, 2, 18, 2], SWIN.letters, SWIN.mixed)
    assert mixed[2] == ['inline'] * 2 + ['window'] * 16
    assert mixed[3] == ['window'] * 2


@pytest.mark.parametrize('layout, message', [
    ('IIXS', 'malformed'),
    ('iiis', 'malformed'),
    ('IIS', '3 stage letters'),
    ('IIMS', 'no InLine block count'),
    ('IIIS2', 'no mixed'),
    ('IIMS18', 'between 1 and 17'),
    ('IIMS0', 'between 1 and 17'),
    ('2IIMS', 'malformed'),
    ('', 'malformed'),
])
def test_malformed_layouts_fail_at_build_time(layout, message):
    with pytest.raises(ValueError, match=message):
        InLineSwinTransformer(arch='small', attn_type=layout)


def test_a_malformed_layout_lists_the_familys_letters():
    with pytest.raises(ValueError) as error:
        InLineSwinTransformer(arch='small', attn_type='IIXS')
    assert str(error.value) == (
        "malformed attn_type 'IIXS': expected one letter per stage from I (inline), S (window), L (linear), F "
        '(flatten) and M (mixed), then the InLine block count of M stages, e.g. "IIIS" or "IIMS2"')


def test_bad_arch():
    with pytest.raises(ValueError, match='unknown arch'):
        InLineSwinTransformer(arch='huge')
    with pytest.raises(ValueError, match='lacks'):
        InLineSwinTransformer(arch=dict(embed_dims=32, depths=[1, 1, 1, 1]), attn_type='IIII')
    with pytest.raises(ValueError, match='needs an attention layout'):
        InLineSwinTransformer(arch=dict(embed_dims=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]))


def _shift_sizes(model):
    """(mixer, shift in tokens) per block: global InLine never shifts, window blocks by window // 2 when shifted."""
    def describe(attn):
        if isinstance(attn, WindowAttention):
            return 'window', attn.window_size // 2 if attn.shift else 0
        assert isinstance(attn, InLineAttention) and attn.window_size is None
        return 'inline', 0
    return [[describe(b.attn) for b in stage.blocks] for stage in model.layers]


@pytest.mark.parametrize('layout, stage3', [
    ('IIMS1', [('inline', 0), ('window', 3), ('window', 0), ('window', 3)]),
    ('IIMS2', [('inline', 0), ('inline', 0), ('window', 0), ('window', 3)]),
    ('IIMS3', [('inline', 0), ('inline', 0), ('inline', 0), ('window', 3)]),
])
def test_window_blocks_shift_on_odd_indices_within_their_stage(layout, stage3):
    """In mixed stages the shift follows the block's index in the stage (as in the release), not its
    index among the window blocks: IIMS2's first window block (index 2) does not shift."""
    model = InLineSwinTransformer(arch=dict(embed_dims=16, depths=[2, 2, 4, 2], num_heads=[1, 2, 4, 8]),
                                  attn_type=layout, window_size=7)
    shifts = _shift_sizes(model)
    assert shifts[0] == shifts[1] == [('inline', 0), ('inline', 0)]
    assert shifts[2] == stage3
    assert shifts[3] == [('window', 0), ('window', 3)]
    other_window = InLineSwinTransformer(arch=dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8]),
                                         attn_type='SSSS', window_size=8)
    assert all(s == [('window', 0), ('window', 4)] for s in _shift_sizes(other_window))


def test_layout_must_be_a_string():
    with pytest.raises(TypeError, match='attn_type must be a layout string such as "IIIS", got list'):
        parse_attn_layout(['I', 'I', 'I', 'S'], [2, 2, 6, 2], SWIN.letters, SWIN.mixed)
