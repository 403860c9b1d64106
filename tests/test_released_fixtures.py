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
