"""Layout ``SSSS`` is plain Swin: with converted weights it must reproduce mmdet's ``SwinTransformer``."""
import pytest
import torch

from inline_backbones import InLineSwinTransformer

mmdet_swin = pytest.importorskip('mmdet.models.backbones.swin')


def _random_trunk(model):
    """Fill every parameter (LayerNorms and bias tables included) with non-trivial random values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale, shift = (0.5 if 'norm' in name else 0.05), (1.0 if name.endswith('norm1.weight') else 0.0)
            p.copy_(torch.randn_like(p) * scale + shift)
    return model


@pytest.mark.parametrize('arch', ['tiny', pytest.param('base', marks=pytest.mark.slow)])
@pytest.mark.parametrize('size', [(256, 320), (250, 333)])
def test_ssss_equals_mmdet_swin(arch, size):
    """Every stage larger than a window (last map >= 8x8), including sizes that need padding."""
    ours = _random_trunk(InLineSwinTransformer(arch, attn_type='SSSS', drop_path_rate=0.)).eval()
    preset = InLineSwinTransformer.arch_zoo[arch]
    ref = mmdet_swin.SwinTransformer(embed_dims=preset['embed_dims'], depths=preset['depths'],
                                     num_heads=preset['num_heads'], window_size=7, drop_path_rate=0.)
    ref.eval()
    # Our keys are the released (official Swin) ones: convert them with mmdet's own converter.
    converted = {k.removeprefix('backbone.'): v for k, v in mmdet_swin.swin_converter(ours.state_dict()).items()}
    missing, unexpected = ref.load_state_dict(converted, strict=False)
    assert not unexpected
    assert all(k.endswith('relative_position_index') for k in missing), missing

    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        for a, b in zip(ours(x), ref(x), strict=True):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
