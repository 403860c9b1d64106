"""The InLine-Swin family (:data:`SWIN`): its table, its mmdet/mmseg backbone :class:`InLineSwinTransformer` and
its timm classifiers :class:`InLineSwinClassifier`.

Swin's four-stage hierarchy: a stride-``patch_size`` patch embedding (the stem), then stages of pre-norm blocks,
each but the last followed by patch merging (stride x2, width x2). Each stage's token mixer is the layout letter's:
``I`` InLine attention (global, or in windows), ``S`` Swin's shifted-window softmax, ``L`` plain linear attention,
``F`` FLatten's focused linear attention (in windows, or global), ``M`` mixed (:mod:`~inline_backbones.models.layout`).
Outputs go through a LayerNorm per stage.

The presets ``flatten-tiny``, ``flatten-small``, ``flatten-base`` are the authors' FLatten-Swin-T/S/B (Han et al.,
ICCV 2023; LeapLabTHU/FLatten-Transformer), the comparison models: Swin-T/S/B's trunk with layout ``FFSS``, the
``F`` blocks in windows of ``min(flatten_window_size, flatten_img_size / (patch_size * 2**i))`` tokens in stage
``i`` (56 and 28 at 224 px: the whole maps of stages 1 and 2, each with its positional encoding of that size), the
softmax blocks in Swin's windows of 7. Their released files load as InLine-Swin's do (the same key filter), and
timm's ``flatten_swin_{tiny,small,base}`` (:mod:`.flatten_swin`) are their classifiers.

The classifiers ``inline_swin_tiny``, ``inline_swin_small``, ``inline_swin_base`` are registered in timm's model
registry when ``inline_backbones`` is imported: the family's trunk (the backbone's keys) and the released model's
head: with ``t`` the tokens (B, N, C) out of the last stage, ``logits = head(mean_N(norm(t)))`` (LayerNorm
``norm``, average over the N tokens, Linear ``head``). Their state dicts hold exactly the keys of the released
checkpoints (``patch_embed.*``, ``layers.*``, ``norm.*``, ``head.*``) except the buffers ``relative_position_index``
and ``attn_mask``, which the model rebuilds (:data:`.swin_checkpoint.RELEASED_BUFFERS`).

Released files load through timm: ``pretrained=True`` downloads the authors' file once (torch's hub cache,
verified; offline, the error says where to put a copy), or name a local copy::

    timm.create_model('inline_swin_tiny', pretrained=True)
    timm.create_model('inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_swin_t.pth'))

timm hands the file to :meth:`~.classifier.Classifier.load_pretrained` (``custom_load`` in the
pretrained cfg), which reads it with the package's safe loader (``weights_only=True``, yacs not needed) and loads
it strictly: anything missing, unexpected or mis-shaped raises
:class:`~inline_backbones.checkpoints.loading.CheckpointMismatchError` naming the keys. ``num_classes=N``
(N != 1000) keeps a new head; ``features_only=True`` gives the NCHW maps of the stages (timm's
``FeatureGetterNet`` over :meth:`~.classifier.Classifier.forward_intermediates`).
"""
import torch
from timm.models import register_model
from torch import nn

from ..backbone import Backbone
from ..classifier import Classifier, create_classifier, released_default_cfgs
from ..errors import ModelArgumentError
from ..stages import Stage
from ..tokens.token_map import TokenMap
from ..trunk import Family
from ..upstream_args import SWIN_ARGS, translate
from .swin_checkpoint import checkpoint_filter_fn
from .swin_embed import PatchEmbed, PatchMerging

LETTERS = {'I': 'inline', 'S': 'window', 'L': 'linear', 'F': 'flatten'}

ARCH_ZOO = {
    'tiny': dict(embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], attn_type='IIIS'),
    'small': dict(embed_dims=96, depths=[2, 2, 18, 2], num_heads=[3, 6, 12, 24], attn_type='IISS'),
    'base': dict(embed_dims=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32], attn_type='IIMS2'),
    # FLatten-Swin-T/S/B, the authors' cfgs/flatten_swin_{t,s,b}.yaml (their layout LLSS: L is their FLatten letter)
    'flatten-tiny': dict(embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], attn_type='FFSS'),
    'flatten-small': dict(embed_dims=96, depths=[2, 2, 18, 2], num_heads=[3, 6, 12, 24], attn_type='FFSS'),
    'flatten-base': dict(embed_dims=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32], attn_type='FFSS'),
}

OPTIONS = dict(kernel_func='identity', patch_size=4, window_size=7, mlp_ratio=4., qkv_bias=True, drop_rate=0.,
               attn_drop_rate=0., local_residual=True, linear_kernel_func='relu', inline_window_size=None,
               flatten_window_size=56, flatten_img_size=224, flatten_global=False, focusing_factor=3,
               flatten_kernel_size=5)


