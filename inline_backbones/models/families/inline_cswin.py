"""The InLine-CSwin family (:data:`CSWIN`): its table, its mmdet/mmseg backbone :class:`InLineCSwinTransformer` and
its timm classifiers :class:`InLineCSwinClassifier`.

CSWin's four-stage hierarchy (:mod:`.cswin_embed`): a conv stem (7x7, stride 4, padding 2; LayerNorm), then stages of
pre-norm blocks, each but the last followed by a conv merging (3x3, stride 2, padding 1; LayerNorm; width x2).
Each stage's token mixer is the layout letter's (:mod:`~inline_backbones.models.mixers.cswin_attention`): ``I``
global InLine attention with CSWin's LePE and InLine's dynamic 3x3 residual (predicted from the mean of the block's
input), ``S`` CSWin's LePE cross-shaped stripe attention (stripes ``split_size[i]`` wide: 1, 2, 7; the last stage
one branch over the whole map), ``M`` mixed (:mod:`~inline_backbones.models.layout`). Outputs go through a
LayerNorm per stage (``norm0``..``norm3``, as CSWin's segmentation backbone's ``norm1``..``norm4``).

At 224 px with the released settings (layout ``IISS``, the authors' ``CSWIN_LA_SPLIT_SIZE = 56-28-14-7``, which makes
every InLine block one branch over the whole map) the model is the authors' ``CSWinTransformer`` of
``models/inline_cswin.py``. At other sizes the ``I`` blocks stay global over each image's map (not windows of the
224-px stripe width) and the stripes pad each side symmetrically to whole stripes, masking the padding out of the
keys (:mod:`~inline_backbones.models.mixers.cswin_attention` says how this improves on CSWin's own segmentation
backbone). The authors' ``patches_resolution == split_size`` rule (a block whose map is one stripe wide becomes a
single branch) is not followed: the stage decides the branches, as the released keys do.

The classifiers ``inline_cswin_tiny``, ``inline_cswin_small``, ``inline_cswin_base`` are registered in timm's model
registry when ``inline_backbones`` is imported: the trunk (the backbone's keys) and the released head, with ``t``
the last stage's tokens (B, N, C), ``logits = head(mean_N(norm(t)))``. Released files load through timm as released
(:mod:`.cswin_checkpoint` renames their keys; the package's safe, strict loader)::

    timm.create_model('inline_cswin_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_cswin_t.pth'))
"""
import torch
from timm.models import register_model
from torch import nn

from ..backbone import Backbone
from ..classifier import Classifier, create_classifier, released_default_cfgs
from ..stages import Stage
from ..tokens.token_map import TokenMap
from ..trunk import Family
from .cswin_checkpoint import checkpoint_filter_fn
from .cswin_embed import conv_merging, conv_stem

LETTERS = {'I': 'inline_cswin', 'S': 'cswin_stripes'}

# The stripe widths of the S blocks per stage (the last stage's is unused: one branch over the whole map).
ARCH_DEFAULTS = dict(split_size=[1, 2, 7, 7])
ARCH_ZOO = {
    'tiny': dict(embed_dims=64, depths=[2, 4, 18, 1], num_heads=[2, 4, 8, 16], attn_type='IISS', **ARCH_DEFAULTS),
    'small': dict(embed_dims=64, depths=[3, 6, 29, 2], num_heads=[2, 4, 8, 16], attn_type='IISS', **ARCH_DEFAULTS),
    'base': dict(embed_dims=96, depths=[3, 6, 29, 2], num_heads=[4, 8, 16, 32], attn_type='IISS', **ARCH_DEFAULTS),
}

OPTIONS = dict(mlp_ratio=4., qkv_bias=True, drop_rate=0., attn_drop_rate=0.)


def build(trunk, arch, layout, drop_path_rates, in_channels, with_cp, mlp_ratio, qkv_bias, drop_rate, attn_drop_rate):
    """The conv stem (``trunk.patch_embed``, then dropout) and the stages: widths ``embed_dims * 2**i``, a conv
    merging after each but the last, whose ``S`` blocks attend over the whole map."""
    dims = [arch['embed_dims'] * 2 ** i for i in range(len(layout))]
    trunk.patch_embed = conv_stem(in_channels, dims[0])
    trunk.drop_after_pos = nn.Dropout(drop_rate)
    last = len(layout) - 1
    stages = []
    for i, names in enumerate(layout):
        mixer_cfgs = dict(
            inline_cswin=dict(type='inline_cswin', qkv_bias=qkv_bias, proj_drop_rate=drop_rate),
            cswin_stripes=dict(type='cswin_stripes', split_size=None if i == last else arch['split_size'][i],
                               qkv_bias=qkv_bias, attn_drop_rate=attn_drop_rate, proj_drop_rate=drop_rate))
        stages.append(Stage(
            dims[i], arch['num_heads'][i], [mixer_cfgs[name] for name in names], mlp_ratio=mlp_ratio,
            drop_rate=drop_rate, drop_path_rates=drop_path_rates[i], with_cp=with_cp,
            downsample=conv_merging(dims[i], dims[i + 1]) if i < last else None))
    return stages, dims, 4


def stem(trunk, x, regions):
    """The conv stem of the (checked, masked) images: the tokens and :class:`~.token_map.TokenMap` the first stage
    takes."""
    tokens, token_map = trunk.patch_embed(x, _pixel_map(x, regions))
    return trunk.drop_after_pos(tokens), token_map


