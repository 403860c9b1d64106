"""InLine-Swin's (and Swin's) stem and downsampling: the non-overlapping patch embedding and patch merging.

Module names follow the released InLine-Swin (and Swin) checkpoints, so their state dicts load as-is:
``patch_embed.proj``, ``patch_embed.norm``, ``layers.i.downsample.{norm,reduction}``.
"""
import torch.nn.functional as F
from torch import nn

from ..layers.layer_norm import GemmLayerNorm
from ..tokens.graph_mode import graph_leaf, needs_padding


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
