"""Padding-aware InLine-PVT: an image's features on its own region do not depend on the batch's padding."""
import pytest
import torch
from padding_cases import images, randomized, relative_difference_on_region
from test_padding_aware import det_batch

from inline_backbones import InLinePVT
from inline_backbones.models.mixers.pvt_attention import SpatialReductionAttention
from inline_backbones.models.tokens.token_map import TokenMap

SMALL = dict(embed_dims=[16, 32, 48, 64], depths=[2, 2, 2, 2], num_heads=[1, 2, 3, 4])


def small_pvt(layout, **kwargs):
    """A randomly initialised small InLine-PVT (every parameter non-trivial), eval mode, seed fixed."""
    torch.manual_seed(0)
    return randomized(InLinePVT(SMALL, attn_type=layout, drop_path_rate=0., **kwargs))


def test_padding_aware_equals_the_plain_model_on_a_full_batch():
    batch, _ = det_batch(images())
    model = small_pvt('IISS', padding_aware=True)
    with torch.no_grad():
        full = model(batch[:1], image_shapes=[batch.shape[-2:]])
        plain = small_pvt('IISS')(batch[:1])
    for a, b in zip(full, plain, strict=True):
        assert torch.equal(a, b)


def test_an_image_not_a_multiple_of_32_alone_is_cut_as_in_a_padded_batch():
    """Padding-aware mode pads to 32 itself: an image of 150x171 alone == the same image padded by the preprocessor."""
    model = small_pvt('IISS', padding_aware=True)
    img = images()[1]
    batch, shapes = det_batch([img])
    with torch.no_grad():
        alone = model(batch[:, :, :150, :171], image_shapes=[(150, 171)])
        padded = model(batch, image_shapes=shapes)
    assert relative_difference_on_region(alone, padded, 0, (150, 171)) < 1e-6


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
