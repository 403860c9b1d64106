"""The InLine-DeiT family (:data:`DEIT`): its table and its timm classifiers :class:`InLineDeiTClassifier`,
``inline_deit_{tiny,small,base}``.

A plain ViT (DeiT) on the trunk, as the authors' ``VisionTransformer`` of ``models/inline_deit.py``: one stage at
stride ``patch_size`` (16). The stem embeds non-overlapping 16 x 16 patches (timm's ``PatchEmbed``: a conv, no norm),
puts a learned class token first and adds the learned absolute position embedding ``pos_embed`` (1 + grid tokens),
then dropout. Every block is pre-norm (LayerNorm eps 1e-6) with InLine attention over the class token and the map
(letter ``I``, :class:`~inline_backbones.models.mixers.deit_attention.PrefixInLineAttention`: the class token is a
query, key and value of the global attention and counts in the mean token the 3x3 kernels are predicted from, but the
3x3 residual runs over the map's tokens only) and timm's MLP. The classifier reads the class token after the final
LayerNorm (eps 1e-6)::

    t_0    = [cls; patch_embed(x)] + pos_embed         (B, 1 + HW, C)
    t_j    = block_j(t_{j-1}),  j = 1 .. depth
    logits = head(norm(t_depth)[:, 0])

``pos_embed`` is sized by the arch's ``img_size`` (timm's ``img_size`` argument sets it, as for timm's ViT): the
released T / S / B were trained at 224 / 288 / 448 px (grids 14, 18, 28). The input sizes are timm's ViT's, by its two
flags: with both off (the default) the model takes ``img_size`` images only (ValueError naming the flags otherwise);
``dynamic_img_size=True`` takes any H x W that are multiples of 16, the position embedding's grid resampled to
(H / 16) x (W / 16) by timm's ``resample_abs_pos_embed`` (bicubic, antialiased; the class token's entry as it is);
``dynamic_img_pad=True`` zero-pads each side bottom/right to the next multiple of 16, ``ceil(H / 16)`` x
``ceil(W / 16)`` patches. At the arch's size the embedding is used as it is, so the model there is the authors'.
Their blocks assume a square map (``h = w = int(sqrt(N))``); these take any H x W.

As timm's ViT, the intermediates are the blocks' outputs: ``feature_info`` has one entry per block (module
``layers.0.blocks.{j}``, ``embed_dims`` channels, reduction 16), :meth:`InLineDeiTClassifier.forward_intermediates`
gives ``t_j`` of the blocks taken by timm's ``feature_take_indices`` as maps (the class token left out, or returned
beside them), and ``features_only=True`` takes the last three blocks unless ``out_indices`` says otherwise.

The released files load through timm as released (:mod:`.deit_checkpoint`; the package's safe, strict loader)::

    timm.create_model('inline_deit_small', pretrained=True, pretrained_cfg_overlay=dict(file='inline_deit_s.pth'))

There is no mmdet/mmseg backbone of this family: a plain ViT has one map at stride 16, not the four-stage pyramid
the dense-prediction configs take.
"""
import torch
from timm.layers import PatchEmbed, resample_abs_pos_embed, to_2tuple
from timm.models import register_model
from timm.models._features import feature_take_indices
from torch import nn

from ...regions import split_regions
from ..classifier import Classifier, create_classifier, released_default_cfgs
from ..errors import ModelArgumentError
from ..stages import Stage, input_regions, to_nhwc
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
OPTIONS = dict(qkv_bias=True, drop_rate=0., dynamic_img_size=False, dynamic_img_pad=False)
NORM_EPS = 1e-6


