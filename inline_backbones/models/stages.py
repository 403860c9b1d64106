"""A stage (optional embedding, blocks, optional downsampling) and the one stage loop that the
mmdet/mmseg backbones, the timm classifiers and the attention analysis all run.

A backbone provides ``min_input_size``, ``padding_aware``, ``stem(x, regions) -> (x, tokens)`` (what the
first stage takes, with its :class:`~.token_map.TokenMap`) and ``layers``, a list of :class:`Stage`.
:func:`iter_stages` checks the input, finds each image's region in padding-aware mode, masks the pixels
outside it, runs the stem and the stages, and yields each stage's output tokens with their map.

The helpers that branch on sizes or on data are leaves of fx graphs (``torch.fx.wrap`` here; timm's
notrace registry for :func:`to_nchw`, which other modules call).
"""
import torch
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import register_notrace_function
from torch import nn

from ..regions import resolve_regions, split_regions
from .blocks import TransformerBlock
from .tokens.graph_mode import regions_in_graph
from .tokens.masks import fills_map, region_mask


class Stage(nn.Module):
    """``embed`` (optional: ``(x, tokens) -> (x, tokens)``, e.g. PVT's per-stage patch embedding), the
    blocks (``mixer_cfgs[j]`` for block j, see :class:`~.blocks.TransformerBlock`), then ``downsample``
    (optional, same form, e.g. Swin's patch merging).

    Returns the stage output (the last block's tokens) with its map, and what the next stage takes.
    """

    def __init__(self, embed_dims, num_heads, mixer_cfgs, *, mlp_ratio, drop_rate, drop_path_rates, with_cp,
                 norm_eps=1e-5, embed=None, downsample=None):
        super().__init__()
        self.embed = embed
        self.blocks = nn.ModuleList([
            TransformerBlock(embed_dims, num_heads, cfg, block_index=j, mlp_ratio=mlp_ratio, drop_rate=drop_rate,
                             drop_path_rate=drop_path_rates[j], with_cp=with_cp, norm_eps=norm_eps)
            for j, cfg in enumerate(mixer_cfgs)
        ])
        self.downsample = downsample

    def forward(self, x, tokens):
        if self.embed is not None:
            x, tokens = self.embed(x, tokens)
        for block in self.blocks:
            x = block(x, tokens)
        if self.downsample is None:
            return x, tokens, x, tokens
        x_next, tokens_next = self.downsample(x, tokens)
        return x, tokens, x_next, tokens_next


def iter_stages(model, x, image_shapes=None, stop=None):
    """Run ``model.stem`` and ``model.layers`` (up to index ``stop``) on the images ``x``; yield each
    stage's output tokens (B, N, C) and :class:`~.token_map.TokenMap`. ``image_shapes``: each image's own
    (height, width) in padding-aware mode (else carried or inferred: :func:`~inline_backbones.regions.resolve_regions`,
    called once here)."""
    x, carried = split_regions(x)      # a plain tensor from here on (regions a batch carries: regions.py)
    regions = input_regions(x, image_shapes, carried, model.min_input_size, model.padding_aware, type(model).__name__,
                            model.in_channels)
    x, tokens = model.stem(mask_pixels(x, regions), regions)
    for stage in model.layers[:None if stop is None else stop + 1]:
        out, out_tokens, x, tokens = stage(x, tokens)
        yield out, out_tokens


# What the released models were trained on: RGB pixels in 0-255, normalised per channel by ImageNet's statistics.
IMAGENET_MEAN, IMAGENET_STD = (tuple(round(255 * v, 3) for v in stats) for stats in (IMAGENET_DEFAULT_MEAN,
                                                                                   IMAGENET_DEFAULT_STD))


