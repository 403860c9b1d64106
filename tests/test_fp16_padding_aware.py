"""fp16 autocast (what ``--amp`` runs) in padding-aware mode: the masked sums over up to ~67,000 tokens
must not be accumulated in fp16 (largest value 65,504) nor divide by an fp16-rounded count.

The inputs carry per-channel offsets (0, 1, 2 on a few channels, as real features have means): summed
over a 200 x 334 region in fp16 they reach 133,600, so an fp16 accumulation gives inf, and the layer's
output NaN. CPU fp16 autocast is emulated and slow, so the maps are the real ones but the models few.
"""
import math

import pytest
import torch

from inline_backbones import InLineAttention, InLineSwinTransformer
from inline_backbones.models.mixers.linear_attention import LinearAttention
from inline_backbones.models.tokens.masks import region_mask
from inline_backbones.models.tokens.token_map import TokenMap

# A few unit roundoffs of fp16 (u = 2^-11 = 4.9e-4), the bound set for one layer and the backbone.
FP16_RTOL = 5e-3


def _offset_tokens(B, N, C):
    x = torch.randn(B, N, C)
    x[..., :6] += torch.tensor([0., 1., 2., 0., 1., 2.])
    return x


def _relative_on_region(out, ref, mask):
    keep = mask.bool().expand_as(ref)
    return ((out.float()[keep] - ref[keep]).norm() / ref[keep].norm()).item()


# Stage 1 of InLine-Swin-T on a padded 800 x 1344 COCO batch: 200 x 336 tokens; image 0 fills 200 x 334 of
# them, image 1 a smaller region.
HW = (200, 336)
REGIONS = torch.tensor([[200, 334], [150, 270]])


@pytest.mark.parametrize('layer', ['inline', 'inline-relu', 'linear'])
def test_stage1_layer_in_fp16_autocast_is_finite_and_close_on_each_region(layer):
    torch.manual_seed(0)
    attn = {'inline': lambda: InLineAttention(96, 3),
            'inline-relu': lambda: InLineAttention(96, 3, kernel_func='relu'),
            'linear': lambda: LinearAttention(96, 3)}[layer]().eval()
    x = _offset_tokens(2, HW[0] * HW[1], 96)
    mask = region_mask(REGIONS, HW).float()
    with torch.no_grad():
        ref = attn(x, TokenMap.of(x, HW, REGIONS))
        with torch.autocast('cpu', dtype=torch.float16):
            out = attn(x, TokenMap.of(x, HW, REGIONS))
    assert out.dtype == torch.float16
    for b in range(2):
        assert torch.isfinite(out[b][mask[b, :, 0].bool()]).all(), b
        rel = _relative_on_region(out[b:b + 1], ref[b:b + 1], mask[b:b + 1])
        assert rel < FP16_RTOL, (b, rel)


@pytest.mark.slow
def test_inline_swin_t_backbone_in_fp16_autocast_at_800x1344_with_two_image_sizes():
    """The whole padding-aware backbone on a COCO-sized batch of two images of different sizes."""
    torch.manual_seed(0)
    model = InLineSwinTransformer('tiny', drop_path_rate=0., padding_aware=True).eval()
    model.init_weights()
    shapes = [(800, 1334), (600, 1000)]
    x = torch.randn(2, 3, 800, 1344)
    x[:, 1] += 1.
    x[:, 2] += 2.
    x = x * region_mask(torch.tensor(shapes), (800, 1344)).float().view(2, 1, 800, 1344)
    with torch.no_grad():
        ref = model(x, image_shapes=shapes)
        with torch.autocast('cpu', dtype=torch.float16):
            outs = model(x, image_shapes=shapes)
    for level, (out, r) in enumerate(zip(outs, ref, strict=True)):
        assert out.dtype == torch.float16
        stride = 4 * 2 ** level
        for b, (h, w) in enumerate(shapes):
            own = (b, slice(None), slice(math.ceil(h / stride)), slice(math.ceil(w / stride)))
            own_out, own_ref = out[own], r[own]
            assert torch.isfinite(own_out).all(), (level, b)
            rel = ((own_out.float() - own_ref).norm() / own_ref.norm()).item()
            assert rel < FP16_RTOL, (level, b, rel)