@graph_leaf   # a leaf of fx graphs: it checks and pads the input by its size
class ViTPatchEmbed(PatchEmbed):
    """timm's ``PatchEmbed`` (conv, kernel = stride = ``patch_size``, no norm), NHWC out, set by timm's ViT flags as
    timm's ViT sets it: ``strict_img_size = not dynamic_img_size`` (only ``img_size`` inputs) and ``dynamic_img_pad``
    (zero padding bottom/right to whole patches; without it, ``dynamic_img_size`` takes multiples of ``patch_size``
    only). ``grid_size`` is the pre-training grid of the position embedding. An input the flags refuse
    raises ValueError naming the flag that takes it (timm's own check raises an assertion without the fix)."""

    def __init__(self, img_size, patch_size, in_chans, embed_dim, dynamic_img_size, dynamic_img_pad):
        super().__init__(img_size, patch_size, in_chans, embed_dim, output_fmt='NHWC',
                         strict_img_size=not dynamic_img_size, dynamic_img_pad=dynamic_img_pad)

    def forward(self, x):
        H, W = x.shape[-2:]
        (h, w), (p, q) = self.img_size, self.patch_size
        if self.strict_img_size and (H, W) != (h, w):
            raise ValueError(
                f'InLine-DeiT was built for {h}x{w} images (img_size), got {H}x{W}: build it with '
                'dynamic_img_size=True to take other sizes (the position embedding resampled to their grid; with '
                f'dynamic_img_pad=True also sides of no multiple of the patch size {p}), or with img_size=({H}, {W})')
        if not self.strict_img_size and not self.dynamic_img_pad and (H % p or W % q):
            raise ValueError(
                f'InLine-DeiT takes sides that are multiples of the patch size {p} x {q}, got {H}x{W}: build it with '
                'dynamic_img_pad=True to zero-pad them bottom/right to whole patches, or crop or resize the images')
        return super().forward(x)


def build(trunk, arch, layout, drop_path_rates, in_channels, with_cp, qkv_bias, drop_rate, dynamic_img_size,
          dynamic_img_pad):
    """The stem (``trunk.patch_embed``, ``trunk.cls_token``, ``trunk.pos_embed``, ``trunk.pos_drop``) and the one
    stage of InLine blocks; ``trunk.dynamic_img_size`` as timm's ViT has it."""
    if len(layout) != 1:
        raise ModelArgumentError(f'InLine-DeiT has one stage (a plain ViT): depths and num_heads take one entry '
                                 f'each, got depths={arch["depths"]}')
    dims = arch['embed_dims']
    trunk.dynamic_img_size = dynamic_img_size
    trunk.patch_embed = ViTPatchEmbed(to_2tuple(arch['img_size']), arch['patch_size'], in_channels, dims,
                                      dynamic_img_size, dynamic_img_pad)
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
    # token (no pooled map); the input size is fixed unless a flag frees it, as for timm's ViT
    pretrained_cfg=dict(crop_mode='squash', first_conv='patch_embed.proj', pool_size=None, fixed_input_size=True))


