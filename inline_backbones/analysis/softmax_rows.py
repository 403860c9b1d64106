"""Exact rows of softmax attention ``A_ij = exp(s q_i . k_j) / sum_l exp(s q_i . k_l)`` (``s = d^-0.5``) of one head,
for chosen queries: the same interface as :class:`~.rows.AffineRows` (``rows``, ``chunks``, ``output``,
``difference``), so that every statistic of :mod:`.statistics` reads it. Each row costs O(N d): sampled rows are
exact at any N; :meth:`SoftmaxRows.output` forms every row (O(N^2 d), ``chunk`` rows at a time)."""
from typing import NamedTuple

import torch


class SoftmaxRows(NamedTuple):
    queries: torch.Tensor   # (N, d), raw
    keys: torch.Tensor      # (N, d), raw
    scale: float

    def rows(self, index):
        """Exact rows ``A[index]`` (len(index) x N)."""
        return torch.softmax(self.scale * self.queries[index] @ self.keys.T, dim=-1)

    def chunks(self, index, chunk):
        """Yield ``(positions, rows)``: ``rows = A[index[positions]]`` for consecutive ``chunk``-sized slices."""
        for start in range(0, len(index), chunk):
            positions = slice(start, start + chunk)
            yield positions, self.rows(index[positions])

    def output(self, v, chunk=256):
        """``A v`` for all queries (N x d_v), ``chunk`` rows at a time."""
        return torch.cat([self.rows(slice(i, i + chunk)) @ v for i in range(0, len(self.queries), chunk)])

    def difference(self, a, b):
        """``A[a] - A[b]`` (P x N)."""
        return self.rows(a) - self.rows(b)


def softmax_rows(q, k):
    """Softmax attention rows of one head from its raw queries and keys (N x d), scale ``d^-0.5``."""
    return SoftmaxRows(q, k, q.shape[-1] ** -0.5)
