"""The plain reference of InLine attention: the released formula, written for reading, not for speed.

Every fast path (:mod:`.paths`) is tested against this function. For the (B, N, C) tokens ``x`` of an
H x W map, ``h`` heads of ``d = C / h`` channels, ``s = d ** -0.5`` and, per image, its own tokens (all
``N``, or those where ``mask`` is true: ``n`` of them)::

    q, k, v = split(qkv(x));  q, k = phi(q), phi(k)                  (per head; k, v zero outside)
    KV      = (s / n) k^T v                                          (d x d)
    out_i   = q_i KV + (1 - s q_i . mean_n k) mean_n v + dwconv3x3(v; residual(mean_n x))_i
    y       = proj(out)

which is ``out_i = sum_j A_ij v_j + dwconv`` with ``A_ij = s / n (q_i . k_j - mean_l q_i . k_l) + 1 / n``
over the own tokens (the released InLine-Swin/PVT code with ``n = N``). The depthwise 3x3 residual has
one kernel per image and channel, predicted from the image's mean token, zero padding at the map's edge,
and sees zeros outside the image's own tokens.
"""
import torch
import torch.nn.functional as F


def inline_attention_reference(attn, x, hw_shape, mask=None):
    """InLine attention of the module ``attn`` (its projections, ``residual``, ``proj``, ``phi`` and
    ``num_heads``) on the (B, N, C) tokens ``x`` of an ``hw_shape`` map; ``mask`` (B, N, 1) marks each
    image's own tokens (padding-aware mode). Computes in ``x``'s dtype, one image at a time."""
    B, N, C = x.shape
    H, W = hw_shape
    h = attn.num_heads
    d = C // h
    s = d ** -0.5
    w_q, b_q, w_k, b_k, w_v, b_v = attn.projections()
    outputs = []
    for b in range(B):
        own = x.new_ones(N, 1) if mask is None else mask[b].to(x.dtype)
        n = own.sum().clamp(min=1)
        heads = [t.view(N, h, d).transpose(0, 1) for t in (F.linear(x[b], w_q, b_q), F.linear(x[b], w_k, b_k),
                                                           F.linear(x[b], w_v, b_v))]   # (h, N, d) each
        q, k, v = attn.phi(heads[0]), attn.phi(heads[1]) * own, heads[2] * own
        k_mean, v_mean = k.sum(1, keepdim=True) / n, v.sum(1, keepdim=True) / n    # (h, 1, d)
        kv = (s / n) * k.transpose(1, 2) @ v                                       # (h, d, d)
        out = q @ kv + (1 - s * q @ k_mean.transpose(1, 2)) * v_mean              # (h, N, d)
        out = out.transpose(0, 1).reshape(N, C)
        if attn.local_residual:
            x_mean = (x[b] * own).sum(0) / n                                        # (C,)
            kernels = attn.residual(x_mean.view(1, C, 1)).view(C, 1, 3, 3)
            v_map = v.transpose(1, 2).reshape(1, C, H, W)                           # channel head * d + j
            out = out + F.conv2d(v_map, kernels, padding=1, groups=C).view(C, N).t()
        outputs.append(F.linear(out, attn.proj.weight, attn.proj.bias))
    return attn.proj_drop(torch.stack(outputs))
