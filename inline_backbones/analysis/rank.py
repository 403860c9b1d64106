"""The numerical rank of an attention matrix and of attention plus a local term, as N x N operators on one channel.

FLatten's argument: linear attention's ``A = U K^T`` (N x N, keys of d channels) has rank at most d (InLine's, with
its constant ``1/N``, at most d + 1), while a depthwise conv ``C_c`` (the local term of channel c: FLatten's 5x5,
InLine's 3x3) is a banded N x N matrix of full rank where its centre weight dominates; the output map of channel c
is ``(A + C_c) v_c``. The numerical rank counts the singular values ``sigma_i > rtol * sigma_max`` of the dense
matrix (torch.linalg.matrix_rank's rule with ``atol = 0``), computed in float64. Only for maps small enough to form
N x N (the caller's limit).
"""
import torch
import torch.nn.functional as F


def dense_matrix(rows):
    """The whole N x N attention matrix of ``rows`` (:class:`~.rows.AffineRows` or :class:`~.softmax_rows.
    SoftmaxRows`)."""
    n = rows.keys.shape[0]
    return rows.rows(torch.arange(n))


def conv_matrix(kernel, hw_shape):
    """The N x N matrix ``M`` of a zero-padded, stride-1 2-d cross-correlation with the odd ``kernel`` (k x k) on an
    H x W map in row-major order: ``(M v)_i = sum_{a,b} kernel[a, b] v[y_i + a - r, x_i + b - r]``, ``r = k // 2``
    (``F.conv2d``'s convention; no bias: the operator is linear)."""
    H, W = hw_shape
    n = H * W
    basis = torch.eye(n, dtype=kernel.dtype, device=kernel.device).view(n, 1, H, W)
    columns = F.conv2d(basis, kernel[None, None], padding=kernel.shape[-1] // 2)   # column j = M e_j
    return columns.view(n, n).T


def singular_values(matrix):
    """Singular values in float64, largest first."""
    return torch.linalg.svdvals(matrix.double())


def numerical_rank(sigma, rtol):
    """The count of singular values ``sigma`` (largest first) above ``rtol * sigma_max``."""
    if sigma.numel() == 0 or sigma[0] == 0:
        return 0
    return int((sigma > rtol * sigma[0]).sum())


def rank_statistics(attention, hw_shape, kernels, rtols):
    """Ranks of one head's N x N attention matrix ``attention`` and, for each channel's local kernel in ``kernels``
    (c x k x k, or None), of ``attention + conv_matrix(kernel)``: ``{'rank_A@rtol': r, 'rank_A_plus_local@rtol':
    mean over the channels, 'min_rank_A_plus_local@rtol': their minimum}`` for each ``rtol``."""
    sigma = singular_values(attention)
    stats = {f'rank_A@{rtol:g}': numerical_rank(sigma, rtol) for rtol in rtols}
    if kernels is None:
        return stats
    operator = [singular_values(attention.double() + conv_matrix(k.double(), hw_shape)) for k in kernels]
    for rtol in rtols:
        ranks = [numerical_rank(s, rtol) for s in operator]
        stats[f'rank_A_plus_local@{rtol:g}'] = sum(ranks) / len(ranks)
        stats[f'min_rank_A_plus_local@{rtol:g}'] = min(ranks)
    return stats