class InLineDeiTClassifier(Classifier, family=DEIT):
    """InLine-DeiT ImageNet classifier: patch embedding, class token, position embedding, InLine blocks, final
    ``norm``, the class token into ``head`` (module docstring); timm's ViT's feature interface, one feature per block.

    Args (besides :class:`~.classifier.Classifier`'s; ``img_size`` sets the position embedding's grid):
        arch (str | dict): ``'tiny'`` (default), ``'small'``, ``'base'`` (the released models) or a dict with
            ``embed_dims`` (int), ``depths`` and ``num_heads`` (one entry each) and optionally ``img_size``,
            ``patch_size``, ``mlp_ratio``, ``attn_type`` (``'I'``).
        qkv_bias (bool): Bias of ``qkv``. Defaults to True.
        drop_rate (float): Dropout after the position embedding, in MLPs and after the attention projections.
        dynamic_img_size (bool): Take any H x W (multiples of ``patch_size`` unless ``dynamic_img_pad``), the position
            embedding resampled to the input's grid, as timm's ViT. False (default): ``img_size`` inputs only.
        dynamic_img_pad (bool): Zero-pad the input bottom/right to whole patches, as timm's ViT. Defaults to False.
    """

    @classmethod
    def default_out_indices(cls, depths):
        """``features_only``'s default ``out_indices``: the last three blocks, as timm's ViT."""
        return 3

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.feature_info = [dict(num_chs=self.num_features, reduction=self.stride, module=f'layers.0.blocks.{j}')
                             for j in range(len(self.layers[0].blocks))]

    def iter_blocks(self, x, stop=None):
        """Each block's output tokens ``t_j`` (B, 1 + HW, C) with their token map, up to block ``stop``: the stage
        loop's input check (a classifier has no padding-aware mode, so no regions) and the stem, then the one stage's
        blocks one at a time (the stage has no embedding or downsampling, so this is the stage's forward)."""
        x, _ = split_regions(x)
        input_regions(x, None, None, self.min_input_size, False, type(self).__name__, self.in_channels)
        x, tokens = self.stem(x, None)
        for block in self.layers[0].blocks[:None if stop is None else stop + 1]:
            x = block(x, tokens)
            yield x, tokens

    def forward_intermediates(self, x, indices=None, return_prefix_tokens=False, norm=False, stop_early=False,
                              output_fmt='NCHW', intermediates_only=False):
        """timm's ViT's: the outputs ``t_j`` of the blocks ``j`` that timm's ``feature_take_indices`` takes from
        ``indices`` (None: every block; an int n: the last n; a list: those, negative from the end), in block order,
        each through the final ``norm`` if ``norm``, the map's tokens as ``output_fmt`` ``'NCHW'`` (B, C, H, W),
        ``'NHWC'`` or ``'NLC'`` (B, HW, C), with the class token (B, 1, C) beside each (a pair) if
        ``return_prefix_tokens``. Unless ``intermediates_only``, returns ``(norm(t_last), intermediates)``, ``t_last``
        the last block run: every block, or with ``stop_early`` the last one taken (``forward_features``' output
        when all run). With ``intermediates_only`` the blocks after the last one taken are skipped."""
        if output_fmt not in ('NCHW', 'NHWC', 'NLC'):
            raise ValueError(f"output_fmt must be 'NCHW', 'NHWC' or 'NLC', got {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.layers[0].blocks), indices)
        intermediates = []
        for j, (out, tokens) in enumerate(self.iter_blocks(x, max_index if stop_early or intermediates_only else None)):
            if j in take_indices:
                y = self.norm(out) if norm else out
                spatial = y[:, self.num_prefix_tokens:] if output_fmt == 'NLC' else to_nhwc(y, tokens)
                if output_fmt == 'NCHW':
                    spatial = spatial.permute(0, 3, 1, 2).contiguous()
                intermediates.append((spatial, y[:, :self.num_prefix_tokens]) if return_prefix_tokens else spatial)
        if intermediates_only:
            return intermediates
        return self.norm(out), intermediates

    def prune_intermediate_layers(self, indices=1, prune_norm=False, prune_head=True):
        """Drop the blocks after the last of ``indices`` (and the final norm / head if asked), as timm's ViT; returns
        the blocks' indices."""
        take_indices, max_index = feature_take_indices(len(self.layers[0].blocks), indices)
        self.layers[0].blocks = self.layers[0].blocks[:max_index + 1]
        self.prune_top(prune_norm, prune_head)
        return take_indices


# timm's pretrained cfgs of the released models (links: released.RELEASED_CHECKPOINTS; each at its released input
# size) and their model functions, each documented by the paper's figures as released.PAPER_FIGURES has them (a test
# checks that they agree).
default_cfgs = released_default_cfgs(InLineDeiTClassifier, 'inline_deit_', arch_cfgs={
    arch: dict(input_size=(3, preset['img_size'], preset['img_size'])) for arch, preset in ARCH_ZOO.items()})


@register_model
def inline_deit_tiny(pretrained=False, **kwargs) -> InLineDeiTClassifier:
    """InLine-DeiT-T: embed 192, depths 12, layout I; at 224 px ImageNet-1k top-1 74.5 (paper)."""
    return create_classifier(InLineDeiTClassifier, 'inline_deit_tiny', pretrained, arch='tiny', **kwargs)


@register_model
def inline_deit_small(pretrained=False, **kwargs) -> InLineDeiTClassifier:
    """InLine-DeiT-S: embed 320, depths 12, layout I; at 288 px ImageNet-1k top-1 80.2 (paper)."""
    return create_classifier(InLineDeiTClassifier, 'inline_deit_small', pretrained, arch='small', **kwargs)


@register_model
def inline_deit_base(pretrained=False, **kwargs) -> InLineDeiTClassifier:
    """InLine-DeiT-B: embed 384, depths 12, layout I; at 448 px ImageNet-1k top-1 82.3 (paper)."""
    return create_classifier(InLineDeiTClassifier, 'inline_deit_base', pretrained, arch='base', **kwargs)
