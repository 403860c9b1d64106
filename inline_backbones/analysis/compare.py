"""InLine, FLatten, plain linear (ReLU and exp kernels) and softmax attention at one backbone position, side by side.

Each attention's rows come from the layer it lives in, for the same image and the same (stage, block):

* from an InLine-Swin layer's raw q, k (per head, ``d`` channels, ``s = d^-0.5``): ``inline`` (its own kernel,
  :func:`~.rows.inline_rows`), and on the same q, k with another formula: ``linear-relu`` and ``linear-exp``
  (:func:`~.rows.linear_rows`, ``A_ij = phi(q_i).phi(k_j) / sum_l phi(q_i).phi(k_l)``) and ``softmax``
  (:func:`~.softmax_rows.softmax_rows`, ``A_ij = exp(s q_i.k_j) / sum_l exp(s q_i.k_l)``);
* from a FLatten-Swin layer: ``flatten``, its own rows (focusing, positional encoding, normalisation;
  :func:`~.focused.flatten_rows`).

The local terms are InLine's dynamic 3x3 residual and FLatten's depthwise 5x5 conv of v. Per head and attention, over
the sampled queries (one sample per layer from ``seed``, the same token positions for both models at equal N):
negative weights (:class:`~.statistics.NegativeWeights`), locality (:class:`~.statistics.Locality`), distance of rows
to uniform (:class:`~.statistics.Uniformity`), injectivity over query pairs (:func:`~.statistics.confusion`), the
local term's norm against the attention's, ``||local|| / ||A v||`` over all tokens, and, where ``N <=
rank_max_tokens``, the numerical rank of ``A`` and of ``A + C_c`` for the first ``rank_channels`` channels
(:mod:`.rank`).
"""
from dataclasses import asdict, dataclass, field

import torch

from . import statistics as st
from .focused import flatten_head_qkv, flatten_local_kernels, flatten_local_output, flatten_rows, inline_local_kernels
from .rank import dense_matrix, rank_statistics
from .rows import inline_rows, linear_rows
from .softmax_rows import softmax_rows

KINDS = ('inline', 'flatten', 'linear-relu', 'linear-exp', 'softmax')


@dataclass
class CompareSettings:
    num_queries: int = 256          # sampled query rows per head
    num_pairs: int = 256            # random query pairs per head, besides one nearest-neighbour pair per query
    seed: int = 0
    chunk: int = 64                 # rows computed at a time
    rank_max_tokens: int = 1024     # ranks only where N <= this (dense N x N SVDs)
    rank_channels: int = 4          # channels c whose A + C_c is ranked, per head
    rank_rtols: tuple = field(default=(1e-6, 1e-3))   # sigma_i > rtol * sigma_max counts

    def as_dict(self):
        return asdict(self)


def _norm_ratio(num, den):
    den = den.norm().item()
    return num.norm().item() / den if den > 0 else None


def kind_statistics(rows, q, v, index, pairs, hw_shape, settings, local=None, kernels=None):
    """All statistics of one head's attention ``rows`` (raw queries ``q`` for the pairs' cosines, values ``v``, the
    local term's output ``local`` and per-channel kernels ``kernels`` when it has one)."""
    negative, locality, uniformity = st.row_statistics(rows, index, settings.chunk, st.NegativeWeights(v),
                                                       st.Locality(index, hw_shape), st.Uniformity())
    cosine, tv = st.pair_distances(rows, q, pairs, settings.chunk)
    stats = dict(negative=negative, locality=locality, uniformity=uniformity, injectivity=st.confusion(cosine, tv))
    if local is not None:
        stats['local_to_attention_norm'] = _norm_ratio(local, rows.output(v))
    if hw_shape[0] * hw_shape[1] <= settings.rank_max_tokens:
        stats['rank'] = rank_statistics(dense_matrix(rows), hw_shape,
                                        None if kernels is None else kernels[:settings.rank_channels],
                                        settings.rank_rtols)
    return stats


def _sample(record, settings):
    generator = torch.Generator().manual_seed(settings.seed)
    return st.sample_queries(record.tokens.shape[0], settings.num_queries, generator), generator


def compare_inline_layer(record, settings):
    """``{kind: [stats per head]}`` for ``inline``, ``linear-relu``, ``linear-exp``, ``softmax`` of an InLine layer
    (:class:`~.capture.AttentionInput`)."""
    module, x, hw_shape = record.module, record.tokens, record.hw_shape
    index, generator = _sample(record, settings)
    out = {kind: [] for kind in ('inline', 'linear-relu', 'linear-exp', 'softmax')}
    with torch.no_grad():
        q, k, v = module.head_qkv(x)
        local = module.residual_output(x, v, hw_shape)
        for head in range(module.num_heads):
            pairs = st.query_pairs(q[head], index, settings.num_pairs, generator)
            kernels = inline_local_kernels(module, x, head) if local is not None else None
            out['inline'].append(kind_statistics(
                inline_rows(q[head], k[head], module.kernel_func), q[head], v[head], index, pairs, hw_shape, settings,
                None if local is None else local[head], kernels))
            for kernel in ('relu', 'exp'):
                out[f'linear-{kernel}'].append(kind_statistics(linear_rows(q[head], k[head], kernel), q[head], v[head],
                                                               index, pairs, hw_shape, settings))
            out['softmax'].append(kind_statistics(softmax_rows(q[head], k[head]), q[head], v[head], index, pairs,
                                                  hw_shape, settings))
    return out


def compare_flatten_layer(record, settings):
    """``{'flatten': [stats per head]}`` of a FLatten layer (:class:`~.capture.AttentionInput`; global, or a window
    that is the whole map)."""
    module, x, hw_shape = record.module, record.tokens, record.hw_shape
    index, generator = _sample(record, settings)
    heads = []
    with torch.no_grad():
        q, focused_q, focused_k, v = flatten_head_qkv(module, x, hw_shape)
        local = flatten_local_output(module, v, hw_shape)
        kernels = flatten_local_kernels(module)
        for head in range(module.num_heads):
            pairs = st.query_pairs(q[head], index, settings.num_pairs, generator)
            heads.append(kind_statistics(flatten_rows(focused_q[head], focused_k[head]), q[head], v[head], index,
                                         pairs, hw_shape, settings, local[head], kernels))
    return {'flatten': heads}
