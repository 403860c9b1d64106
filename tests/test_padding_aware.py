"""Padding-aware mode beyond the family contract (tests/test_family_contract.py: every family's batched == alone):
each mixer on a padded map equals it on the image's own tokens alone, explicit shapes winning where inference
misfires, bad shapes refused (InLine-Swin's windows of InLine attention: test_inline_swin.py)."""
import pytest
import torch
from padding_cases import (
    STD,
    assert_padded_map_equals_image_alone,
    images,
    relative_difference_on_region,
    small_backbone,
)
from reference_attention import naive_inline_attention

from inline_backbones.models.mixers.inline.attention import KERNEL_FUNCTIONS, InLineAttention
from inline_backbones.models.mixers.pvt_attention import SpatialReductionAttention
from inline_backbones.models.mixers.window_attention import WindowAttention
from inline_backbones.models.tokens.token_map import TokenMap
from inline_backbones.regions import attach_image_shapes, infer_image_shapes


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
def test_masked_inline_attention_equals_the_naive_formula_on_the_region(kernel_func):
    """Masked InLine over a padded map == the N x N formula on the image's own h x w tokens alone."""
    attn = InLineAttention(32, 4, kernel_func=kernel_func).eval()
    H, W, regions = 9, 11, [(9, 11), (5, 7)]
    x = torch.randn(2, H * W, 32)
    with torch.no_grad():
        out = attn(x, TokenMap.of(x, (H, W), torch.tensor(regions))).view(2, H, W, 32)
        for b, (h, w) in enumerate(regions):
            own = x.view(2, H, W, 32)[b:b + 1, :h, :w].reshape(1, h * w, 32)
            ref = naive_inline_attention(attn, own, (h, w)).view(h, w, 32)
            torch.testing.assert_close(out[b, :h, :w], ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('shift', [False, True])
def test_padding_aware_window_attention(shift):
    """Softmax windows with a padding-aware plan: on a padded map == on the image alone, and where
    nothing is padded, == Swin's own roll + seam mask."""
    attn = WindowAttention(16, 2, window_size=4, shift=shift).eval()
    with torch.no_grad():
        attn.relative_position_bias_table.normal_()
    x = assert_padded_map_equals_image_alone(attn)
    with torch.no_grad():
        full = attn(x, TokenMap.of(x, (12, 12), torch.tensor([[12, 12]])))
        swin = attn(x, TokenMap.of(x, (12, 12)))
        torch.testing.assert_close(full, swin, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('sr_ratio', [1, 2, 4])
def test_spatial_reduction_attention_sees_its_own_keys(sr_ratio):
    """Keys from the image's own (zero-filled) tokens, reduced keys outside ceil(region / sr) masked: on a padded
    map == on the image alone padded to the same sr multiple, and regions filling the map == no regions."""
    attn = SpatialReductionAttention(16, 2, sr_ratio=sr_ratio).eval()
    H, W, (h, w) = 12, 16, (7, 9)
    x = torch.randn(2, H * W, 16)
    own = torch.zeros(1, 8, 12, 16)
    own[:, :h, :w] = x.view(2, H, W, 16)[1:, :h, :w]
    own = own.view(1, 96, 16)
    with torch.no_grad():
        padded = attn(x, TokenMap.of(x, (H, W), torch.tensor([[H, W], [h, w]]))).view(2, H, W, 16)
        alone = attn(own, TokenMap.of(own, (8, 12), torch.tensor([[h, w]]))).view(8, 12, 16)
        torch.testing.assert_close(padded[1, :h, :w], alone[:h, :w], rtol=1e-5, atol=1e-6)
        full = attn(x, TokenMap.of(x, (H, W), torch.tensor([[H, W], [H, W]])))
        torch.testing.assert_close(full.view(2, H, W, 16), attn(x, TokenMap.of(x, (H, W))).view(2, H, W, 16))
        torch.testing.assert_close(full.view(2, H, W, 16)[0], padded[0])


def test_explicit_shapes_win_over_inference_where_inference_misfires():
    """An image whose last rows normalise to exactly zero (pixel == mean in every channel, possible
    with integer means) is inferred too short; the shapes the preprocessor attaches are right, and
    they win over inference."""
    mmdet_pre = pytest.importorskip('mmdet.models.data_preprocessors')
    from mmdet.structures import DetDataSample

    img = images()[1]
    mean = [128., 128., 128.]
    img[:, -8:] = 128
    pre = mmdet_pre.DetDataPreprocessor(mean=mean, std=STD, pad_size_divisor=32)
    data = pre(dict(inputs=[img], data_samples=[DetDataSample(metainfo=dict(img_shape=tuple(img.shape[1:])))]))
    batch = data['inputs']
    assert infer_image_shapes(batch).tolist() == [[img.shape[1] - 8, img.shape[2]]]   # the misfire
    model = small_backbone('tiny', padding_aware=True)
    with torch.no_grad():
        explicit = model(batch, image_shapes=[img.shape[1:]])
        inferred = model(batch)
        attach_image_shapes(batch, [img.shape[1:]])
        attached = model(batch)
        both = model(batch, image_shapes=[img.shape[1:]])
    assert relative_difference_on_region(inferred, explicit, 0, img.shape[1:]) > 1e-3
    assert relative_difference_on_region(attached, explicit, 0, img.shape[1:]) == 0
    assert relative_difference_on_region(both, explicit, 0, img.shape[1:]) == 0


def test_bad_shapes_are_refused():
    model = small_backbone('tiny', padding_aware=True)
    x = torch.randn(2, 3, 64, 64)
    with pytest.raises(ValueError, match='outside the 64x64'):
        model(x, image_shapes=[(64, 64), (65, 10)])
    with pytest.raises(ValueError, match='2 images'):
        model(x[:1], image_shapes=[(64, 64), (32, 32)])
    with pytest.raises(ValueError, match='exactly zero everywhere'):
        model(torch.zeros(1, 3, 64, 64))
    with pytest.raises(ValueError, match='only used in padding-aware mode'):
        small_backbone('tiny')(x, image_shapes=[(64, 64), (64, 64)])
    with pytest.raises(ValueError, match='inline_window_size'):
        small_backbone('tiny', inline_window_size=0)
