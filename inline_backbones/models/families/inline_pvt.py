"""The InLine-PVT family (:data:`PVT`; also PVT v1): its table, its mmdet/mmseg backbone :class:`InLinePVT`
and its timm classifiers :class:`InLinePVTClassifier`.

Four stages, each its own patch embedding (conv, kernel = stride = 4, then 2, 2, 2; LayerNorm) and position
embedding (:class:`~.pvt_embed.PVTEmbed`) then pre-norm blocks; no stem modules, no output norms.

The classifiers ``inline_pvt_{tiny,small,medium,large}`` are registered in timm's model registry when
``inline_backbones`` is imported: the family's trunk (the backbone's keys) and the released model's head: with
``t`` the tokens (B, N, C) out of the last stage, ``logits = head(mean_N(t))`` (no final norm, no class token).
Their state dicts hold our names for the released keys (:mod:`.pvt_checkpoint`); released files load through
timm as released::

    timm.create_model('inline_pvt_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_pvt_t.pth'))

timm hands the file to :meth:`~.classifier.Classifier.load_pretrained` (``custom_load``): the
package's safe loader (``weights_only=True``, yacs not needed), strict (anything missing, unexpected or
mis-shaped raises :class:`~inline_backbones.checkpoints.loading.CheckpointMismatchError` naming the keys).
``pretrained=True`` alone downloads the released file (``url`` of the pretrained cfg) into torch's hub cache first
(the package's verified download, :func:`~.classifier.create_classifier`).
"""
import torch
import torch.nn.functional as F
from timm.models import register_model

from ..backbone import Backbone
from ..classifier import Classifier, create_classifier, released_default_cfgs
from ..errors import ModelArgumentError
from ..stages import Stage
from ..tokens.token_map import TokenMap
from ..trunk import Family
from ..upstream_args import PVT_ARGS, translate
from .pvt_checkpoint import checkpoint_filter_fn
from .pvt_embed import PVTEmbed

# Layout letters of the PVT family: mixer names of :mod:`.mixers`.
LETTERS = {'I': 'inline_pvt', 'S': 'spatial_reduction'}

_PVT_COMMON = dict(embed_dims=[64, 128, 320, 512], mlp_ratios=[8, 8, 4, 4], sr_ratios=[8, 4, 2, 1])
_INLINE_PVT = dict(_PVT_COMMON, num_heads=[2, 4, 10, 16], attn_type='IIII', patch_norm_eps=1e-5, sr_norm_eps=1e-5,
                   block_norm_eps=1e-6)
# PVT v1 as mmdet's PyramidVisionTransformer builds it (every norm eps 1e-6; official PVT v1 has 1e-5 in
# the patch-embedding and reduction norms, and a class token in stage 4).
_PVT_V1 = dict(_PVT_COMMON, num_heads=[1, 2, 5, 8], attn_type='SSSS', patch_norm_eps=1e-6, sr_norm_eps=1e-6,
               block_norm_eps=1e-6)
_DEPTHS = {'tiny': [2, 2, 2, 2], 'small': [3, 4, 6, 3], 'medium': [3, 4, 18, 3], 'large': [3, 8, 27, 3]}
# What a custom arch dict may leave out: InLine-PVT's values.
ARCH_DEFAULTS = {k: v for k, v in _INLINE_PVT.items() if k not in ('embed_dims', 'num_heads', 'attn_type')}
ARCH_ZOO = {**{size: dict(_INLINE_PVT, depths=depths) for size, depths in _DEPTHS.items()},
            **{f'pvt-v1-{size}': dict(_PVT_V1, depths=depths) for size, depths in _DEPTHS.items()}}



OPTIONS = dict(la_sr_ratios=1, pretrain_img_size=224, qkv_bias=True, drop_rate=0., attn_drop_rate=0.)


