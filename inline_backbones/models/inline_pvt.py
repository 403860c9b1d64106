"""InLine-PVT (and PVT v1) backbone for mmdet 3.x and mmseg 1.x."""
import copy

import torch
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_
from torch import nn

from ..registry import MODELS
from .backbone import StagedBackbone
from .layout import parse_attn_layout
from .pvt_checkpoint import checkpoint_filter_fn
from .pvt_embed import PVTEmbed
from .stages import Stage, iter_stages, to_nchw
from .token_map import TokenMap

# Layout letters of the PVT family: mixer names of :mod:`.mixers`.
PVT_LETTERS = {'I': 'inline_pvt', 'S': 'spatial_reduction'}

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


@MODELS.register_module()
class InLinePVT(StagedBackbone):
    """InLine-PVT (Han et al., "Bridging the Divide: Reconsidering Softmax and Linear Attention", NeurIPS
    2024), and PVT v1 (Wang et al., ICCV 2021), as dense-prediction backbones.

    Four stages; stage i: patch embedding (conv, kernel = stride = 4, then 2, 2, 2; LayerNorm) + absolute
    position embedding of the pre-training grid, resized bilinearly to the stage's grid (:mod:`.pvt_embed`),
    then pre-norm blocks whose token mixer the layout letter of the stage picks: ``I`` = InLine attention
    (global, :class:`~.pvt_attention.InLinePVTAttention`), ``S`` = spatial-reduction softmax attention
    (:class:`~.pvt_attention.SpatialReductionAttention`, reduction ``sr_ratios[i]``). No norm after any stage:
    the outputs are the last block's tokens as NCHW maps (strides 4, 8, 16, 32). Sizes not divisible by 32
    floor at each patch embedding, as the authors' convs do.

    Args:
        arch (str | dict): ``'tiny'``, ``'small'``, ``'medium'``, ``'large'`` (the released InLine-PVT models:
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
            :func:`inline_backbones.checkpoint.load_pretrained` and :mod:`.pvt_checkpoint`.
    """

    checkpoint_filter = staticmethod(checkpoint_filter_fn)

    arch_zoo = {**{size: dict(_INLINE_PVT, depths=depths) for size, depths in _DEPTHS.items()},
                **{f'pvt-v1-{size}': dict(_PVT_V1, depths=depths) for size, depths in _DEPTHS.items()}}

    def __init__(self, arch='tiny', attn_type=None, la_sr_ratios=1, in_channels=3, pretrain_img_size=224,
                 qkv_bias=True, drop_rate=0., attn_drop_rate=0., drop_path_rate=0.1, out_indices=(0, 1, 2, 3),
                 frozen_stages=-1, norm_eval=False, with_cp=False, padding_aware=False, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        arch = self._resolve_arch(arch)
        attn_type = arch.get('attn_type') if attn_type is None else attn_type
        if attn_type is None:
            raise ValueError('a custom arch needs an attention layout: give attn_type, e.g. "IIII"')
        depths = arch['depths']
        num_stages = len(depths)
        layout = parse_attn_layout(attn_type, depths, letters=PVT_LETTERS)
        la_sr = [int(r) for r in (str(la_sr_ratios) if isinstance(la_sr_ratios, (int, str)) else la_sr_ratios)]
        if any(r != 1 for r in la_sr):
            raise ValueError(f'la_sr_ratios {la_sr_ratios!r}: InLine-PVT supports 1 only (no key reduction in InLine '
                             'stages); the authors\' la_sr_ratio > 1 is broken and unused by the released models')
        self._set_conventions(out_indices, frozen_stages, norm_eval, num_stages)

        self.arch = arch
        self.attn_type = attn_type
        self.padding_aware = bool(padding_aware)
        self.in_channels = in_channels
        patch_sizes = [4] + [2] * (num_stages - 1)
        self.min_input_size = 4 * 2 ** (num_stages - 1)

        dims = arch['embed_dims']
        dpr = torch.linspace(0, drop_path_rate, sum(depths), device='cpu').tolist()   # also under a meta device
        self.layers = nn.ModuleList()
        grid, channels = pretrain_img_size, in_channels
        for i in range(num_stages):
            grid //= patch_sizes[i]
            mixer_cfgs = {
                'inline_pvt': dict(type='inline_pvt', qkv_bias=qkv_bias, proj_drop_rate=drop_rate),
                'spatial_reduction': dict(type='spatial_reduction', sr_ratio=arch['sr_ratios'][i], qkv_bias=qkv_bias,
                                          attn_drop_rate=attn_drop_rate, proj_drop_rate=drop_rate,
                                          norm_eps=arch['sr_norm_eps'])}
            embed = PVTEmbed(channels, dims[i], patch_sizes[i], (grid, grid), norm_eps=arch['patch_norm_eps'],
                             drop_rate=drop_rate)
            self.layers.append(Stage(
                dims[i], arch['num_heads'][i], [mixer_cfgs[name] for name in layout[i]],
                mlp_ratio=arch['mlp_ratios'][i], drop_rate=drop_rate,
                drop_path_rates=dpr[sum(depths[:i]):sum(depths[:i + 1])],
                with_cp=with_cp, norm_eps=arch['block_norm_eps'], embed=embed))
            channels = dims[i]
        self.num_features = list(dims)
        self._freeze_stages()

    @classmethod
    def _resolve_arch(cls, arch):
        if isinstance(arch, str):
            if arch not in cls.arch_zoo:
                raise ValueError(f'unknown arch {arch!r}; choose one of {sorted(cls.arch_zoo)} or pass a dict')
            return copy.deepcopy(cls.arch_zoo[arch])
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a str or a dict, got {type(arch).__name__}')
        missing = {'embed_dims', 'depths', 'num_heads'} - set(arch)
        if missing:
            raise ValueError(f'custom arch dict lacks {sorted(missing)}')
        unknown = set(arch) - set(_INLINE_PVT) - {'depths'}
        if unknown:
            raise ValueError(f'custom arch dict has unknown keys {sorted(unknown)}; '
                             f'known: {sorted([*_INLINE_PVT, "depths"])}')
        arch = {**copy.deepcopy(ARCH_DEFAULTS), **copy.deepcopy(dict(arch))}
        lengths = {k: len(arch[k]) for k in ('embed_dims', 'depths', 'num_heads', 'mlp_ratios', 'sr_ratios')}
        if len(set(lengths.values())) != 1:
            raise ValueError(f'arch lists must have one entry per stage, got lengths {lengths}')
        return arch

    def _init_family_weights(self):
        for m in self.modules():
            if isinstance(m, PVTEmbed):
                trunc_normal_(m.pos_embed, std=.02)

    def _freeze_stages(self):
        for stage in self.layers[:max(self.frozen_stages, 0)]:
            stage.eval()
            for p in stage.parameters():
                p.requires_grad = False

    def stem(self, x, regions):
        """The (checked, masked) images and their pixel-level :class:`~.token_map.TokenMap`: stage 1's
        embedding takes them (``regions``: each image's pixels in padding-aware mode, else None)."""
        return _pixel_map(x, regions, self.min_input_size)

    def forward(self, x, image_shapes=None):
        """(B, C_in, H, W) -> tuple of NCHW maps of the ``out_indices`` stages (strides 4, 8, 16, 32).

        Padding-aware mode (``image_shapes``: each image's own ``(height, width)`` in pixels, or attached /
        inferred as for :class:`~.inline_swin.InLineSwinTransformer`): pixels and tokens outside each image's
        region (``ceil(shape / stride)`` tokens at each stage) are excluded from everything its tokens see:
        each patch embedding sees zeros there, the position embedding is resized to the image's own grid,
        InLine's means, ``k^T v`` and 3x3 residual and the reduced keys of spatial-reduction attention are the
        image's own; outputs are zero outside each region. The batch is zero-padded to a multiple of 32
        first (mmdet's and mmseg's preprocessors already pad so), so that no patch embedding floors away
        a region's last row or column and an image alone is cut as in any padded batch.
        """
        outs = []
        for i, (out, tokens) in enumerate(iter_stages(self, x, image_shapes, stop=max(self.out_indices))):
            if i in self.out_indices:
                outs.append(to_nchw(out, tokens))
        return tuple(outs)


@torch.fx.wrap   # a leaf of fx graphs: it branches on sizes
def _pixel_map(images, regions, multiple):
    """``images`` (B, C, H, W) and their pixel-level map; in padding-aware mode (``regions`` given) zero-padded
    bottom/right to a multiple of ``multiple`` first."""
    if regions is not None:
        H, W = images.shape[-2:]
        images = F.pad(images, (0, (-W) % multiple, 0, (-H) % multiple))
    return images, TokenMap(images.shape[-2:], images.shape[0], images.device, regions)
