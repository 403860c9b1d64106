import pytest

from inline_backbones import InLineSwinTransformer, parse_attn_layout


def test_presets():
    assert parse_attn_layout('IIIS', [2, 2, 6, 2]) == [['inline'] * 2, ['inline'] * 2, ['inline'] * 6, ['window'] * 2]
    mixed = parse_attn_layout('IIMS2', [2, 2, 18, 2])
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


def test_bad_arch():
    with pytest.raises(ValueError, match='unknown arch'):
        InLineSwinTransformer(arch='huge')
    with pytest.raises(ValueError, match='lacks'):
        InLineSwinTransformer(arch=dict(embed_dims=32, depths=[1, 1, 1, 1]), attn_type='IIII')
    with pytest.raises(ValueError, match='needs an attention layout'):
        InLineSwinTransformer(arch=dict(embed_dims=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]))