def build(trunk, arch, layout, drop_path_rates, in_channels, with_cp, la_sr_ratios, pretrain_img_size, qkv_bias,
          drop_rate, attn_drop_rate):
    """The stages, each with its patch and position embedding (pre-training grid ``pretrain_img_size / stride``)."""
    la_sr = [int(r) for r in (str(la_sr_ratios) if isinstance(la_sr_ratios, (int, str)) else la_sr_ratios)]
    if any(r != 1 for r in la_sr):
        raise ModelArgumentError(f'la_sr_ratios {la_sr_ratios!r}: InLine-PVT supports 1 only (no key reduction in '
                                 'InLine stages); the authors\' la_sr_ratio > 1 is broken and unused by the released '
                                 'models')
    dims = arch['embed_dims']
    stages, grid, channels = [], pretrain_img_size, in_channels
    for i, names in enumerate(layout):
        patch_size = 2 if i else 4                  # strides 4, 8, 16, 32
        grid //= patch_size
        mixer_cfgs = {
            'inline_pvt': dict(type='inline_pvt', qkv_bias=qkv_bias, proj_drop_rate=drop_rate),
            'spatial_reduction': dict(type='spatial_reduction', sr_ratio=arch['sr_ratios'][i], qkv_bias=qkv_bias,
                                      attn_drop_rate=attn_drop_rate, proj_drop_rate=drop_rate,
                                      norm_eps=arch['sr_norm_eps'])}
        embed = PVTEmbed(channels, dims[i], patch_size, (grid, grid), norm_eps=arch['patch_norm_eps'],
                         drop_rate=drop_rate)
        stages.append(Stage(
            dims[i], arch['num_heads'][i], [mixer_cfgs[name] for name in names], mlp_ratio=arch['mlp_ratios'][i],
            drop_rate=drop_rate, drop_path_rates=drop_path_rates[i], with_cp=with_cp, norm_eps=arch['block_norm_eps'],
            embed=embed))
        channels = dims[i]
    return stages, list(dims), 4


def stem(trunk, x, regions):
    """The (checked, masked) images and their pixel-level :class:`~.token_map.TokenMap`: stage 1's
    embedding takes them."""
    return _pixel_map(x, regions, trunk.min_input_size)


PVT = Family(
    name='InLine-PVT', arch_zoo=ARCH_ZOO, letters=LETTERS, mixed=('I', 'S'), options=OPTIONS, build=build, stem=stem,
    checkpoint_filter=checkpoint_filter_fn, arch_defaults=ARCH_DEFAULTS,
    per_stage=('embed_dims', 'depths', 'num_heads', 'mlp_ratios', 'sr_ratios'), position_params=('pos_embed',),
    # the authors' evaluation: squash-resize to 256 x 256, centre crop 224
    pretrained_cfg=dict(crop_mode='squash', first_conv='layers.0.embed.proj'))


class InLinePVT(Backbone, family=PVT):
    """InLine-PVT (Han et al., "Bridging the Divide: Reconsidering Softmax and Linear Attention", NeurIPS
    2024), and PVT v1 (Wang et al., ICCV 2021), as dense-prediction backbones.

    Four stages; stage i: patch embedding (conv, kernel = stride = 4, then 2, 2, 2; LayerNorm) + absolute
    position embedding of the pre-training grid, resized bilinearly to the stage's grid (:mod:`.pvt_embed`),
    then pre-norm blocks whose token mixer the layout letter of the stage picks: ``I`` = InLine attention
    (global, :class:`~.pvt_attention.InLinePVTAttention`), ``S`` = spatial-reduction softmax attention
    (:class:`~.pvt_attention.SpatialReductionAttention`, reduction ``sr_ratios[i]``). No norm after any stage:
    the outputs are the last block's tokens as NCHW maps (strides 4, 8, 16, 32). Sizes not divisible by 32
    floor at each patch embedding, as the authors' convs do.

    mmdet's ``PyramidVisionTransformer`` arguments are taken too (``embed_dims`` + ``num_layers`` + ``num_heads`` +
    ``mlp_ratios`` + ``sr_ratios`` select the preset, ``patch_sizes``, ``paddings``, ... are checked), and an
    upstream PVT checkpoint in ``init_cfg`` is refused: :mod:`inline_backbones.models.upstream_args`.

    Args:
        arch (str | dict): ``'tiny'`` (default), ``'small'``, ``'medium'``, ``'large'`` (the released InLine-PVT models:
            widths 64-128-320-512, heads 2-4-10-16, layout ``IIII``), ``'pvt-v1-tiny'`` ... ``'pvt-v1-large'``
            (PVT v1: heads 1-2-5-8, layout ``SSSS``, every norm eps 1e-6 as mmdet's), or a dict with
            ``embed_dims``, ``depths``, ``num_heads`` (one entry per stage) and optionally ``mlp_ratios``,
            ``sr_ratios``, ``attn_type``, ``patch_norm_eps``, ``sr_norm_eps``, ``block_norm_eps``
            (defaults: InLine-PVT's 8-8-4-4, 8-4-2-1, 1e-5, 1e-5, 1e-6).
        attn_type (str, optional): Layout overriding the arch's, one letter per stage, e.g. ``'IISS'``.
        la_sr_ratios (int | str | Sequence[int]): Key reduction of the InLine stages: 1 only (the released
            ``1111``); anything else raises ValueError.
        in_channels (int): Input channels. Defaults to 3.
        pretrain_img_size (int): Image size of the position embeddings' grids (224: 56, 28, 14, 7 tokens).
        qkv_bias (bool): Bias of ``q`` and ``kv``. Defaults to True.
        drop_rate (float): Dropout after the position embeddings, in MLPs and after attention projections.
        attn_drop_rate (float): Dropout on spatial-reduction attention weights.
        drop_path_rate (float): Stochastic depth, linearly increasing over all blocks. Defaults to 0.1.
        out_indices (Sequence[int]): Stages whose outputs are returned.
        frozen_stages (int): Freeze the first ``frozen_stages`` stages (each with its patch and position
            embedding); -1 and 0 freeze nothing.
        norm_eval (bool): Keep normalization layers in eval mode during training.
        with_cp (bool): Gradient checkpointing of every block.
        padding_aware (bool): Each image of a zero-padded batch sees only its own region (see :meth:`forward`).
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=PATH[, prefix='backbone.'])`` loads a
            released ImageNet checkpoint (or a detector's / segmentor's with ``prefix``) strictly, through
            :func:`inline_backbones.checkpoints.loading.load_pretrained` and :mod:`.pvt_checkpoint`.
    """

    def __init__(self, arch=None, attn_type=None, **kwargs):
        arch, kwargs = translate(PVT_ARGS, type(self), arch, attn_type, kwargs)
        super().__init__(arch, attn_type, **kwargs)


