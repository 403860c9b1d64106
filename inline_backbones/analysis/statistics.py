"""Statistics of one attention head from exact rows of ``A`` for sampled queries (see :mod:`.rows`).

With ``A_i`` the row of query i (length N, summing to one) and ``v_j`` the head's values:

* negative weights: the share of ``A_ij < 0``; ``min N A_ij`` (1 is the uniform weight 1/N, so -1 means
  "as negative as the uniform weight is positive"); the share of each output carried by the negative
  weights, ``|o-_i| / (|o-_i| + |o+_i|)`` with ``o-_i = sum_{A_ij<0} A_ij v_j`` and ``o+_i`` the rest;
  the negative share of the absolute mass, ``sum_{A<0} |A_ij| / sum_j |A_ij|``;
* locality: the mass ``sum_{j in R(i)} A_ij`` on the query's r x r neighbourhood ``R(i)`` (r = 3, 7; cut
  at the map border) against the uniform share ``|R(i)| / N`` (9/N, 49/N inside the map);
* injectivity: for pairs of queries (a, b), the cosine of the raw queries and the total variation
  ``TV = 1/2 sum_j |A_aj - A_bj|`` of their rows; "confused" pairs have distinct queries
  (cosine < 0.99) but nearly identical rows (TV < 1e-3);
* collapse toward uniform: each row's total variation from the uniform row, ``TV_u(i) = 1/2 sum_j |A_ij - 1/N|``
  (0: uniform; 1 - 1/N: all mass on one token), its mean and median over the sampled rows.

Every mean over queries is over the sampled queries (never the full N x N); minima are sample minima.
"""
import torch

DISTINCT_COSINE = 0.99      # queries with cosine below this are distinct
IDENTICAL_TV = 1e-3         # rows with total variation below this are nearly identical
COSINE_BINS = (-1.0, 0.0, 0.5, 0.9, 0.99, 1.0)


def sample_queries(num_tokens, num_queries, generator):
    """Sorted indices of ``min(num_queries, num_tokens)`` distinct tokens drawn uniformly."""
    return torch.randperm(num_tokens, generator=generator)[:num_queries].sort().values


class NegativeWeights:
    """Negative-weight statistics of rows fed chunk by chunk (:func:`row_statistics`); v: values (N x d)."""

    def __init__(self, v):
        self.v = v
        self.count = self.neg_count = 0
        self.minimum = float('inf')
        self.output_share = self.neg_mass = self.mass = 0.0

    def update(self, positions, a):
        a_neg = a.clamp(max=0)
        out_neg = a_neg @ self.v
        norm_neg, norm_pos = out_neg.norm(dim=1), (a @ self.v - out_neg).norm(dim=1)   # o+ = A v - o-
        self.output_share += (norm_neg / (norm_neg + norm_pos).clamp_min(torch.finfo(a.dtype).tiny)).sum().item()
        self.count += a.numel()
        self.neg_count += torch.count_nonzero(a_neg).item()
        self.minimum = min(self.minimum, a.min().item())
        self.neg_mass -= a_neg.sum().item()
        self.mass += a.sum().item()

    def result(self):
        num_rows = self.count // self.v.shape[0]
        return dict(negative_share=self.neg_count / self.count, min_scaled_weight=self.v.shape[0] * self.minimum,
                    negative_output_share=self.output_share / num_rows,
                    negative_mass_share=self.neg_mass / (self.mass + 2 * self.neg_mass))   # sum|A| = sum A - 2 sum A-


