"""The InLine-DeiT family (:data:`DEIT`): its table and its timm classifiers :class:`InLineDeiTClassifier`,
``inline_deit_{tiny,small,base}``.

A plain ViT (DeiT) on the trunk, as the authors' ``VisionTransformer`` of ``models/inline_deit.py``: one stage at
stride ``patch_size`` (16). The stem embeds non-overlapping 16 x 16 patches (timm's ``PatchEmbed``: a conv, no norm;
sides that are no multiple of 16 are zero-padded bottom/right), puts a learned class token first and adds the learned
absolute position embedding ``pos_embed`` (1 + grid tokens), then dropout. Every block is pre-norm (LayerNorm eps
1e-6) with InLine attention over the class token and the map (letter ``I``,
:class:`~inline_backbones.models.mixers.deit_attention.PrefixInLineAttention`: the class token is a query, key and
value of the global attention and counts in the mean token the 3x3 kernels are predicted from, but the 3x3 residual
runs over the map's tokens only) and timm's MLP. The classifier reads the class token after the final LayerNorm
(eps 1e-6)::

    t      = [cls; patch_embed(x)] + pos_embed         (B, 1 + HW, C)
    logits = head(norm(blocks(t))[:, 0])

``pos_embed`` is sized by the arch's ``img_size`` (timm's ``img_size`` argument sets it, as for timm's ViT): the
released T / S / B were trained at 224 / 288 / 448 px (grids 14, 18, 28). At another input size it is resampled to
the input's grid by timm's ``resample_abs_pos_embed`` (bicubic, antialiased: timm's ViT with ``dynamic_img_size``);
at the arch's size it is used as it is, so the model there is the authors'. Their blocks assume a square map
(``h = w = int(sqrt(N))``); these take any H x W.

The released files load through timm as released (:mod:`.deit_checkpoint`; the package's safe, strict loader)::

    timm.create_model('inline_deit_small', pretrained=True, pretrained_cfg_overlay=dict(file='inline_deit_s.pth'))

There is no mmdet/mmseg backbone of this family: a plain ViT has one map at stride 16, not the four-stage pyramid
the dense-prediction configs take.
"""
import torch
from timm.layers import PatchEmbed, resample_abs_pos_embed, to_2tuple
from torch import nn

from ..classifier import Classifier, register_classifiers
from ..stages import Stage
from ..tokens.graph_mode import graph_leaf
from ..tokens.token_map import TokenMap
from ..trunk import Family
from .deit_checkpoint import checkpoint_filter_fn

LETTERS = {'I': 'inline_deit'}

# What a custom arch dict may leave out: the pre-training image size (the position embedding's grid), the patch size
# and the MLP ratio of the released models.
ARCH_DEFAULTS = dict(img_size=224, patch_size=16, mlp_ratio=4.)
# The authors' widths (not DeiT's: T 192 wide / 6 heads, S 320 / 10, B 384 / 12), each at its released input size.
ARCH_ZOO = {
    'tiny': dict(embed_dims=192, depths=[12], num_heads=[6], attn_type='I', **dict(ARCH_DEFAULTS, img_size=224)),
    'small': dict(embed_dims=320, depths=[12], num_heads=[10], attn_type='I', **dict(ARCH_DEFAULTS, img_size=288)),
    'base': dict(embed_dims=384, depths=[12], num_heads=[12], attn_type='I', **dict(ARCH_DEFAULTS, img_size=448)),
}
OPTIONS = dict(qkv_bias=True, drop_rate=0.)
NORM_EPS = 1e-6


@graph_leaf   # a leaf of fx graphs: it pads to whole patches by the input's size
class ViTPatchEmbed(PatchEmbed):
    """timm's ``PatchEmbed`` (conv, kernel = stride = ``patch_size``, no norm), NHWC out, any input size (zero padding
    bottom/right to whole patches); ``grid_size`` is the pre-training grid of the position embedding."""

    def __init__(self, img_size, patch_size, in_chans, embed_dim):
        super().__init__(img_size, patch_size, in_chans, embed_dim, output_fmt='NHWC', strict_img_size=False,
                         dynamic_img_pad=True)