class InLinePVTClassifier(Classifier, family=PVT):
    """InLine-PVT ImageNet classifier: the stages, average pool, ``head`` (no final norm) (arguments:
    :class:`~.classifier.Classifier`; options: :class:`InLinePVT`'s)."""


@torch.fx.wrap   # a leaf of fx graphs: it branches on sizes
def _pixel_map(images, regions, multiple):
    """``images`` (B, C, H, W) and their pixel-level map; in padding-aware mode (``regions`` given) zero-padded
    bottom/right to a multiple of ``multiple`` first."""
    if regions is not None:
        H, W = images.shape[-2:]
        images = F.pad(images, (0, (-W) % multiple, 0, (-H) % multiple))
    return images, TokenMap(images.shape[-2:], images.shape[0], images.device, regions)


# timm's pretrained cfgs of the released models (links: released.RELEASED_CHECKPOINTS) and their model functions,
# each documented by the paper's figures as released.PAPER_FIGURES has them (a test checks that they agree).
default_cfgs = released_default_cfgs(InLinePVTClassifier, 'inline_pvt_')


@register_model
def inline_pvt_tiny(pretrained=False, **kwargs) -> InLinePVTClassifier:
    """InLine-PVT-T: depths 2-2-2-2, layout IIII; 12.0M params, 2.0G FLOPs (paper)."""
    return create_classifier(InLinePVTClassifier, 'inline_pvt_tiny', pretrained, arch='tiny', **kwargs)


@register_model
def inline_pvt_small(pretrained=False, **kwargs) -> InLinePVTClassifier:
    """InLine-PVT-S: depths 3-4-6-3, layout IIII; 21.6M params, 3.9G FLOPs (paper)."""
    return create_classifier(InLinePVTClassifier, 'inline_pvt_small', pretrained, arch='small', **kwargs)


@register_model
def inline_pvt_medium(pretrained=False, **kwargs) -> InLinePVTClassifier:
    """InLine-PVT-M: depths 3-4-18-3, layout IIII; 37.6M params, 6.9G FLOPs (paper)."""
    return create_classifier(InLinePVTClassifier, 'inline_pvt_medium', pretrained, arch='medium', **kwargs)


@register_model
def inline_pvt_large(pretrained=False, **kwargs) -> InLinePVTClassifier:
    """InLine-PVT-L: depths 3-8-27-3, layout IIII; 51.2M params (paper: 50.2M), 10.2G FLOPs."""
    return create_classifier(InLinePVTClassifier, 'inline_pvt_large', pretrained, arch='large', **kwargs)
