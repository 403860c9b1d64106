"""Building blocks: Swin's patch embedding and patch merging, and the pre-norm transformer block.

Module names follow the released InLine-Swin (and Swin) checkpoints, so their state dicts load as-is:
``patch_embed.proj``, ``patch_embed.norm``, ``layers.i.blocks.j.{norm1,attn,norm2,mlp.fc1,mlp.fc2}``,
``layers.i.downsample.{norm,reduction}``.
"""
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from timm.layers import DropPath, Mlp
from torch import nn

from .mixers import build_mixer
from .mixers.fused_linear import linear
from .mixers.inline_gpu import layer_norm
from .tokens.graph_mode import graph_leaf, needs_padding


@graph_leaf   # a leaf of fx graphs (it branches on the device): a call_module node, as nn.LayerNorm
class GemmLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` whose output feeds a GEMM (the blocks' ``norm1``/``norm2``, patch merging's ``norm``): on
    the GPU inference path one Triton kernel that writes the GEMM's dtype (:func:`~.inline_gpu.layer_norm`)."""

    def forward(self, x):
        return layer_norm(self, x)


@graph_leaf
class PatchEmbed(nn.Module):
    """Non-overlapping ``patch_size`` x ``patch_size`` conv + LayerNorm; pads bottom/right to a multiple."""

    def __init__(self, in_channels, embed_dims, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, embed_dims, patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dims)

    def forward(self, x):
        """(B, C_in, H, W) -> tokens (B, H'W', C), (H', W')."""
        H, W = x.shape[2:]
        p = self.patch_size
        if needs_padding(H, W, p):
            x = F.pad(x, (0, (-W) % p, 0, (-H) % p))
        x = self.proj(x)
        hw_shape = x.shape[2:]
        return self.norm(x.flatten(2).transpose(1, 2)), tuple(hw_shape)


@graph_leaf
class PatchMerging(nn.Module):
    """2x2 neighbourhood concat (Swin order x[0::2,0::2], x[1::2,0::2], x[0::2,1::2], x[1::2,1::2]),
    LayerNorm(4C), Linear 4C -> 2C. Odd maps are zero-padded on the bottom/right; on a padding-aware map
    the tokens outside each image's region are zeroed first, as if they were that padding."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.norm = GemmLayerNorm(4 * in_channels)
        self.reduction = nn.Linear(4 * in_channels, out_channels, bias=False)

    def forward(self, x, tokens):
        """(B, N, C) tokens of the map ``tokens`` -> (B, N / 4, 2C) tokens and their map."""
        B, _, C = x.shape
        H, W = tokens.hw_shape
        x = tokens.mask_outside(x).view(B, H, W, C)
        if needs_padding(H, W, 2):
            x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
        Hp, Wp = x.shape[1:3]
        # The four neighbours in Swin's order (row offset fastest, then column offset) in one copy:
        # (B, H/2, 2[row], W/2, 2[col], C) -> (B, H/2, W/2, 2[col], 2[row], C).
        x = x.reshape(B, Hp // 2, 2, Wp // 2, 2, C).permute(0, 1, 3, 4, 2, 5).reshape(B, -1, 4 * C)
        return self.reduction(self.norm(x)), tokens.downsampled((Hp // 2, Wp // 2), 2)


class TransformerBlock(nn.Module):
    """Pre-norm transformer block: ``x + DropPath(attn(norm1 x, tokens))``, then
    ``x + DropPath(mlp(norm2 x))``, with ``attn`` the token mixer built from ``mixer_cfg``
    (:func:`~.mixers.build_mixer`; ``block_index`` decides shifted windows) and ``mlp`` timm's
    ``Mlp`` (fc1, GELU, fc2, as released). A mixer whose class sets ``reads_block_input`` is called
    ``attn(norm1 x, tokens, x)``: it also reads the block's input before the norm (InLine-CSwin's residual
    predicts its kernels from that input's mean token).

    ``with_cp``: activation checkpointing (non-reentrant; the stage's token map is shared by the forward
    and the recomputation, so both read the same masks and window partitions).
    """

    def __init__(self, embed_dims, num_heads, mixer_cfg, *, block_index, mlp_ratio, drop_rate, drop_path_rate,
                 with_cp, norm_eps):
        super().__init__()
        self.with_cp = with_cp
        self.norm1 = GemmLayerNorm(embed_dims, eps=norm_eps)
        self.attn = build_mixer(mixer_cfg, embed_dims, num_heads, block_index)
        self.attn_reads_input = getattr(self.attn, 'reads_block_input', False)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.norm2 = GemmLayerNorm(embed_dims, eps=norm_eps)
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio), drop=drop_rate)

    def _forward(self, x, tokens):
        if self.attn_reads_input:       # the mixer also takes the block's input (before norm1)
            x = x + self.drop_path(self.attn(self.norm1(x), tokens, x))
        else:
            x = x + self.drop_path(self.attn(self.norm1(x), tokens))
        return x + self.drop_path(self._mlp(self.norm2(x)))

    def _mlp(self, x):
        """timm's ``Mlp`` (fc1, GELU, fc2), with the biases and GELU applied inside the GEMMs."""
        mlp = self.mlp
        x = mlp.norm(mlp.drop1(linear(x, mlp.fc1.weight, mlp.fc1.bias, gelu=True)))
        return mlp.drop2(linear(x, mlp.fc2.weight, mlp.fc2.bias))

    def forward(self, x, tokens):
        """(B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`) -> (B, N, C)."""
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, tokens, use_reentrant=False)
        return self._forward(x, tokens)