@torch.fx.wrap   # a leaf of fx graphs: it reads sizes
def _pixel_map(images, regions):
    """The pixel-level map of ``images`` (B, C, H, W)."""
    return TokenMap(images.shape[-2:], images.shape[0], images.device, regions)


CSWIN = Family(
    name='InLine-CSwin', arch_zoo=ARCH_ZOO, letters=LETTERS, mixed=('I', 'S'), options=OPTIONS, build=build,
    stem=stem, checkpoint_filter=checkpoint_filter_fn, arch_defaults=ARCH_DEFAULTS,
    per_stage=('depths', 'num_heads', 'split_size'), stem_modules=('patch_embed',), output_norms=True,
    # the authors' evaluation: squash-resize to 256 x 256, centre crop 224
    pretrained_cfg=dict(crop_mode='squash', first_conv='patch_embed.proj'))


class InLineCSwinTransformer(Backbone, family=CSWIN):
    """InLine-CSwin Transformer (Han et al., "Bridging the Divide: Reconsidering Softmax and Linear Attention",
    NeurIPS 2024; CSWin: Dong et al., CVPR 2022) as a dense-prediction backbone.

    Four stages at strides 4, 8, 16, 32 (widths 64-128-256-512 for T and S, 96-192-384-768 for B); each stage's
    blocks use global InLine attention with LePE (``I``) or CSWin's cross-shaped stripe attention (``S``), as the
    layout ``attn_type`` sets (the released models: ``IISS``). Any input size: the InLine blocks attend over each
    image's whole map, the stripes pad symmetrically to whole stripes and mask the padding (module docstring).

    Args:
        arch (str | dict): ``'tiny'`` (default), ``'small'``, ``'base'`` (the released models) or a dict with
            ``embed_dims``, ``depths``, ``num_heads`` (one entry per stage) and optionally ``split_size`` (the
            stripe widths per stage, default 1-2-7-7) and ``attn_type``.
        attn_type (str, optional): Layout overriding the preset's, one letter per stage, e.g. ``'IISS'``.
        in_channels (int): Input channels. Defaults to 3.
        mlp_ratio (float): MLP hidden ratio. Defaults to 4.
        qkv_bias (bool): Bias of ``qkv``. Defaults to True.
        drop_rate (float): Dropout after the stem, in MLPs and after the attention projections (0 in the authors'
            training; their blocks define no dropout after the projection).
        attn_drop_rate (float): Dropout on the stripes' softmax weights.
        drop_path_rate (float): Stochastic depth, linearly increasing over all blocks. Defaults to 0.1 (the authors
            trained T / S / B with 0.2 / 0.4 / 0.5).
        out_indices (Sequence[int]): Stages whose outputs are returned, each through ``norm{i}``.
        frozen_stages (int): Freeze the stem (>= 0) and the first ``frozen_stages`` stages (with their output norms
            and the merging that ends each). -1 freezes nothing.
        norm_eval (bool): Keep normalization layers in eval mode during training.
        with_cp (bool): Gradient checkpointing of every block.
        padding_aware (bool): Each image of a zero-padded batch sees only its own region (its own InLine means,
            residual and LePE, its own stripes): its features do not depend on its batch.
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=PATH_OR_LINK[, prefix='backbone.'])`` loads a
            released ImageNet checkpoint (or a detector's / segmentor's with ``prefix``) strictly, through
            :func:`inline_backbones.checkpoints.loading.load_pretrained` and :mod:`.cswin_checkpoint`.
    """


class InLineCSwinClassifier(Classifier, family=CSWIN):
    """InLine-CSwin ImageNet classifier: the trunk, final ``norm``, average pool, ``head`` (arguments:
    :class:`~.classifier.Classifier`; options: :class:`InLineCSwinTransformer`'s)."""


# timm's pretrained cfgs of the released models (links: released.RELEASED_CHECKPOINTS) and their model functions,
# each documented by the paper's figures as released.PAPER_FIGURES has them (a test checks that they agree).
default_cfgs = released_default_cfgs(InLineCSwinClassifier, 'inline_cswin_')


@register_model
def inline_cswin_tiny(pretrained=False, **kwargs) -> InLineCSwinClassifier:
    """InLine-CSwin-T: embed 64, depths 2-4-18-1, layout IISS; ImageNet-1k top-1 83.2 (paper)."""
    return create_classifier(InLineCSwinClassifier, 'inline_cswin_tiny', pretrained, arch='tiny', **kwargs)


@register_model
def inline_cswin_small(pretrained=False, **kwargs) -> InLineCSwinClassifier:
    """InLine-CSwin-S: embed 64, depths 3-6-29-2, layout IISS; ImageNet-1k top-1 83.8 (paper)."""
    return create_classifier(InLineCSwinClassifier, 'inline_cswin_small', pretrained, arch='small', **kwargs)


@register_model
def inline_cswin_base(pretrained=False, **kwargs) -> InLineCSwinClassifier:
    """InLine-CSwin-B: embed 96, depths 3-6-29-2, layout IISS; ImageNet-1k top-1 84.5 (paper)."""
    return create_classifier(InLineCSwinClassifier, 'inline_cswin_base', pretrained, arch='base', **kwargs)
