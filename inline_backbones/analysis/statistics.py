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
  (cosine < 0.99) but nearly identical rows (TV < 1e-3).

Every mean over queries is over the sampled queries (never the full N x N); minima are sample minima.
"""
import torch

DISTINCT_COSINE = 0.99      # queries with cosine below this are distinct
IDENTICAL_TV = 1e-3         # rows with total variation below this are nearly identical
COSINE_BINS = (-1.0, 0.0, 0.5, 0.9, 0.99, 1.0)


def sample_queries(num_tokens, num_queries, generator):
    """Sorted indices of ``min(num_queries, num_tokens)`` distinct tokens drawn uniformly."""
    return torch.randperm(num_tokens, generator=generator)[:num_queries].sort().values


def negative_weights(rows, index, v, chunk=64):
    """Negative-weight statistics of the rows ``index`` of ``rows`` (:class:`AffineRows`) with values v (N x d)."""
    num_tokens = rows.keys.shape[0]
    count = neg_count = 0
    minimum = float('inf')
    output_share = neg_mass = abs_mass = 0.0
    for _, a in rows.chunks(index, chunk):
        a_neg = torch.where(a < 0, a, torch.zeros_like(a))
        norm_neg, norm_pos = (a_neg @ v).norm(dim=1), ((a - a_neg) @ v).norm(dim=1)
        output_share += (norm_neg / (norm_neg + norm_pos).clamp_min(torch.finfo(a.dtype).tiny)).sum().item()
        count += a.numel()
        neg_count += (a < 0).sum().item()
        minimum = min(minimum, a.min().item())
        neg_mass += -a_neg.sum().item()
        abs_mass += a.abs().sum().item()
    return dict(negative_share=neg_count / count, min_scaled_weight=num_tokens * minimum,
                negative_output_share=output_share / len(index), negative_mass_share=neg_mass / abs_mass)


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


def locality(rows, index, hw_shape, sizes=(3, 7), chunk=64):
    """Mean attention mass on each query's size x size neighbourhood, its uniform share and their ratio."""
    num_tokens = rows.keys.shape[0]
    neigh = {size: neighbourhoods(index, hw_shape, size) for size in sizes}
    mass = dict.fromkeys(sizes, 0.0)
    for positions, a in rows.chunks(index, chunk):
        for size, (flat, valid) in neigh.items():
            mass[size] += (a.gather(1, flat[positions]) * valid[positions]).sum().item()
    stats = {}
    for size, (_, valid) in neigh.items():
        uniform = valid.sum().item() / num_tokens / len(index)
        stats[f'mass_{size}x{size}'] = mass[size] / len(index)
        stats[f'uniform_{size}x{size}'] = uniform
        stats[f'ratio_{size}x{size}'] = mass[size] / len(index) / uniform
    return stats


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
    tv = torch.cat([0.5 * ((rows.coeffs[p[:, 0]] - rows.coeffs[p[:, 1]]) @ rows.keys.T).abs().sum(1)
                    for p in pairs.split(chunk)])
    return cosine, tv


def confusion(cosine, tv):
    """Share of distinct-query pairs with nearly identical rows, TV quantiles, and median TV per cosine bin."""
    distinct = cosine < DISTINCT_COSINE
    bins = []
    for low, high in zip(COSINE_BINS[:-1], COSINE_BINS[1:]):
        in_bin = (cosine >= low) & (cosine < high) if high < 1 else (cosine >= low)
        bins.append(dict(cosine=[low, high], pairs=int(in_bin.sum()),
                         median_tv=tv[in_bin].median().item() if in_bin.any() else None))
    quantiles = torch.quantile(tv.double(), torch.tensor([0.05, 0.5, 0.95], dtype=torch.float64)).tolist()
    return dict(confused_share=(tv[distinct] < IDENTICAL_TV).double().mean().item() if distinct.any() else None,
                distinct_pairs=int(distinct.sum()), tv_p05=quantiles[0], tv_median=quantiles[1],
                tv_p95=quantiles[2], tv_by_cosine=bins)
