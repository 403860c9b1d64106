"""FLatten's focused linear attention of one image's map, as the analysis reads it: per head, the raw queries, the
focused queries and keys, the values, the rows of its attention matrix and its local term.

With the mixer :class:`~inline_backbones.models.mixers.flatten_attention.FocusedLinearAttention` (global, or a window
that is the whole map) on tokens ``X`` (N x C)::

    q, k, v = split(qkv(X));  k = k + P                 (P: its positional encoding, resized to the map)
    q', k' = f(q), f(k)        f(t) = ||t~|| t~**p / ||t~**p||,  t~ = (relu(t) + 1e-6) / softplus(scale)
    A_ij = q'_i . k'_j / (N (q'_i . mean_l k'_l + 1e-6))           (per head: non-negative, rows sum to ~1)
    out  = A v + dwconv5x5(v)                           (one depthwise kernel of d channels, shared by the heads)

so its rows are affine in the focused query (:class:`~.rows.AffineRows` with ``K = k'``, ``u_i = q'_i / (N (q'_i .
mean(k') + 1e-6))``, ``c = 0``), exactly plain linear attention's form with the focusing function as its kernel.
"""
import torch.nn.functional as F

from ..models.mixers.flatten_attention import EPS, resize_positional_encoding
from .rows import AffineRows


def flatten_head_qkv(module, x, hw_shape):
    """``(q, q', k', v)`` of every head, each (h, N, d): raw queries, focused queries and keys (positional encoding
    added to k before focusing), values; ``x``: one image's tokens (N, C) of an ``hw_shape`` map."""
    N, C = x.shape
    if not module.global_attention and tuple(hw_shape) != (module.window_size,) * 2:
        raise ValueError(f'focused linear attention in windows of {module.window_size} on a {hw_shape} map: the '
                         'analysis reads one attention over the map; build the model with flatten_global=True')
    h, d = module.num_heads, module.head_dims
    q, k, v = module.qkv(x).view(N, 3, C).unbind(1)
    k = k + resize_positional_encoding(module.positional_encoding, module.window_size, hw_shape)[0]
    focused_q, focused_k = module.focus(q), module.focus(k)
    return tuple(t.reshape(N, h, d).transpose(0, 1) for t in (q, focused_q, focused_k, v))


def flatten_rows(focused_q, focused_k):
    """FLatten's attention rows of one head from its focused queries and keys (N x d)."""
    N = focused_k.shape[0]
    return AffineRows(focused_k, focused_q / (N * (focused_q @ focused_k.mean(0) + EPS)).unsqueeze(-1), 0.0)


def flatten_local_output(module, v, hw_shape):
    """FLatten's local term per head (h, N, d): the depthwise 5x5 conv (with its bias) of each head's value map."""
    h, N, d = v.shape
    maps = v.transpose(1, 2).reshape(h, d, *hw_shape)
    out = F.conv2d(maps, module.dwc.weight.to(v.dtype), module.dwc.bias.to(v.dtype), padding=module.dwc.padding,
                   groups=d)
    return out.reshape(h, d, N).transpose(1, 2)


def flatten_local_kernels(module):
    """FLatten's local kernels (d, k, k), one per channel of a head (the same for every head)."""
    return module.dwc.weight[:, 0]


def inline_local_kernels(module, x, head):
    """InLine's 3x3 residual kernels (d, 3, 3) of head ``head``, predicted from the mean token of ``x`` (N, C)."""
    kernels = module.residual_kernels(x.mean(0, keepdim=True))[:, 0]        # (C, 3, 3), channel head * d + j
    return kernels.view(module.num_heads, module.head_dims, 3, 3)[head]

