"""The token mixers of the PVT family (layout letters of :class:`~.inline_pvt.InLinePVT`), on the mixer
contract ``mixer(x, tokens) -> y`` of :mod:`.mixers`.

Both read q from a ``q`` linear (C -> C) and k, v from one ``kv`` linear (C -> 2C: k = output channels
``[0, C)``, v = ``[C, 2C)``), with head ``j`` owning channels ``[j d, (j + 1) d)``, ``d = C / h``: the
released keys ``attn.q``, ``attn.kv``, ``attn.proj``.

* :class:`InLinePVTAttention` (``I``): global InLine attention (the math, padding-aware masking and the
  3x3 dynamic residual of :class:`~.inline.attention.InLineAttention`, unchanged) over these projections.
* :class:`SpatialReductionAttention` (``S``, PVT v1's): ``softmax(q k^T d^-1/2) v`` over the keys of the map
  reduced ``sr`` times by ``sr`` (conv kernel = stride = ``sr``, then LayerNorm; none when ``sr == 1``).
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelArgumentError, check_heads
from ..layers.fused_linear import linear
from .inline.attention import InLineAttention


class InLinePVTAttention(InLineAttention):
    """Global InLine attention with PVT's separate ``q`` and ``kv`` projections (the released InLine-PVT).

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h.
        qkv_bias (bool): Bias of ``q`` and ``kv``. Defaults to True.
        proj_drop_rate (float): Dropout after ``proj``.
        sr_ratio (int): Spatial reduction of the keys (the authors' ``la_sr_ratios``): only 1. The
            authors' ``sr_ratio > 1`` reshapes the reduced keys with the query count and fails, and no
            released model uses it.
    """

    alternates_shift = False   # global: every block the same

    def __init__(self, embed_dims, num_heads, qkv_bias=True, proj_drop_rate=0., sr_ratio=1):
        if sr_ratio != 1:
            raise ModelArgumentError(f'InLine-PVT attention supports la_sr_ratio 1 only (no spatial reduction), got '
                                     f'{sr_ratio!r}: the authors\' la_sr_ratio > 1 is broken and unused by the '
                                     'released models')
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, proj_drop_rate=proj_drop_rate)

    def _build_projections(self, embed_dims, qkv_bias):
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)

    def projections(self):
        """Weights and biases of the q, k, v projections (views of ``q`` and ``kv``)."""
        C = self.embed_dims
        w_k, w_v = self.kv.weight.view(2, C, C).unbind(0)
        b_k, b_v = (None, None) if self.kv.bias is None else self.kv.bias.view(2, C).unbind(0)
        return self.q.weight, self.q.bias, w_k, b_k, w_v, b_v

    def qkv_projection(self):
        """Weight (3C, C) and bias of q, k and v as one projection (``q`` and ``kv`` concatenated)."""
        bias = None if self.q.bias is None else torch.cat([self.q.bias, self.kv.bias])
        return torch.cat([self.q.weight, self.kv.weight]), bias

    def kv_projection(self):
        """Weight (2C, C) and bias of k and v as one projection: the released ``kv``."""
        return self.kv.weight, self.kv.bias


class SpatialReductionAttention(nn.Module):
    """PVT v1's spatial-reduction attention (``S``): softmax attention of every token over the map's
    ``sr x sr`` patches.

    For the tokens ``X`` of an H x W map: ``K, V = split(kv(norm(sr_conv(X))))`` (or ``kv(X)`` when
    ``sr_ratio == 1``), per head ``out = softmax(q K^T / sqrt(d)) V``, ``y = proj(out)``. The reduced map is
    ``floor(H / sr) x floor(W / sr)``.

    Padding-aware maps: ``X`` is zeroed outside each image's region before the conv (a patch straddling
    the edge mixes the image's tokens with zeros, as for the image alone in any batch padded to the same
    multiple), and the reduced keys outside ``ceil(region / sr)`` get a score of half the dtype's lowest
    value, so each query attends to its own image's keys only.

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h.
        sr_ratio (int): Reduction (conv kernel and stride). Defaults to 1 (none: global softmax).
        qkv_bias (bool): Bias of ``q`` and ``kv``. Defaults to True.
        attn_drop_rate (float): Dropout on the attention weights.
        proj_drop_rate (float): Dropout after ``proj``.
        norm_eps (float): Epsilon of the reduction's LayerNorm (1e-5 in the authors' and official PVT's
            code, 1e-6 in mmdet's PVT). Defaults to 1e-5.
    """

    def __init__(self, embed_dims, num_heads, sr_ratio=1, qkv_bias=True, attn_drop_rate=0., proj_drop_rate=0.,
                 norm_eps=1e-5):
        super().__init__()
        check_heads(embed_dims, num_heads)
        if isinstance(sr_ratio, bool) or not isinstance(sr_ratio, int) or sr_ratio < 1:
            raise ModelArgumentError(f'sr_ratio must be a positive int, got {sr_ratio!r}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.sr_ratio = sr_ratio
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)
        self.attn_drop_rate = attn_drop_rate
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)
        if sr_ratio > 1:
            self.sr = nn.Conv2d(embed_dims, embed_dims, sr_ratio, stride=sr_ratio)
            self.norm = nn.LayerNorm(embed_dims, eps=norm_eps)

    def forward(self, x, tokens):
        """x: (B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`). Returns (B, N, C)."""
        B, N, C = x.shape
        h, d = self.num_heads, C // self.num_heads
        q = linear(x, self.q.weight, self.q.bias).view(B, N, h, d).transpose(1, 2)       # (B, h, N, d)
        keys = tokens
        if self.sr_ratio > 1:
            H, W = tokens.hw_shape
            x = self.sr(tokens.mask_outside(x).transpose(1, 2).reshape(B, C, H, W))
            keys = tokens.downsampled(x.shape[2:], self.sr_ratio)
            x = self.norm(x.flatten(2).transpose(1, 2))
        M = x.shape[1]
        k, v = linear(x, self.kv.weight, self.kv.bias).view(B, M, 2, h, d).permute(2, 0, 3, 1, 4).unbind(0)
        mask = keys.token_mask()                                                          # (B, M, 1) or None
        if mask is not None:
            mask = torch.where(mask, 0., torch.finfo(q.dtype).min / 2).view(B, 1, 1, M).to(q.dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             dropout_p=self.attn_drop_rate if self.training else 0.)
        out = linear(out.transpose(1, 2).reshape(B, N, C), self.proj.weight, self.proj.bias)
        return self.proj_drop(out)

    def extra_repr(self):
        return f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, sr_ratio={self.sr_ratio}'