def check_images(x, name, in_channels):
    """ValueError/TypeError, naming the fix, unless ``x`` is a float (B, ``in_channels``, H, W) tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f'{name} takes images as a (B, C, H, W) float tensor, got {type(x).__name__}')
    if x.dim() != 4:
        hint = ': add the batch dimension with x.unsqueeze(0)' if x.dim() == 3 else ''
        raise ValueError(f'{name} takes images as a (B, C, H, W) tensor, got a {x.dim()}-D tensor of shape '
                         f'{tuple(x.shape)}{hint}')
    if x.shape[1] != in_channels:
        hint = (' (repeat a grey image to RGB with x.expand(-1, 3, -1, -1), or build the model with in_channels=1: '
                'the released weights are RGB)' if x.shape[1] == 1 and in_channels == 3 else '')
        raise ValueError(f'{name} was built for {in_channels}-channel images (in_channels={in_channels}), got '
                         f'{x.shape[1]} channels in a tensor of shape {tuple(x.shape)}{hint}')
    if not x.is_floating_point():
        raise TypeError(f'{name} takes float images normalised as the released models were trained: '
                        f'(pixel - mean) / std per RGB channel on 0-255 pixels, mean {IMAGENET_MEAN}, std '
                        f'{IMAGENET_STD}; got {x.dtype}: convert with (x.float() - mean) / std (mmdet/mmseg\'s data '
                        'preprocessor does this in a config)')


@torch.fx.wrap
def input_regions(x, image_shapes, carried, min_input_size, padding_aware, name, in_channels=3):
    """Check the input (:func:`check_images`, its size); in padding-aware mode return each image's region (B, 2)
    on the host (:func:`~inline_backbones.regions.resolve_regions`: explicit ``image_shapes`` > ``carried`` >
    inferred), else None."""
    check_images(x, name, in_channels)
    H, W = x.shape[-2:]
    if min(H, W) < min_input_size:
        raise ValueError(f'input of {H}x{W} pixels is too small for {name}: each side must be at least '
                         f'{min_input_size} (the stride of the last stage). Pad the image up to it (mmseg: '
                         f'data_preprocessor test_cfg=dict(size=({min_input_size}, {min_input_size})) pads smaller '
                         'images only and crops the prediction back), or resize it larger')
    if not padding_aware:
        if image_shapes is not None:
            raise ValueError('image_shapes is only used in padding-aware mode (padding_aware=True)')
        return None
    if regions_in_graph():   # export, compile: the regions are a graph input, no data-dependent checks (masks.py
        if not isinstance(image_shapes, torch.Tensor):   # builds static shapes)
            raise NotImplementedError(
                "padding-aware export and torch.compile take each image's (height, width) as a graph input: "
                'call backbone(x, image_shapes) with image_shapes a (B, 2) integer tensor (inference from zeros '
                'and Python lists cannot be captured)')
        return image_shapes.long().reshape(-1, 2)
    return resolve_regions(x, image_shapes, carried)


@torch.fx.wrap
def mask_pixels(x, regions):
    """Images (B, C, H, W) with zeros outside each image's region (``regions`` None: as they are)."""
    H, W = x.shape[-2:]
    if regions is None or fills_map(regions, (H, W)):
        return x
    return x * region_mask(regions, (H, W), x.device).view(-1, 1, H, W)


@register_notrace_function
@torch.fx.wrap
def to_nchw(x, tokens):
    """(B, N, C) tokens of the map ``tokens`` -> (B, C, H, W), zero outside each image's region (prefix tokens left
    out)."""
    H, W = tokens.hw_shape
    x = tokens.mask_outside(x[:, tokens.prefix_tokens:])
    return x.view(-1, H, W, x.shape[-1]).permute(0, 3, 1, 2).contiguous()


@register_notrace_function   # a leaf of fx graphs (also where other modules call it): it reads sizes
@torch.fx.wrap
def to_nhwc(x, tokens):
    """(B, N, C) tokens of the map ``tokens`` -> (B, H, W, C) (a view: the classifiers' layout, as timm's Swin; prefix
    tokens left out)."""
    return x[:, tokens.prefix_tokens:].view(-1, *tokens.hw_shape, x.shape[-1])
