"""Our backbone equals the authors' model (their code, released checkpoint format) at 224x224."""
import pytest
import released_fixtures as rf


@pytest.mark.parametrize('kernel_func', rf.KERNELS)
@pytest.mark.parametrize('layout', rf.LAYOUTS)
def test_stage_tokens_equal_the_authors_model(layout, kernel_func):
    expected = rf.expected(layout)
    backbone = rf.released_backbone(layout, kernel_func)
    rf.assert_stage_tokens_equal(rf.stage_tokens(backbone, expected['x']), expected[kernel_func]['stage_tokens'])


def test_a_different_kernel_gives_different_tokens():
    """The comparison can fail: the identity model's tokens are not the exp fixture's."""
    expected = rf.expected('IIIS')
    tokens = rf.stage_tokens(rf.released_backbone('IIIS', 'identity'), expected['x'])
    with pytest.raises(AssertionError, match='relative difference'):
        rf.assert_stage_tokens_equal(tokens, expected['exp']['stage_tokens'])


MODES = {'padding-aware': dict(padding_aware=True), 'windowed-56': dict(inline_window_size=56),
         'padding-aware-windowed-56': dict(padding_aware=True, inline_window_size=56)}


@pytest.mark.parametrize('kernel_func', rf.KERNELS)
@pytest.mark.parametrize('layout', rf.LAYOUTS)
@pytest.mark.parametrize('mode', MODES)
def test_every_backbone_mode_equals_the_authors_model_at_224(mode, layout, kernel_func):
    """At 224 the authors' windows of 56 cover every map (so they are global) and nothing is padded."""
    expected = rf.expected(layout)
    backbone = rf.released_backbone(layout, kernel_func, **MODES[mode])
    rf.assert_stage_tokens_equal(rf.stage_tokens(backbone, expected['x']), expected[kernel_func]['stage_tokens'])


def test_no_shift_at_the_7x7_last_stage_at_224():
    """At 224 the last stage is 7x7 = one window: the release does not shift there (its state dicts
    hold no ``attn_mask`` for those blocks) and neither do we. Running the last stage's shifted block
    with a shift mask anyway moves the tokens off the authors' outputs, so the fixture pins the rule."""
    import torch

    from inline_backbones.checkpoints.loading import load_checkpoint_file
    from inline_backbones.models.tokens.token_map import TokenMap

    expected = rf.expected('IIIS')
    backbone = rf.released_backbone('IIIS')
    tokens = rf.stage_tokens(backbone, expected['x'])
    rf.assert_stage_tokens_equal(tokens, expected['identity']['stage_tokens'])
    released = load_checkpoint_file(rf.checkpoint_path('IIMS2'))['model']
    assert 'layers.2.blocks.3.attn_mask' in released and 'layers.3.blocks.1.attn_mask' not in released

    last = backbone.layers[3]
    assert [b.attn.shift for b in last.blocks] == [False, True]
    stage3_out = tokens[2]
    x, token_map = backbone.layers[2].downsample(stage3_out, TokenMap.of(stage3_out, (14, 14)))
    assert token_map.hw_shape == (7, 7) and token_map.shift_size(7, True) == 0
    with torch.no_grad():
        x = last.blocks[0](x, token_map)
        token_map.shift_size = lambda window_size, shifted: 3 if shifted else 0   # force Swin's shift
        shifted = last.blocks[1](x, token_map)
    with pytest.raises(AssertionError, match='relative difference'):
        rf.assert_stage_tokens_equal([shifted], [expected['identity']['stage_tokens'][3]])
