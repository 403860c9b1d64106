"""Building blocks of InLine-Swin: patch embedding, patch merging, transformer blocks and stages.

Module names follow the released InLine-Swin (and Swin) checkpoints, so their state dicts load as-is:
``patch_embed.proj``, ``patch_embed.norm``, ``layers.i.blocks.j.{norm1,attn,norm2,mlp.fc1,mlp.fc2}``,
``layers.i.downsample.{norm,reduction}``.
"""
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks import DropPath
from timm.layers import Mlp
from torch import nn

from .fused_linear import linear
from .image_regions import fills_map, region_mask
from .inline_attention import InLineAttention
from .linear_attention import LinearAttention
from .window_attention import WindowAttention, shift_attention_mask
from .window_plans import WindowPlan, from_windows, to_windows, window_plan


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch_size`` x ``patch_size`` conv + LayerNorm; pads bottom/right to a multiple."""

    def __init__(self, in_channels=3, embed_dims=96, patch_size=4):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, embed_dims, patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dims)

    def forward(self, x):
        """(B, C_in, H, W) -> tokens (B, H'W', C), (H', W')."""
        H, W = x.shape[2:]
        p = self.patch_size
        if H % p or W % p:
            x = F.pad(x, (0, (-W) % p, 0, (-H) % p))
        x = self.proj(x)
        hw_shape = x.shape[2:]
        return self.norm(x.flatten(2).transpose(1, 2)), tuple(hw_shape)


class PatchMerging(nn.Module):
    """2x2 neighbourhood concat (Swin order x[0::2,0::2], x[1::2,0::2], x[0::2,1::2], x[1::2,1::2]),
    LayerNorm(4C), Linear 4C -> 2C. Odd maps are zero-padded on the bottom/right; with ``token_mask``
    (B, N, 1) the tokens outside each image's region are zeroed first, as if they were that padding."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.norm = nn.LayerNorm(4 * in_channels)
        self.reduction = nn.Linear(4 * in_channels, out_channels, bias=False)

    def forward(self, x, hw_shape, token_mask=None):
        B, _, C = x.shape
        H, W = hw_shape
        if token_mask is not None:
            x = x * token_mask
        x = x.view(B, H, W, C)
        if H % 2 or W % 2:
            x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
        Hp, Wp = x.shape[1:3]
        # The four neighbours in Swin's order (row offset fastest, then column offset) in one copy:
        # (B, H/2, 2[row], W/2, 2[col], C) -> (B, H/2, W/2, 2[col], 2[row], C).
        x = x.reshape(B, Hp // 2, 2, Wp // 2, 2, C).permute(0, 1, 3, 4, 2, 5).reshape(B, -1, 4 * C)
        return self.reduction(self.norm(x)), (Hp // 2, Wp // 2)


class InLineSwinBlock(nn.Module):
    """Pre-norm transformer block: ``x + DropPath(attn(norm1 x))``, then ``x + DropPath(mlp(norm2 x))``.

    Args:
        attn_type (str): ``'inline'`` (global InLine attention over the map), ``'window'`` (Swin
            window softmax attention) or ``'linear'`` (global plain linear attention, an ablation).
        shift (bool): Use the shifted-window partition (shift = window // 2): for window blocks, and for
            InLine blocks when their stage gives them windows (``inline_window_size``).
        local_residual (bool): InLine blocks add the 3x3 local residual (False: ablation without it).
        linear_kernel_func (str): Kernel of ``'linear'`` blocks (``relu`` or ``exp``).
    """

    def __init__(self, embed_dims, num_heads, attn_type, window_size=7, shift=False, mlp_ratio=4.,
                 qkv_bias=True, kernel_func='identity', drop_rate=0., attn_drop_rate=0., drop_path_rate=0.,
                 with_cp=False, local_residual=True, linear_kernel_func='relu'):
        super().__init__()
        self.attn_type = attn_type
        self.shift = shift
        self.with_cp = with_cp
        self.norm1 = nn.LayerNorm(embed_dims)
        if attn_type == 'inline':
            self.attn = InLineAttention(embed_dims, num_heads, qkv_bias, kernel_func, drop_rate, local_residual)
            self.shift_size = 0
        elif attn_type == 'linear':
            self.attn = LinearAttention(embed_dims, num_heads, qkv_bias, linear_kernel_func, drop_rate)
            self.shift_size = 0
        elif attn_type == 'window':
            self.attn = WindowAttention(embed_dims, num_heads, window_size, qkv_bias, attn_drop_rate, drop_rate)
            self.shift_size = window_size // 2 if shift else 0
        else:
            raise ValueError(f"attn_type must be 'inline', 'window' or 'linear', got {attn_type!r}")
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(embed_dims)
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio), drop=drop_rate)  # fc1, GELU, fc2 as released

    def _forward(self, x, hw_shape, shift_mask, region):
        if self.attn_type == 'inline' and region.inline_plan is not None:
            if torch.jit.is_tracing() and torch.onnx.is_in_onnx_export():
                raise NotImplementedError(
                    'InLine attention in windows (inline_window_size) cannot be exported by the TorchScript ONNX '
                    'exporter (dynamo=False): the window count is not a constant in its graph, so the dynamic '
                    'depthwise convolution has no known kernel shape. Use the default exporter (dynamo=True)')
            plan = region.inline_plan
            attn = from_windows(self.attn(to_windows(self.norm1(x), plan), plan.window_hw, plan.mask), plan,
                                x.shape[0])
        elif self.attn_type != 'window' and region.token_mask is not None:   # global InLine / linear
            attn = self.attn(self.norm1(x), hw_shape, region.token_mask)
        elif self.attn_type != 'window':
            attn = self.attn(self.norm1(x), hw_shape)
        elif region.window_plan is not None:
            attn = self.attn(self.norm1(x), hw_shape, plan=region.window_plan)
        else:
            shift = self.shift_size if shift_mask is not None else 0
            attn = self.attn(self.norm1(x), hw_shape, shift, shift_mask)
        x = x + self.drop_path(attn)
        return x + self.drop_path(self._mlp(self.norm2(x)))

    def _mlp(self, x):
        """timm's ``Mlp`` (fc1, GELU, fc2), with the biases and GELU applied inside the GEMMs."""
        mlp = self.mlp
        x = mlp.norm(mlp.drop1(linear(x, mlp.fc1.weight, mlp.fc1.bias, gelu=True)))
        return mlp.drop2(linear(x, mlp.fc2.weight, mlp.fc2.bias))

    def forward(self, x, hw_shape, shift_mask=None, region=None):
        """``shift_mask`` is the stage's mask for the padded map; None means no shift at this size.
        ``region`` (:class:`BlockRegion`) carries the padding-aware masks and InLine windows, if any."""
        region = region or BlockRegion()
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, hw_shape, shift_mask, region, use_reentrant=False)
        return self._forward(x, hw_shape, shift_mask, region)