def build(trunk, arch, layout, drop_path_rates, in_channels, with_cp, kernel_func, patch_size, window_size, mlp_ratio,
          qkv_bias, drop_rate, attn_drop_rate, local_residual, linear_kernel_func, inline_window_size,
          flatten_window_size, flatten_img_size, flatten_global, focusing_factor, flatten_kernel_size):
    """Patch embedding (``trunk.patch_embed``, then dropout), and the stages: widths ``embed_dims * 2**i``, patch
    merging after each but the last. FLatten blocks of stage ``i`` get windows (and a positional encoding) of
    ``min(flatten_window_size, flatten_img_size // (patch_size * 2**i))`` tokens a side, the authors' rule."""
    if inline_window_size is not None and (isinstance(inline_window_size, bool)
                                           or not isinstance(inline_window_size, int) or inline_window_size < 1):
        raise ModelArgumentError(f'inline_window_size must be None or a positive int, got {inline_window_size!r}')
    if any('linear' in stage for stage in layout) and inline_window_size is not None:
        raise ModelArgumentError(f'layout {trunk.attn_type!r} has plain linear attention blocks (letter L, an '
                                 'ablation), which attend globally: inline_window_size must be None')
    trunk.inline_window_size = inline_window_size
    trunk.patch_size = patch_size
    trunk.patch_embed = PatchEmbed(in_channels, arch['embed_dims'], patch_size)
    trunk.drop_after_pos = nn.Dropout(drop_rate)
    mixer_cfgs = dict(
        inline=dict(type='inline', qkv_bias=qkv_bias, kernel_func=kernel_func, proj_drop_rate=drop_rate,
                    local_residual=local_residual, window_size=inline_window_size),
        window=dict(type='window', window_size=window_size, qkv_bias=qkv_bias, attn_drop_rate=attn_drop_rate,
                    proj_drop_rate=drop_rate),
        linear=dict(type='linear', qkv_bias=qkv_bias, kernel_func=linear_kernel_func, proj_drop_rate=drop_rate))
    num_stages = len(layout)
    stages, dims = [], [arch['embed_dims'] * 2 ** i for i in range(num_stages)]
    for i, names in enumerate(layout):
        mixer_cfgs['flatten'] = dict(
            type='flatten', window_size=min(flatten_window_size, flatten_img_size // (patch_size * 2 ** i)),
            qkv_bias=qkv_bias, focusing_factor=focusing_factor, kernel_size=flatten_kernel_size,
            proj_drop_rate=drop_rate, global_attention=flatten_global)
        stages.append(Stage(
            dims[i], arch['num_heads'][i], [mixer_cfgs[name] for name in names], mlp_ratio=mlp_ratio,
            drop_rate=drop_rate, drop_path_rates=drop_path_rates[i], with_cp=with_cp,
            downsample=PatchMerging(dims[i], 2 * dims[i]) if i < num_stages - 1 else None))
    return stages, dims, patch_size


def stem(trunk, x, regions):
    """Patch embedding of the (checked, masked) images: the tokens and :class:`~.token_map.TokenMap`
    the first stage takes."""
    tokens, hw_shape = trunk.patch_embed(x)
    return trunk.drop_after_pos(tokens), _token_map(x, hw_shape, regions, trunk.patch_size)


@torch.fx.wrap   # a leaf of fx graphs: it branches on sizes
def _token_map(images, hw_shape, regions, stride):
    """The map of the tokens of a stride-``stride`` patch embedding of ``images``."""
    return TokenMap(images.shape[-2:], images.shape[0], images.device, regions).downsampled(hw_shape, stride)


SWIN = Family(
    name='InLine-Swin', arch_zoo=ARCH_ZOO, letters=LETTERS, mixed=('I', 'S'), options=OPTIONS, build=build, stem=stem,
    checkpoint_filter=checkpoint_filter_fn, stem_modules=('patch_embed',), output_norms=True,
    position_params=('relative_position_bias_table',),
    # evaluation as in the authors' (Swin's) code: short side to 256, centre crop 224
    pretrained_cfg=dict(crop_mode='center', first_conv='patch_embed.proj'))


class InLineSwinTransformer(Backbone, family=SWIN):
    """InLine-Swin Transformer (Han et al., "Bridging the Divide: Reconsidering Softmax and Linear
    Attention", NeurIPS 2024) as a dense-prediction backbone.

    Swin's four-stage hierarchy where each stage uses InLine attention (global over the whole feature map
    of each image, linear in the number of tokens) or Swin's shifted-window softmax attention, as set by
    the layout ``attn_type`` (see :func:`parse_attn_layout`). Any input size works: patch embedding and
    patch merging pad odd sizes, window attention pads to window multiples.

    mmdet's and mmseg's ``SwinTransformer`` arguments are taken too (``embed_dims`` + ``depths`` + ``num_heads``
    select the preset, ``qk_scale``, ``patch_norm``, ``strides``, ... are checked), and an upstream Swin checkpoint
    in ``init_cfg`` is refused: :mod:`inline_backbones.models.upstream_args`.

    Args:
        arch (str | dict): ``'tiny'`` (default), ``'small'``, ``'base'`` (the released models),
            ``'flatten-tiny'``, ``'flatten-small'``, ``'flatten-base'`` (FLatten-Swin-T/S/B, layout ``FFSS``) or a
            dict with ``embed_dims``, ``depths``, ``num_heads`` and optionally ``attn_type``.
        attn_type (str, optional): Layout string overriding the preset's, e.g. ``'IIIS'``.
        kernel_func (str): InLine kernel on q and k: ``identity`` | ``relu`` | ``leakyrelu`` | ``exp``.
        local_residual (bool): InLine blocks add the dynamic 3x3 local residual. False is an ablation
            (plain injective linear attention, no ``residual`` modules). Defaults to True (released).
        linear_kernel_func (str): Kernel of the plain linear attention blocks (layout letter ``L``):
            ``relu`` (default) or ``exp``.
        in_channels (int): Input channels. Defaults to 3.
        patch_size (int): Patch embedding stride. Defaults to 4.
        window_size (int): Window of the softmax blocks. Defaults to 7.
        mlp_ratio (float): MLP hidden ratio. Defaults to 4.
        qkv_bias (bool): Bias in ``qkv``. Defaults to True.
        drop_rate (float): Dropout after patch embedding, in MLPs and after attention projections.
        attn_drop_rate (float): Dropout on softmax attention weights.
        drop_path_rate (float): Stochastic depth, linearly increasing over all blocks. Defaults to 0.1.
        out_indices (Sequence[int]): Stages whose outputs are returned, each through ``norm{i}``.
        frozen_stages (int): Freeze the patch embedding (>= 0) and the first ``frozen_stages`` stages
            (with their output norms). -1 freezes nothing.
        norm_eval (bool): Keep normalization layers in eval mode during training (LayerNorm has no
            running statistics, so this only matters for BatchNorm layers a subclass adds).
        with_cp (bool): Gradient checkpointing of every block (saves memory, same results).
        padding_aware (bool): Exclude everything outside each image's own region of a zero-padded batch
            (see :meth:`forward`), so an image's features on its region do not depend on its batch.
            Defaults to False (today's behaviour, bit for bit).
        inline_window_size (int, optional): None: InLine blocks attend globally (default). An int:
            InLine blocks attend within windows of that size, shifted by half on odd blocks of each
            stage, as in the authors' code (56 there); see :mod:`inline_backbones.models.tokens.masks`.
        flatten_window_size (int): FLatten blocks (letter ``F``): the authors' window size (56, the released
            models'); stage ``i``'s windows and positional encoding are ``min(flatten_window_size,
            flatten_img_size // (patch_size * 2**i))`` tokens a side.
        flatten_img_size (int): The image size the FLatten blocks' positional encodings were made for (224).
        flatten_global (bool): FLatten blocks attend over each image's whole map, their positional encodings
            resized to it bicubically. Defaults to False (the authors' windows).
        focusing_factor (int | float): FLatten's focusing power. Defaults to 3 (released).
        flatten_kernel_size (int): FLatten's depthwise conv on v. Defaults to 5 (released).
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=PATH[, prefix='backbone.'])``
            loads a released ImageNet checkpoint (or a detector/segmentor one with ``prefix``) strictly:
            see :func:`inline_backbones.checkpoints.loading.load_pretrained`.
    """

    def __init__(self, arch=None, attn_type=None, **kwargs):
        arch, kwargs = translate(SWIN_ARGS, type(self), arch, attn_type, kwargs)
        super().__init__(arch, attn_type, **kwargs)


class InLineSwinClassifier(Classifier, family=SWIN):
    """InLine-Swin ImageNet classifier: the trunk, final ``norm``, average pool, ``head`` (arguments:
    :class:`~.classifier.Classifier`; options: :class:`InLineSwinTransformer`'s)."""


# timm's pretrained cfgs of the released models (links: released.RELEASED_CHECKPOINTS) and their model functions,
# each documented by the paper's figures as released.PAPER_FIGURES has them (a test checks that they agree).
default_cfgs = released_default_cfgs(InLineSwinClassifier, 'inline_swin_')


@register_model
def inline_swin_tiny(pretrained=False, **kwargs) -> InLineSwinClassifier:
    """InLine-Swin-T: embed 96, depths 2-2-6-2, layout IIIS; ImageNet-1k top-1 82.4 (paper)."""
    return create_classifier(InLineSwinClassifier, 'inline_swin_tiny', pretrained, arch='tiny', **kwargs)


@register_model
def inline_swin_small(pretrained=False, **kwargs) -> InLineSwinClassifier:
    """InLine-Swin-S: embed 96, depths 2-2-18-2, layout IISS; ImageNet-1k top-1 83.6 (paper)."""
    return create_classifier(InLineSwinClassifier, 'inline_swin_small', pretrained, arch='small', **kwargs)


@register_model
def inline_swin_base(pretrained=False, **kwargs) -> InLineSwinClassifier:
    """InLine-Swin-B: embed 128, depths 2-2-18-2, layout IIMS2; ImageNet-1k top-1 84.1 (paper)."""
    return create_classifier(InLineSwinClassifier, 'inline_swin_base', pretrained, arch='base', **kwargs)
