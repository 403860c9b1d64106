"""CSWin's convolutional embeddings: the stem (conv 7x7, stride 4, padding 2, then LayerNorm) and the merging
between stages (conv 3x3, stride 2, padding 1, then LayerNorm), as in the authors' ``stage1_conv_embed`` and
``Merge_Block``.

An input side of ``n`` pixels gives ``floor((n + 4 - 7) / 4) + 1 = floor((n + 1) / 4)`` tokens at the stem (56 for
224) and each merging ``floor((n + 2 - 3) / 2) + 1 = ceil(n / 2)``: the convs' own arithmetic, no padding added, as
in CSWin's segmentation backbone. On a padding-aware map the tokens outside each image's region are zeroed before
the merging conv (the pixels are zeroed by the stage loop), so each image's own outputs, ``floor((h + 1) / 4)`` and
then ``ceil`` of the halves (:meth:`~..tokens.token_map.TokenMap.convolved`), see what they see for the image alone.
"""
from torch import nn

from ..stages import to_nchw
from ..tokens.graph_mode import graph_leaf


@graph_leaf
class ConvEmbed(nn.Module):
    """``norm(conv(x))`` as tokens: a strided conv and a LayerNorm over its channels.

    Takes the images (B, C_in, H, W) with their pixel-level map, or a stage's (B, N, C) tokens with their map (zeroed
    outside each image's region first); returns the (B, H'W', C_out) tokens and their map.

    Args:
        in_channels (int): Input channels.
        embed_dims (int): Output channels.
        kernel_size, stride, padding (int): The conv's (7, 4, 2 for the stem; 3, 2, 1 for the merging).
    """

    def __init__(self, in_channels, embed_dims, kernel_size, stride, padding):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dims, kernel_size, stride, padding)
        self.norm = nn.LayerNorm(embed_dims)

    def forward(self, x, tokens):
        if x.dim() == 3:
            x = to_nchw(x, tokens)
        x = self.proj(x)
        conv = self.proj
        tokens = tokens.convolved(tuple(x.shape[2:]), conv.kernel_size[0], conv.stride[0], conv.padding[0])
        return self.norm(x.flatten(2).transpose(1, 2)), tokens


def conv_stem(in_channels, embed_dims):
    """CSWin's stem: conv 7x7, stride 4, padding 2; LayerNorm."""
    return ConvEmbed(in_channels, embed_dims, 7, 4, 2)


def conv_merging(in_channels, out_channels):
    """CSWin's merging between stages (``Merge_Block``): conv 3x3, stride 2, padding 1; LayerNorm."""
    return ConvEmbed(in_channels, out_channels, 3, 2, 1)
