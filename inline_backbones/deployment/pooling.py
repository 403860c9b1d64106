"""Adaptive average pooling as two small matrix products, for graphs exported with dynamic sizes.

``nn.AdaptiveAvgPool2d((s_h, s_w))`` averages bin ``i`` of a side of ``n`` cells over cells
``floor(i n / s) <= j < ceil((i + 1) n / s)``. ``torch.export`` decomposes it into index operations fixed at the
example's size (a file exported at 250x333 then fails at 256x256 in UperNet's pyramid pooling), and ONNX has no
adaptive pooling op beyond the global one. Here each side's bins are a (s, n) averaging matrix ``P`` built from
``arange(n)`` in the graph, and ``out = P_h x P_w^T``: the same bins at every size (summation order aside).
"""
import torch
from torch import nn


def bin_matrix(n, s, like):
    """(s, n): row ``i`` averages cells ``floor(i n / s)`` to ``ceil((i + 1) n / s) - 1``."""
    i = torch.arange(s, device=like.device).unsqueeze(1)
    j = torch.arange(n, device=like.device).unsqueeze(0)
    start = (i * n) // s
    end = ((i + 1) * n + s - 1) // s
    inside = (j >= start) & (j < end)
    return inside.to(like.dtype) / (end - start).to(like.dtype)


class MatmulAdaptiveAvgPool2d(nn.Module):
    """``nn.AdaptiveAvgPool2d(output_size)`` for (B, C, H, W) inputs, as ``P_h x P_w^T`` (see the module)."""

    def __init__(self, output_size):
        super().__init__()
        size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
        if any(s is None for s in size):
            raise ValueError(f'output_size {output_size}: a None side (keep the input size) is not supported')
        self.output_size = size

    def forward(self, x):
        H, W = x.shape[-2:]
        rows = bin_matrix(H, self.output_size[0], x)
        cols = bin_matrix(W, self.output_size[1], x)
        return torch.matmul(torch.matmul(rows, x), cols.transpose(0, 1))


def replace_adaptive_pooling(module):
    """Swap every ``nn.AdaptiveAvgPool2d`` in ``module`` (in place) for :class:`MatmulAdaptiveAvgPool2d`; the count."""
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.AdaptiveAvgPool2d):
            setattr(module, name, MatmulAdaptiveAvgPool2d(child.output_size))
            count += 1
        else:
            count += replace_adaptive_pooling(child)
    return count
