"""PVT's per-stage embedding: patch embedding (conv, kernel = stride = ``p``), LayerNorm, plus an absolute
position embedding learnt on the pre-training grid and resized bilinearly to the stage's own grid.

Resizing (:func:`resize_pos_embed`): ``F.interpolate(mode='bilinear', align_corners=False)`` from the
stage's own pre-training grid (56x56, 28x28, 14x14, 7x7 for 224 pixels), as the authors' ``_get_pos_embed``
and mmdet's PVT resize, but decided per stage from that stage's own grid: the authors compare every stage
with stage 1's token count, which crashes at 448x448 and scrambles the table at e.g. 128x392.
Padding-aware maps (:func:`region_pos_embed`): each image gets the table resized to its own region and
zeros elsewhere, so its tokens do not depend on the padded size.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..stages import to_nchw
from ..tokens.graph_mode import graph_leaf
from ..tokens.masks import fills_map, to_device


def resize_pos_embed(pos_embed, src_shape, dst_shape):
    """(1, Hs*Ws, C) row-major tokens of the grid ``src_shape`` -> (1, Hd*Wd, C) of ``dst_shape``, bilinear
    (``align_corners=False``, no antialias) in ``pos_embed``'s dtype; ``pos_embed`` itself when the shapes agree."""
    (Hs, Ws), (Hd, Wd) = tuple(src_shape), tuple(dst_shape)
    if pos_embed.shape[1] != Hs * Ws:
        raise ValueError(f'position embedding of {pos_embed.shape[1]} tokens is not a {Hs}x{Ws} grid')
    if (Hs, Ws) == (Hd, Wd):
        return pos_embed
    grid = pos_embed.reshape(1, Hs, Ws, -1).permute(0, 3, 1, 2)
    return F.interpolate(grid, size=(Hd, Wd), mode='bilinear', align_corners=False).flatten(2).transpose(1, 2)


def region_pos_embed(pos_embed, src_shape, tokens):
    """The position embedding of the map ``tokens`` (:class:`~.token_map.TokenMap`): (1, H*W, C), the table
    resized to the map, unless the map is padding-aware and some image does not fill it; then (B, H*W, C),
    image b's table resized to its own ``h_b x w_b`` region at its top-left and zeros elsewhere (one
    interpolation per distinct region size)."""
    H, W = tokens.hw_shape
    if not tokens.aware or fills_map(tokens.regions, (H, W)):
        return resize_pos_embed(pos_embed, src_shape, (H, W))
    regions = tokens.regions
    out = pos_embed.new_zeros(tokens.batch_size, H, W, pos_embed.shape[-1])
    for h, w in torch.unique(regions, dim=0).tolist():
        images = to_device((regions == torch.tensor([h, w])).all(dim=1).nonzero()[:, 0], out.device)
        out[images, :h, :w] = resize_pos_embed(pos_embed, src_shape, (h, w)).view(1, h, w, -1)
    return out.view(tokens.batch_size, H * W, -1)


@graph_leaf   # a leaf of fx graphs: it branches on sizes and regions
class PVTEmbed(nn.Module):
    """``drop(norm(conv(x)) + pos)``: a stage's patch embedding and position embedding.

    Takes the images (B, C_in, H, W) with their pixel-level map (stage 1) or the previous stage's (B, N, C)
    tokens with their map (later stages; zeroed outside each image's region first), returns the tokens
    (B, H'W', C) of the ``floor(H / p) x floor(W / p)`` grid and its map (regions ``ceil(region / p)``).

    Args:
        in_channels (int): Input channels.
        embed_dims (int): Output channels C.
        patch_size (int): Conv kernel and stride ``p``.
        pos_shape (tuple[int, int]): Pre-training grid of ``pos_embed`` (1, Hs*Ws, C).
        norm_eps (float): LayerNorm epsilon (1e-5 in the authors' code, 1e-6 in mmdet's PVT).
        drop_rate (float): Dropout after the position embedding.
    """

    def __init__(self, in_channels, embed_dims, patch_size, pos_shape, *, norm_eps, drop_rate):
        super().__init__()
        self.patch_size = patch_size
        self.pos_shape = tuple(pos_shape)
        self.proj = nn.Conv2d(in_channels, embed_dims, patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.pos_shape[0] * self.pos_shape[1], embed_dims))
        self.drop = nn.Dropout(drop_rate)

    def forward(self, x, tokens):
        if x.dim() == 3:
            x = to_nchw(x, tokens)
        x = self.proj(x)
        tokens = tokens.downsampled(tuple(x.shape[2:]), self.patch_size)
        x = self.norm(x.flatten(2).transpose(1, 2))
        return self.drop(x + region_pos_embed(self.pos_embed, self.pos_shape, tokens)), tokens

    def extra_repr(self):
        return f'patch_size={self.patch_size}, pos_shape={self.pos_shape}'
