"""Layers of the heads swapped for forms that export right at every input size.

``torch.export`` keeps a value computed in Python from a symbolic size at the example's value, and the ONNX file
has no guard to say so: the file is then wrong at other sizes. Two such layers sit in mmseg's heads:

* ``nn.AdaptiveAvgPool2d((s_h, s_w))`` (UperNet's pyramid pooling) averages bin ``i`` of a side of ``n`` cells over
  ``floor(i n / s) <= j < ceil((i + 1) n / s)``; its decomposition indexes at the example's sizes, and ONNX has no
  adaptive pooling beyond the global one. :class:`MatmulAdaptiveAvgPool2d` builds each side's bins as a (s, n)
  averaging matrix ``P`` from ``arange(n)`` in the graph: ``out = P_h x P_w^T``, the same bins at every size.
* mmseg's ``Upsample(scale_factor=k)`` (Semantic FPN's scale heads) computes its output size as
  ``int(n * float(k))`` in Python, a float the exporter specialises. :class:`IntegerUpsample` takes ``n * k`` for an
  integral ``k``: the same size, and the same interpolation (a size of exactly ``k n`` gives the scale ``1 / k``).
"""
import torch
import torch.nn.functional as F
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


class IntegerUpsample(nn.Module):
    """mmseg's ``Upsample(scale_factor=k)`` for an integral ``k``: output ``(k H, k W)``, ``mode``,
    ``align_corners`` as given."""

    def __init__(self, factor, mode, align_corners):
        super().__init__()
        self.factor, self.mode, self.align_corners = factor, mode, align_corners

    def forward(self, x):
        H, W = x.shape[-2:]
        return F.interpolate(x, size=(H * self.factor, W * self.factor), mode=self.mode,
                             align_corners=self.align_corners)


def _replacement(child):
    if isinstance(child, nn.AdaptiveAvgPool2d):
        return MatmulAdaptiveAvgPool2d(child.output_size)
    factor = getattr(child, 'scale_factor', None)
    if type(child).__name__ == 'Upsample' and not getattr(child, 'size', None) and isinstance(factor, float) \
            and factor.is_integer():
        return IntegerUpsample(int(factor), child.mode, child.align_corners)
    return None


def rewrite_for_export(module):
    """Swap (in place) the layers above in ``module``; the number swapped."""
    count = 0
    for name, child in list(module.named_children()):
        new = _replacement(child)
        if new is not None:
            setattr(module, name, new)
            count += 1
        else:
            count += rewrite_for_export(child)
    return count
