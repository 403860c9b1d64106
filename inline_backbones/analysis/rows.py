"""Exact rows of the attention matrix ``A`` of one head, for chosen queries, without forming N x N.

Both attentions of a head are affine in a per-query vector: row ``i`` is ``A_i = K u_i + c`` with keys
``K`` (N x d), a coefficient vector ``u_i`` (d) and a constant ``c``:

* InLine (``phi`` the layer's kernel, ``s = d^-0.5``): ``A_ij = s/N (q_i . k_j - q_i . mean_l k_l) + 1/N``,
  so ``K = phi(k) - mean(phi(k))``, ``u_i = s/N phi(q_i)``, ``c = 1/N``;
* plain linear attention (non-negative ``phi``, as :class:`~inline_backbones.models.mixers.linear_attention.
  LinearAttention`): ``A_ij = phi(q_i) . phi(k_j) / (N (phi(q_i) . mean(phi(k)) + eps))``, so
  ``K = phi(k)``, ``u_i = phi(q_i) / (N (phi(q_i) . mean(phi(k)) + eps))``, ``c = 0``.

Rows are then ``U K^T + c`` for a chunk of queries (``chunk`` x N at a time), the difference of two rows
is ``K (u_a - u_b)`` (one product per pair), and the whole output ``A v = U (K^T v) + c sum_j v_j`` is
linear in N.
"""
from typing import NamedTuple

import torch

from ..models.mixers.inline.attention import KERNEL_FUNCTIONS
from ..models.mixers.linear_attention import EPS, LINEAR_KERNELS


class AffineRows(NamedTuple):
    """Rows ``A_i = keys @ coeffs[i] + offset`` of one head's attention for all N queries."""
    keys: torch.Tensor     # (N, d)
    coeffs: torch.Tensor   # (N, d), one per query
    offset: float

    def rows(self, index):
        """Exact rows ``A[index]`` (len(index) x N)."""
        if self.offset:
            return torch.addmm(self.coeffs.new_tensor(self.offset), self.coeffs[index], self.keys.T)
        return self.coeffs[index] @ self.keys.T

    def chunks(self, index, chunk):
        """Yield ``(positions, rows)``: ``rows = A[index[positions]]`` for consecutive ``chunk``-sized slices."""
        for start in range(0, len(index), chunk):
            positions = slice(start, start + chunk)
            yield positions, self.rows(index[positions])

    def output(self, v):
        """``A v`` for all queries (N x d_v), linear in N."""
        return self.coeffs @ (self.keys.T @ v) + self.offset * v.sum(0)

    def difference(self, a, b):
        """``A[a] - A[b]`` for index tensors ``a``, ``b`` (P x N): ``K (u_a - u_b)``, one product per pair."""
        return (self.coeffs[a] - self.coeffs[b]) @ self.keys.T


def inline_rows(q, k, kernel_func='identity'):
    """InLine attention rows of one head from its raw (pre-kernel) queries and keys (N x d)."""
    q, k = KERNEL_FUNCTIONS[kernel_func](q), KERNEL_FUNCTIONS[kernel_func](k)
    N, d = k.shape
    return AffineRows(k - k.mean(0), q * (d ** -0.5 / N), 1.0 / N)


def linear_rows(q, k, kernel_func='relu'):
    """Plain linear attention rows of one head from its raw (pre-kernel) queries and keys (N x d)."""
    if kernel_func not in LINEAR_KERNELS:
        raise ValueError(f'linear attention needs a non-negative kernel; {kernel_func!r} is not one of '
                         f'{list(LINEAR_KERNELS)}')
    q, k = KERNEL_FUNCTIONS[kernel_func](q), KERNEL_FUNCTIONS[kernel_func](k)
    N = k.shape[0]
    return AffineRows(k, q / (N * (q @ k.mean(0) + EPS)).unsqueeze(-1), 0.0)
