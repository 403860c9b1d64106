"""The pre-norm transformer block every family stacks.

Module names follow the released checkpoints, so their state dicts load as-is:
``layers.i.blocks.j.{norm1,attn,norm2,mlp.fc1,mlp.fc2}``.
"""
import torch.utils.checkpoint as cp
from timm.layers import DropPath, Mlp
from torch import nn

from .layers.fused_linear import linear
from .layers.layer_norm import GemmLayerNorm
from .mixers import build_mixer


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