def neighbourhoods(index, hw_shape, size):
    """Flat token indices (len(index) x size^2) of each query's size x size neighbourhood and their validity."""
    H, W = hw_shape
    r = size // 2
    offsets = torch.arange(-r, r + 1)
    y = (index // W)[:, None, None] + offsets[None, :, None]
    x = (index % W)[:, None, None] + offsets[None, None, :]
    valid = (y >= 0) & (y < H) & (x >= 0) & (x < W)
    flat = y.clamp(0, H - 1) * W + x.clamp(0, W - 1)
    return flat.flatten(1), valid.flatten(1)


class Locality:
    """Mean attention mass on each sampled query's size x size neighbourhood, its uniform share and ratio."""

    def __init__(self, index, hw_shape, sizes=(3, 7)):
        self.num_queries, self.num_tokens = len(index), hw_shape[0] * hw_shape[1]
        self.neigh = {size: neighbourhoods(index, hw_shape, size) for size in sizes}
        self.mass = dict.fromkeys(sizes, 0.0)

    def update(self, positions, a):
        for size, (flat, valid) in self.neigh.items():
            self.mass[size] += (a.gather(1, flat[positions]) * valid[positions]).sum().item()

    def result(self):
        stats = {}
        for size, (_, valid) in self.neigh.items():
            mass = self.mass[size] / self.num_queries
            uniform = valid.sum().item() / self.num_tokens / self.num_queries
            stats.update({f'mass_{size}x{size}': mass, f'uniform_{size}x{size}': uniform,
                          f'ratio_{size}x{size}': mass / uniform})
        return stats


class Uniformity:
    """Mean and median over the sampled rows of ``TV_u(i) = 1/2 sum_j |A_ij - 1/N|``, the distance to uniform."""

    def __init__(self):
        self.values = []

    def update(self, positions, a):
        self.values.append(0.5 * (a - 1.0 / a.shape[1]).abs().sum(1))

    def result(self):
        tv = torch.cat(self.values).double()
        return dict(tv_uniform_mean=tv.mean().item(), tv_uniform_median=tv.median().item())


def row_statistics(rows, index, chunk, *statistics):
    """Feed the rows ``index`` of ``rows`` (:class:`~.rows.AffineRows`, :class:`~.softmax_rows.SoftmaxRows`),
    ``chunk`` at a time, to each statistic (:class:`NegativeWeights`, :class:`Locality`, :class:`Uniformity`);
    return their results."""
    for positions, a in rows.chunks(index, chunk):
        for statistic in statistics:
            statistic.update(positions, a)
    return [statistic.result() for statistic in statistics]


def query_pairs(q, index, num_random, generator):
    """Token-index pairs (P x 2) among the sampled queries ``index``: each query with its nearest other
    sampled query (highest cosine of the raw queries q, N x d), then ``num_random`` uniformly drawn pairs."""
    if len(index) < 2:
        raise ValueError('injectivity needs at least two sampled queries')
    unit = torch.nn.functional.normalize(q[index], dim=1)
    cosine = unit @ unit.T
    cosine.fill_diagonal_(-float('inf'))
    nearest = torch.stack([index, index[cosine.argmax(1)]], dim=1)
    a = torch.randint(len(index), (num_random,), generator=generator)
    b = (a + torch.randint(1, len(index), (num_random,), generator=generator)) % len(index)   # b != a
    return torch.cat([nearest, torch.stack([index[a], index[b]], dim=1)])


def pair_distances(rows, q, pairs, chunk=64):
    """(cosine of the raw queries, total variation of the rows) for each pair (P x 2 token indices)."""
    cosine = torch.nn.functional.cosine_similarity(q[pairs[:, 0]], q[pairs[:, 1]], dim=1)
    tv = torch.cat([0.5 * torch.linalg.vector_norm(rows.difference(p[:, 0], p[:, 1]), ord=1, dim=1)
                    for p in pairs.split(chunk)])
    return cosine, tv


def confusion(cosine, tv):
    """Share of distinct-query pairs with nearly identical rows, TV quantiles, and median TV per cosine bin."""
    distinct = cosine < DISTINCT_COSINE
    bins = []
    for low, high in zip(COSINE_BINS[:-1], COSINE_BINS[1:], strict=True):
        in_bin = (cosine >= low) & (cosine < high) if high < 1 else (cosine >= low)
        bins.append(dict(cosine=[low, high], pairs=int(in_bin.sum()),
                         median_tv=tv[in_bin].median().item() if in_bin.any() else None))
    quantiles = torch.quantile(tv.double(), torch.tensor([0.05, 0.5, 0.95], dtype=torch.float64)).tolist()
    return dict(confused_share=(tv[distinct] < IDENTICAL_TV).double().mean().item() if distinct.any() else None,
                distinct_pairs=int(distinct.sum()), tv_p05=quantiles[0], tv_median=quantiles[1],
                tv_p95=quantiles[2], tv_by_cosine=bins)
