"""Building blocks of InLine-Swin: patch embedding, patch merging, transformer blocks and stages.

Module names follow the released InLine-Swin (and Swin) checkpoints, so their state dicts load as-is:
``patch_embed.proj``, ``patch_embed.norm``, ``layers.i.blocks.j.{norm1,attn,norm2,mlp.fc1,mlp.fc2}``,
``layers.i.downsample.{norm,reduction}``.
"""
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks import DropPath
from timm.layers import Mlp
from torch import nn

from .fused_linear import linear
from .inline_attention import InLineAttention
from .window_attention import WindowAttention, shift_attention_mask


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
    LayerNorm(4C), Linear 4C -> 2C. Odd maps are zero-padded on the bottom/right."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.norm = nn.LayerNorm(4 * in_channels)
        self.reduction = nn.Linear(4 * in_channels, out_channels, bias=False)

    def forward(self, x, hw_shape):
        B, _, C = x.shape
        H, W = hw_shape
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
        attn_type (str): ``'inline'`` (global InLine attention over the map) or ``'window'`` (Swin
            window softmax attention).
        shift (bool): For window blocks, use the shifted-window partition (shift = window // 2).
    """

    def __init__(self, embed_dims, num_heads, attn_type, window_size=7, shift=False, mlp_ratio=4.,
                 qkv_bias=True, kernel_func='identity', drop_rate=0., attn_drop_rate=0., drop_path_rate=0.,
                 with_cp=False):
        super().__init__()
        self.attn_type = attn_type
        self.with_cp = with_cp
        self.norm1 = nn.LayerNorm(embed_dims)
        if attn_type == 'inline':
            self.attn = InLineAttention(embed_dims, num_heads, qkv_bias, kernel_func, drop_rate)
            self.shift_size = 0
        elif attn_type == 'window':
            self.attn = WindowAttention(embed_dims, num_heads, window_size, qkv_bias, attn_drop_rate, drop_rate)
            self.shift_size = window_size // 2 if shift else 0
        else:
            raise ValueError(f"attn_type must be 'inline' or 'window', got {attn_type!r}")
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(embed_dims)
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio), drop=drop_rate)  # fc1, GELU, fc2 as released

    def _forward(self, x, hw_shape, shift_mask):
        if self.attn_type == 'inline':
            attn = self.attn(self.norm1(x), hw_shape)
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

    def forward(self, x, hw_shape, shift_mask=None):
        """``shift_mask`` is the stage's mask for the padded map; None means no shift at this size."""
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, hw_shape, shift_mask, use_reentrant=False)
        return self._forward(x, hw_shape, shift_mask)


class InLineSwinStage(nn.Module):
    """A stage of blocks (``attn_types[j]`` per block) followed by an optional PatchMerging.

    Window blocks shift on odd indices within the stage, except when ``min(H, W) <= window_size``
    (the released model's rule for small maps). The shift mask is built once per forward for the padded
    size and shared by the shifted blocks.
    """

    def __init__(self, embed_dims, num_heads, attn_types, window_size=7, mlp_ratio=4., qkv_bias=True,
                 kernel_func='identity', drop_rate=0., attn_drop_rate=0., drop_path_rates=None,
                 downsample=True, with_cp=False):
        super().__init__()
        depth = len(attn_types)
        drop_path_rates = drop_path_rates or [0.] * depth
        self.window_size = window_size
        self.blocks = nn.ModuleList([
            InLineSwinBlock(embed_dims, num_heads, attn_types[j], window_size, shift=j % 2 == 1,
                            mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, kernel_func=kernel_func,
                            drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                            drop_path_rate=drop_path_rates[j], with_cp=with_cp)
            for j in range(depth)
        ])
        self.downsample = PatchMerging(embed_dims, 2 * embed_dims) if downsample else None

    def forward(self, x, hw_shape):
        """Returns the downsampled tokens and shape, and the stage output before downsampling."""
        ws = self.window_size
        shift_mask = None
        if min(hw_shape) > ws and any(b.shift_size for b in self.blocks):
            padded = tuple(s + (-s) % ws for s in hw_shape)
            shift_mask = shift_attention_mask(padded, ws, ws // 2, device=x.device)
        for block in self.blocks:
            x = block(x, hw_shape, shift_mask if block.shift_size else None)
        if self.downsample is None:
            return x, hw_shape, x, hw_shape
        x_down, down_shape = self.downsample(x, hw_shape)
        return x_down, down_shape, x, hw_shape
