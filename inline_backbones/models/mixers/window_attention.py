"""Swin's (shifted) window softmax attention with relative position bias, for any H x W.

Windows of ``window_size`` x ``window_size`` tokens; the map is zero-padded on the bottom/right to a
window multiple and, for shifted blocks (where the shift rule of :mod:`.masks` shifts), rolled by
``-shift`` with the seam mask (built for the padded size) that stops attention across the wrap-around
seams, exactly as in Swin. Under export the shift of a shifted block is a 0-d tensor decided in the graph
(``ws // 2`` or 0 by the map's sizes): the roll is then a gather, ``y[i, j] = x[(i + s) % Hp, (j + s) % Wp]``,
and the seam mask of that shift is always added (0 everywhere when ``s = 0``), so one graph is Swin's
block on both sides of the small-map rule.

Padding-aware maps instead give a :class:`~.masks.WindowPlan` (each image's own windows, cells outside
the image masked): keys outside the image get a score of half the dtype's lowest value, so a window of
padding only stays finite and its output is discarded.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check_heads
from ..layers.fused_linear import linear
from ..tokens.graph_mode import exporting, may_branch_on_size
from ..tokens.masks import from_windows, to_windows


def relative_position_index(window_size, device=None):
    """(ws*ws, ws*ws) index into the (2ws-1)^2 bias table, Swin's ordering: window positions p = (i, j), q = (k, l)
    read entry (i - k + ws - 1) * (2ws - 1) + (j - l + ws - 1)."""
    r = torch.arange(window_size, device=device)
    d = r[:, None] - r[None, :] + (window_size - 1)                             # (ws, ws): i - k + ws - 1
    return (d[:, None, :, None] * (2 * window_size - 1) + d[None, :, None, :]).reshape(window_size ** 2, -1)


def window_partition(x, window_size):
    """(B, Hp, Wp, C) -> (B, nW, ws*ws, C)."""
    B, Hp, Wp, C = x.shape
    x = x.view(B, Hp // window_size, window_size, Wp // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, -1, window_size * window_size, C)


def window_reverse(windows, hw_padded, window_size):
    """(B, nW, ws*ws, C) -> (B, Hp, Wp, C)."""
    Hp, Wp = hw_padded
    B, _, _, C = windows.shape
    x = windows.view(B, Hp // window_size, Wp // window_size, window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, Hp, Wp, C)


def roll_map(x, shift):
    """(B, H, W, C) -> (B, H, W, C) rolled by ``shift`` on both axes, ``y[i, j] = x[(i - shift) % H, (j - shift) % W]``
    (``torch.roll``'s definition). ``shift``: an int (``torch.roll``) or a 0-d int tensor (a shift decided in an
    exported graph: two ``index_select``, no size-dependent shape)."""
    if not isinstance(shift, torch.Tensor):
        return torch.roll(x, shifts=(shift, shift), dims=(1, 2))
    for dim in (1, 2):
        size = x.shape[dim]   # the modulus as a tensor: the ONNX exporter takes no symbolic scalar in remainder
        modulus = torch.scalar_tensor(size, dtype=torch.long, device=x.device)
        index = (torch.arange(size, device=x.device) - shift).remainder(modulus)
        x = x.index_select(dim, index)
    return x


class WindowAttention(nn.Module):
    """Multi-head softmax attention inside (shifted) windows with a relative position bias.

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads.
        window_size (int): Window side. Defaults to 7.
        qkv_bias (bool): Bias of ``qkv``. Defaults to True.
        attn_drop_rate (float): Dropout on attention weights.
        proj_drop_rate (float): Dropout after ``proj``.
        shift (bool): Take the shifted windows (odd blocks of a stage).
    """

    alternates_shift = True

    def __init__(self, embed_dims, num_heads, window_size=7, qkv_bias=True, attn_drop_rate=0.,
                 proj_drop_rate=0., shift=False):
        super().__init__()
        check_heads(embed_dims, num_heads)
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.window_size = window_size
        self.shift = shift
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size - 1) ** 2, num_heads))
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.attn_drop_rate = attn_drop_rate
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)

    def forward(self, x, tokens):
        """x: (B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`). Returns (B, N, C)."""
        ws = self.window_size
        if tokens.aware:
            return self._forward_plan(x, tokens.window_plan(ws, self.shift, clip=False))
        shift_size = tokens.shift_size(ws, self.shift)        # an int; a 0-d tensor under export
        rolls = isinstance(shift_size, torch.Tensor) or shift_size
        return self._forward_rolled(x, tokens.hw_shape, shift_size, tokens.seam_mask(ws) if rolls else None)

    def _forward_rolled(self, x, hw_shape, shift_size, mask):
        """Swin's windows: pad, roll by ``-shift_size`` (``mask``: the seam mask, None when not rolled), attend,
        unroll, crop."""
        B, N, C = x.shape
        H, W = hw_shape
        ws, h = self.window_size, self.num_heads
        x = x.view(B, H, W, C)
        pad_b, pad_r = (-H) % ws, (-W) % ws
        if not may_branch_on_size() or pad_b or pad_r:                         # export: pad by 0 or more
            x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        Hp, Wp = H + pad_b, W + pad_r
        if mask is not None:
            x = roll_map(x, -shift_size)

        windows = window_partition(x, ws)                                          # (B, nW, L, C)
        nW, L = windows.shape[1:3]
        qkv = linear(windows, self.qkv.weight, self.qkv.bias)                      # bias in the GEMM
        # Windows folded into the batch: 4-D q, k, v (B*nW, h, L, d), which CPU SDPA runs with its fused
        # kernel (5-D takes the unfused path, 4-7x slower) and the ONNX exporter translates.
        q, k, v = qkv.view(B * nW, L, 3, h, C // h).permute(2, 0, 3, 1, 4).unbind(0)
        bias = self._position_bias()                                               # (h, L, L)
        if mask is not None:                                                       # (B*nW, h, L, L)
            bias = (bias + mask.unsqueeze(1)).repeat(B, 1, 1, 1)
        else:                                                                      # (1, h, L, L)
            bias = bias.unsqueeze(0)
        out = self._sdpa(q, k, v, bias)
        out = linear(out.transpose(1, 2).reshape(B, nW, L, C), self.proj.weight, self.proj.bias)
        out = self.proj_drop(out)

        x = window_reverse(out, (Hp, Wp), ws)
        if mask is not None:
            x = roll_map(x, shift_size)
        return x[:, :H, :W].reshape(B, N, C)

    def _forward_plan(self, x, plan):
        B, _, C = x.shape
        windows = to_windows(x, plan)                                              # (B*nW, L, C)
        L, h = windows.shape[1], self.num_heads
        qkv = linear(windows, self.qkv.weight, self.qkv.bias)                      # bias in the GEMM
        q, k, v = qkv.view(-1, L, 3, h, C // h).permute(2, 0, 3, 1, 4).unbind(0)   # (B*nW, h, L, d)
        bias = self._position_bias()                                               # (h, L, L)
        if plan.mask is not None:
            outside = torch.finfo(q.dtype).min / 2
            bias = bias + (~plan.mask).transpose(1, 2).unsqueeze(1).float() * outside  # (B*nW, h, L, L)
        out = self._sdpa(q, k, v, bias)
        out = self.proj_drop(linear(out.transpose(1, 2).reshape(-1, L, C), self.proj.weight, self.proj.bias))
        return from_windows(out, plan, B)

    def _position_bias(self):
        """(h, L, L) relative position bias, the table read at :func:`relative_position_index`. The index is built
        here on the table's device (a few small ops; constants under export and compile), not kept as a buffer:
        a model built on the meta device and then given its state dict alone (transformers' ``from_pretrained``
        of a DETR-family detector, which unwraps timm's model and never refills non-persistent buffers) stays
        whole."""
        table = self.relative_position_bias_table
        L = self.window_size ** 2
        return table[relative_position_index(self.window_size, table.device).view(-1)].view(L, L, -1).permute(2, 0, 1)

    def _sdpa(self, q, k, v, bias):
        """Softmax attention of the (windows, h, L, d) q, k, v with the additive ``bias``."""
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.to(q.dtype), dropout_p=self.attn_drop_rate if self.training else 0.)
        if exporting():
            # SDPA's output memory layout differs between the CPU kernel and the ONNX exporter's
            # decompositions, which then fail to replay the reshapes that follow: fix it with a copy.
            out = out.clone(memory_format=torch.contiguous_format)
        return out

    def extra_repr(self):
        return (f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, window_size={self.window_size}'
                + (', shift=True' if self.shift else ''))
