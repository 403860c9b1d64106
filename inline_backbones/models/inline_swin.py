"""InLine-Swin Transformer backbone for mmdet 3.x and mmseg 1.x."""
import copy

import torch
from mmengine.model.weight_init import trunc_normal_
from torch import nn

from ..registry import MODELS
from .backbone import StagedBackbone
from .blocks import PatchEmbed, PatchMerging
from .layout import parse_attn_layout
from .stages import Stage, iter_stages, to_nchw
from .swin_checkpoint import checkpoint_filter_fn
from .token_map import TokenMap


@MODELS.register_module()
class InLineSwinTransformer(StagedBackbone):
    """InLine-Swin Transformer (Han et al., "Bridging the Divide: Reconsidering Softmax and Linear
    Attention", NeurIPS 2024) as a dense-prediction backbone.

    Swin's four-stage hierarchy where each stage uses InLine attention (global over the whole feature map
    of each image, linear in the number of tokens) or Swin's shifted-window softmax attention, as set by
    the layout ``attn_type`` (see :func:`parse_attn_layout`). Any input size works: patch embedding and
    patch merging pad odd sizes, window attention pads to window multiples.

    Args:
        arch (str | dict): ``'tiny'``, ``'small'``, ``'base'`` (the released models) or a dict with
            ``embed_dims``, ``depths``, ``num_heads`` and optionally ``attn_type``.
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
            stage, as in the authors' code (56 there); see :mod:`inline_backbones.models.masks`.
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=PATH[, prefix='backbone.'])``
            loads a released ImageNet checkpoint (or a detector/segmentor one with ``prefix``) strictly:
            see :func:`inline_backbones.checkpoint.load_pretrained`.
    """

    # Key filter of this family's checkpoints (released, timm, mmdet/mmpretrain Swin): used by load_pretrained.
    checkpoint_filter = staticmethod(checkpoint_filter_fn)

    arch_zoo = {
        'tiny': dict(embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], attn_type='IIIS'),
        'small': dict(embed_dims=96, depths=[2, 2, 18, 2], num_heads=[3, 6, 12, 24], attn_type='IISS'),
        'base': dict(embed_dims=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32], attn_type='IIMS2'),
    }

    def __init__(self, arch='tiny', attn_type=None, kernel_func='identity', in_channels=3, patch_size=4,
                 window_size=7, mlp_ratio=4., qkv_bias=True, drop_rate=0., attn_drop_rate=0.,
                 drop_path_rate=0.1, out_indices=(0, 1, 2, 3), frozen_stages=-1, norm_eval=False,
                 with_cp=False, local_residual=True, linear_kernel_func='relu', padding_aware=False,
                 inline_window_size=None, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        arch = self._resolve_arch(arch)
        attn_type = arch.get('attn_type') if attn_type is None else attn_type
        if attn_type is None:
            raise ValueError('a custom arch needs an attention layout: give attn_type, e.g. "IIIS"')
        depths, num_heads = arch['depths'], arch['num_heads']
        layout = parse_attn_layout(attn_type, depths)
        num_stages = len(depths)
        self._set_conventions(out_indices, frozen_stages, norm_eval, num_stages)

        self.arch = arch
        self.attn_type = attn_type
        if inline_window_size is not None and (isinstance(inline_window_size, bool)
                                               or not isinstance(inline_window_size, int) or inline_window_size < 1):
            raise ValueError(f'inline_window_size must be None or a positive int, got {inline_window_size!r}')
        if any('linear' in stage for stage in layout) and inline_window_size is not None:
            raise ValueError(f'layout {attn_type!r} has plain linear attention blocks (letter L, an ablation), '
                             'which attend globally: inline_window_size must be None')
        self.padding_aware = bool(padding_aware)
        self.in_channels = in_channels
        self.inline_window_size = inline_window_size
        self.patch_size = patch_size
        self.min_input_size = patch_size * 2 ** (num_stages - 1)

        self.patch_embed = PatchEmbed(in_channels, arch['embed_dims'], patch_size)
        self.drop_after_pos = nn.Dropout(drop_rate)
        mixer_cfgs = dict(
            inline=dict(type='inline', qkv_bias=qkv_bias, kernel_func=kernel_func, proj_drop_rate=drop_rate,
                        local_residual=local_residual, window_size=inline_window_size),
            window=dict(type='window', window_size=window_size, qkv_bias=qkv_bias, attn_drop_rate=attn_drop_rate,
                        proj_drop_rate=drop_rate),
            linear=dict(type='linear', qkv_bias=qkv_bias, kernel_func=linear_kernel_func, proj_drop_rate=drop_rate))
        dpr = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        self.layers = nn.ModuleList()
        self.num_features = []
        dims = arch['embed_dims']
        for i in range(num_stages):
            self.layers.append(Stage(
                dims, num_heads[i], [mixer_cfgs[name] for name in layout[i]], mlp_ratio=mlp_ratio,
                drop_rate=drop_rate, drop_path_rates=dpr[sum(depths[:i]):sum(depths[:i + 1])], with_cp=with_cp,
                downsample=PatchMerging(dims, 2 * dims) if i < num_stages - 1 else None))
            self.num_features.append(dims)
            dims *= 2
        for i in out_indices:
            self.add_module(f'norm{i}', nn.LayerNorm(self.num_features[i]))
        self._freeze_stages()

    @classmethod
    def _resolve_arch(cls, arch):
        if isinstance(arch, str):
            if arch not in cls.arch_zoo:
                raise ValueError(f'unknown arch {arch!r}; choose one of {sorted(cls.arch_zoo)} or pass a dict')
            return copy.deepcopy(cls.arch_zoo[arch])
        if isinstance(arch, dict):
            missing = {'embed_dims', 'depths', 'num_heads'} - set(arch)
            if missing:
                raise ValueError(f'custom arch dict lacks {sorted(missing)}')
            if len(arch['depths']) != len(arch['num_heads']):
                raise ValueError(f"arch depths {arch['depths']} and num_heads {arch['num_heads']} differ in length")
            return copy.deepcopy(dict(arch))
        raise TypeError(f'arch must be a str or a dict, got {type(arch).__name__}')

    def _init_family_weights(self):
        for name, p in self.named_parameters():
            if name.endswith('relative_position_bias_table'):
                trunc_normal_(p, std=.02)

    def _freeze_stages(self):
        if self.frozen_stages >= 0:
            self.patch_embed.eval()
            for p in self.patch_embed.parameters():
                p.requires_grad = False
        for i in range(self.frozen_stages):
            modules = [self.layers[i]] + ([getattr(self, f'norm{i}')] if i in self.out_indices else [])
            for m in modules:
                m.eval()
                for p in m.parameters():
                    p.requires_grad = False

    def stem(self, x, regions):
        """Patch embedding of the (checked, masked) images: the tokens and :class:`~.token_map.TokenMap`
        the first stage takes (``regions``: each image's pixels in padding-aware mode, else None)."""
        tokens, hw_shape = self.patch_embed(x)
        return self.drop_after_pos(tokens), _token_map(x, hw_shape, regions, self.patch_size)

    def forward(self, x, image_shapes=None):
        """(B, C_in, H, W) -> tuple of NCHW maps of the ``out_indices`` stages (strides 4, 8, 16, 32).

        Padding-aware mode: each image's own ``(height, width)`` in pixels comes from ``image_shapes``
        ((B, 2) or a list of pairs), else from shapes carried by ``x`` from this package's data
        preprocessors, else is inferred from ``x`` (padding = trailing rows/columns that are exactly
        zero in every channel); see :mod:`inline_backbones.models.image_regions` for what inference
        relies on. Pixels and tokens outside each region are then excluded from everything the region's
        tokens see, and the outputs are zero outside each image's region (at every stage, the region
        is ``ceil(shape / stride)``). Without the mode, ``image_shapes`` must be None. Export (``torch.export``,
        the default ONNX exporter) and ``torch.compile`` of the mode take ``image_shapes`` as a (B, 2) integer
        tensor input (docs/deployment.md#what-exports-with-which-exporter).
        """
        outs = []
        for i, (out, tokens) in enumerate(iter_stages(self, x, image_shapes, stop=max(self.out_indices))):
            if i in self.out_indices:
                outs.append(to_nchw(getattr(self, f'norm{i}')(out), tokens))
        return tuple(outs)


@torch.fx.wrap   # a leaf of fx graphs: it branches on sizes
def _token_map(images, hw_shape, regions, stride):
    """The map of the tokens of a stride-``stride`` patch embedding of ``images``."""
    return TokenMap(images.shape[-2:], images.shape[0], images.device, regions).downsampled(hw_shape, stride)
