"""The LayerNorm whose output feeds a GEMM (the blocks' ``norm1``/``norm2``, Swin's patch merging's ``norm``): on the
GPU inference path one Triton kernel that writes the GEMM's dtype, else ``F.layer_norm``; which runs is the one
decision of :func:`~..mixers.inline.paths.choose`."""
import torch
import torch.nn.functional as F
from torch import nn

from ..mixers.inline.paths import choose, triton_kernels, with_fallback
from ..tokens.graph_mode import graph_leaf


def compute_dtype(x):
    """The dtype GEMMs run in for ``x``: the autocast dtype of its device when autocast is on, else its own."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


def layer_norm(norm, x):
    """``norm(x)`` for an ``nn.LayerNorm`` whose output feeds a linear layer: on the ``'triton'`` path one
    kernel that writes the GEMMs' dtype (:mod:`inline_backbones.kernels.layer_norm_triton`), else ``F.layer_norm``."""
    def plain(x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    if choose(x).name != 'triton':
        return plain(x)
    return with_fallback(lambda x: triton_kernels().layer_norm(x, norm.weight, norm.bias, norm.eps, compute_dtype(x)),
                         plain, x)


@graph_leaf   # a leaf of fx graphs (it branches on the device): a call_module node, as nn.LayerNorm
class GemmLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` whose output feeds a GEMM (the blocks' ``norm1``/``norm2``, patch merging's ``norm``): on
    the GPU inference path one Triton kernel that writes the GEMM's dtype (:func:`layer_norm`)."""

    def forward(self, x):
        return layer_norm(self, x)