class BlockRegion(NamedTuple):
    """What a block needs beyond its tokens (all None by default: global InLine, no masking).

    ``token_mask`` (B, N, 1): 1 on each image's own tokens, for global InLine and patch merging (None
    when every image fills the map). ``inline_plan``: the InLine windows (None = global InLine).
    ``window_plan``: the padding-aware softmax windows (None = Swin's roll and seam mask).
    """
    token_mask: Optional[torch.Tensor] = None
    inline_plan: Optional[WindowPlan] = None
    window_plan: Optional[WindowPlan] = None


class InLineSwinStage(nn.Module):
    """A stage of blocks (``attn_types[j]`` per block) followed by an optional PatchMerging.

    Window blocks shift on odd indices within the stage, except when ``min(H, W) <= window_size``
    (the released model's rule for small maps). The shift mask is built once per forward for the padded
    size and shared by the shifted blocks. With ``inline_window_size``, InLine blocks attend within
    windows of that size (see :mod:`.window_plans`), shifted on odd indices likewise.

    Padding-aware mode: ``forward(..., region_shapes)`` with each image's own rows x cols of the map
    masks everything outside them (see :class:`BlockRegion`).
    """

    def __init__(self, embed_dims, num_heads, attn_types, window_size=7, mlp_ratio=4., qkv_bias=True,
                 kernel_func='identity', drop_rate=0., attn_drop_rate=0., drop_path_rates=None,
                 downsample=True, with_cp=False, local_residual=True, linear_kernel_func='relu',
                 inline_window_size=None):
        super().__init__()
        depth = len(attn_types)
        drop_path_rates = drop_path_rates or [0.] * depth
        self.window_size = window_size
        self.inline_window_size = inline_window_size
        self.blocks = nn.ModuleList([
            InLineSwinBlock(embed_dims, num_heads, attn_types[j], window_size, shift=j % 2 == 1,
                            mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, kernel_func=kernel_func,
                            drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                            drop_path_rate=drop_path_rates[j], with_cp=with_cp,
                            local_residual=local_residual, linear_kernel_func=linear_kernel_func)
            for j in range(depth)
        ])
        self.downsample = PatchMerging(embed_dims, 2 * embed_dims) if downsample else None

    def forward(self, x, hw_shape, region_shapes=None):
        """Returns the downsampled tokens and shape, and the stage output before downsampling.
        ``region_shapes`` (B, 2): each image's own rows x cols of the map (padding-aware mode)."""
        ws = self.window_size
        shift_mask = None
        if min(hw_shape) > ws and any(b.shift_size for b in self.blocks):
            padded = tuple(s + (-s) % ws for s in hw_shape)
            shift_mask = shift_attention_mask(padded, ws, ws // 2, device=x.device)
        regions = self._block_regions(x, hw_shape, region_shapes)
        for block in self.blocks:
            x = block(x, hw_shape, shift_mask if block.shift_size else None, regions[block.attn_type, block.shift])
        if self.downsample is None:
            return x, hw_shape, x, hw_shape
        x_down, down_shape = self.downsample(x, hw_shape, regions['inline', False].token_mask)
        return x_down, down_shape, x, hw_shape

    def _block_regions(self, x, hw_shape, region_shapes):
        """``{(attn_type, shift): BlockRegion}`` shared by the blocks; built only for the kinds present."""
        B = x.shape[0]
        token_mask = None
        if region_shapes is not None and not fills_map(region_shapes, hw_shape):
            token_mask = region_mask(region_shapes, hw_shape, x.dtype, x.device)
        regions = {}
        for kind in {(b.attn_type, b.shift) for b in self.blocks} | {('inline', False)}:
            attn_type, shift = kind
            inline_plan = window_plan_ = None
            if attn_type == 'inline' and self.inline_window_size is not None:
                inline_plan = window_plan(hw_shape, B, self.inline_window_size, shift, region_shapes,
                                          device=x.device)
            elif attn_type == 'window' and region_shapes is not None:
                window_plan_ = window_plan(hw_shape, B, self.window_size, shift, region_shapes, clip=False,
                                           device=x.device)
            regions[kind] = BlockRegion(token_mask, inline_plan, window_plan_)
        return regions
