"""All statistics of one InLine attention layer, per head, for InLine and its linear-attention counterpart.

From the same raw q, k of each head (:mod:`.capture`), :func:`~.rows.inline_rows` gives the layer's own
InLine attention (its kernel) and :func:`~.rows.linear_rows` the plain linear attention with a
non-negative kernel (``relu`` by default) that InLine is compared with. Queries are sampled once per
layer from ``seed`` (so blocks of a stage share their sampled positions); pairs are drawn among them.
"""
from dataclasses import asdict, dataclass

import torch

from . import statistics as st
from .rows import inline_rows, linear_rows


@dataclass
class AnalysisSettings:
    num_queries: int = 256      # sampled query rows per head
    num_pairs: int = 256        # random query pairs per head, on top of one nearest-neighbour pair per query
    seed: int = 0
    linear_kernel: str = 'relu'
    chunk: int = 64             # rows computed at a time (chunk x N floats)

    def as_dict(self):
        return asdict(self)


def _norm_ratio(num, den):
    den = den.norm().item()
    return num.norm().item() / den if den > 0 else None


def analyze_layer(record, settings, points=()):
    """Statistics of the InLine layer ``record`` (:class:`~.capture.AttentionInput`).

    ``points`` are token indices whose head-averaged rows ``N A_i`` (1 = uniform) are returned as maps
    for both attentions. Returns ``(result, pairs, maps)``: the JSON-ready statistics, per-head pair
    distances ``(cosine, tv_inline, tv_linear)`` and ``{'inline'|'linear': (len(points), H, W)}``.
    """
    module, tokens, hw_shape = record.module, record.tokens, record.hw_shape
    N = tokens.shape[0]
    generator = torch.Generator().manual_seed(settings.seed)
    index = st.sample_queries(N, settings.num_queries, generator)
    points = torch.as_tensor(points, dtype=torch.long)
    heads, pairs_out = [], []
    maps = {kind: torch.zeros(len(points), N, dtype=tokens.dtype) for kind in ('inline', 'linear')}
    attn_total, local_total = [], []
    with torch.no_grad():
        q, k, v = module.head_qkv(tokens)
        local = module.residual_output(tokens, v, hw_shape)
        for head in range(module.num_heads):
            kinds = {'inline': inline_rows(q[head], k[head], module.kernel_func),
                     'linear': linear_rows(q[head], k[head], settings.linear_kernel)}
            pairs = st.query_pairs(q[head], index, settings.num_pairs, generator)
            stats = {'head': head}
            stats['negative'], stats['locality_inline'] = st.row_statistics(
                kinds['inline'], index, settings.chunk, st.NegativeWeights(v[head]), st.Locality(index, hw_shape))
            stats['locality_linear'], = st.row_statistics(kinds['linear'], index, settings.chunk,
                                                          st.Locality(index, hw_shape))
            distances = {}
            for kind, rows in kinds.items():
                cosine, distances[kind] = st.pair_distances(rows, q[head], pairs, settings.chunk)
                stats[f'injectivity_{kind}'] = st.confusion(cosine, distances[kind])
                if len(points):
                    maps[kind] += N * rows.rows(points) / module.num_heads
            attn_out = kinds['inline'].output(v[head])
            attn_total.append(attn_out)
            if local is not None:
                local_total.append(local[head])
                stats['residual_to_attention_norm'] = _norm_ratio(local[head], attn_out)
            heads.append(stats)
            pairs_out.append((cosine, distances['inline'], distances['linear']))
    result = dict(layer=record.name, hw_shape=list(hw_shape), num_tokens=N, num_heads=module.num_heads,
                  kernel_func=module.kernel_func, num_queries=len(index), num_pairs=len(pairs),
                  residual_to_attention_norm=(_norm_ratio(torch.stack(local_total), torch.stack(attn_total))
                                              if local_total else None),
                  heads=heads)
    return result, pairs_out, {kind: m.view(len(points), *hw_shape) for kind, m in maps.items()}