def build(trunk, arch, layout, drop_path_rates, in_channels, with_cp, qkv_bias, drop_rate):
    """The stem (``trunk.patch_embed``, ``trunk.cls_token``, ``trunk.pos_embed``, ``trunk.pos_drop``) and the one
    stage of InLine blocks."""
    if len(layout) != 1:
        raise ValueError(f'InLine-DeiT has one stage (a plain ViT): depths and num_heads take one entry each, got '
                         f'depths={arch["depths"]}')
    dims = arch['embed_dims']
    trunk.patch_embed = ViTPatchEmbed(to_2tuple(arch['img_size']), arch['patch_size'], in_channels, dims)
    grid_h, grid_w = trunk.patch_embed.grid_size
    trunk.cls_token = nn.Parameter(torch.zeros(1, 1, dims))
    trunk.pos_embed = nn.Parameter(torch.zeros(1, DEIT.prefix_tokens + grid_h * grid_w, dims))
    trunk.pos_drop = nn.Dropout(drop_rate)
    mixer = dict(qkv_bias=qkv_bias, proj_drop_rate=drop_rate)
    stage = Stage(dims, arch['num_heads'][0], [dict(mixer, type=name) for name in layout[0]],
                  mlp_ratio=arch['mlp_ratio'], drop_rate=drop_rate, drop_path_rates=drop_path_rates[0],
                  with_cp=with_cp, norm_eps=NORM_EPS)
    return [stage], [dims], arch['patch_size']


def stem(trunk, x, regions):
    """The class token and the patch tokens of the (checked) images, plus the position embedding resampled to their
    grid, and the grid's :class:`~.token_map.TokenMap` (one prefix token)."""
    patches = trunk.patch_embed(x)                                               # (B, H, W, C)
    x = _with_class_token(patches, trunk.cls_token, trunk.pos_embed, trunk.patch_embed.grid_size)
    return trunk.pos_drop(x), _grid_map(patches, regions)


@torch.fx.wrap   # a leaf of fx graphs: it reads sizes
def _with_class_token(patches, cls_token, pos_embed, grid_size):
    """``[cls; patches] + pos_embed`` (B, 1 + HW, C) of the (B, H, W, C) patch tokens, the position embedding of the
    ``grid_size`` grid resampled to H x W (timm's ``resample_abs_pos_embed``, which returns it as it is on its own
    grid)."""
    pos_embed = resample_abs_pos_embed(pos_embed, new_size=patches.shape[1:3], old_size=grid_size,
                                       num_prefix_tokens=DEIT.prefix_tokens)
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches.flatten(1, 2)], dim=1) + pos_embed


@torch.fx.wrap   # a leaf of fx graphs: it reads sizes
def _grid_map(patches, regions):
    """The map of the (B, H, W, C) patch tokens, led by the class token."""
    return TokenMap(patches.shape[1:3], patches.shape[0], patches.device, regions, prefix_tokens=1)


DEIT = Family(
    name='InLine-DeiT', arch_zoo=ARCH_ZOO, letters=LETTERS, mixed=('I', 'I'), options=OPTIONS, build=build,
    stem=stem, checkpoint_filter=checkpoint_filter_fn, arch_defaults=ARCH_DEFAULTS, stem_modules=('patch_embed',),
    output_norms=True, norm_eps=NORM_EPS, prefix_tokens=1, global_pool='token',
    position_params=('pos_embed', 'cls_token'),
    # the authors' evaluation: squash-resize to 256/224 of the input size, centre crop; the head reads the class
    # token (no pooled map)
    pretrained_cfg=dict(crop_mode='squash', first_conv='patch_embed.proj', pool_size=None))


class InLineDeiTClassifier(Classifier, family=DEIT):
    """InLine-DeiT ImageNet classifier: patch embedding, class token, position embedding, InLine blocks, final
    ``norm``, the class token into ``head`` (module docstring).

    Args (besides :class:`~.classifier.Classifier`'s; ``img_size`` sets the position embedding's grid):
        arch (str | dict): ``'tiny'`` (default), ``'small'``, ``'base'`` (the released models) or a dict with
            ``embed_dims`` (int), ``depths`` and ``num_heads`` (one entry each) and optionally ``img_size``,
            ``patch_size``, ``mlp_ratio``, ``attn_type`` (``'I'``).
        qkv_bias (bool): Bias of ``qkv``. Defaults to True.
        drop_rate (float): Dropout after the position embedding, in MLPs and after the attention projections.
    """


# inline_deit_{arch}(pretrained=False, **kwargs) here and in timm's registry (docstrings: released.PAPER_FIGURES),
# each with its released input size.
register_classifiers(InLineDeiTClassifier, 'inline_deit_', globals(), arch_cfgs={
    arch: dict(input_size=(3, preset['img_size'], preset['img_size'])) for arch, preset in ARCH_ZOO.items()})
