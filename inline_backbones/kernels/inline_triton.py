"""Triton kernels of InLine attention's GPU path: three per layer in inference
(:func:`~inline_backbones.models.mixers.inline.gpu.attend_gpu`), whatever the batch size, and a fourth for training's
backward (:mod:`~inline_backbones.models.mixers.inline.autograd`) (``b`` an image, ``t`` a token, ``c = head * d + j``):

* :func:`kv_statistics`: one pass over ``x``, ``k`` and ``v`` (k, v read in place from the projection's
  (B, N, 2C) output). Per (image, head, split of the tokens) it sums over the image's own tokens
  ``phi(k)^T v`` (d x d, ``tl.dot``), ``phi(k)``, ``v``, ``x`` and the own-token count, in fp32.
  Splits write partial sums (no atomics: deterministic).
* :func:`finalize`: per (image, head) sums the splits and forms, in fp32, ``n`` (the own-token count),
  ``M = (s / n) KV - s mean(k)^T mean(v)``, the residual's bias ``mean(v) (+ b_q M)`` and its 3x3 kernels
  ``conv1x1(GELU(conv1x1(mean(x))))`` (the predictor's two convs are grouped by head, so one program has
  all it needs).
* :func:`depthwise3x3`: ``out[b, t, c] = bias[b, c] + sum_taps w[b, c, tap] v[b, t + tap, c]`` over the 3x3
  neighbourhood inside the map (zero padding) and, padding-aware, inside the image's own tokens: one
  stencil over the (B, N, C) layout, fp32 accumulation, per-image kernels (no per-image launches, no
  layout copies). Training's backward runs it again with the flipped kernels (the transposed stencil).
* :func:`depthwise3x3_weight_grad` (training): the gradients of the 3x3 kernels and the bias,
  ``sum_t g[b, t, c] v[b, t + tap, c]`` and ``sum_t g[b, t, c]``, fp32, split over tokens as ``kv_statistics``.

The kernels also run on a CPU under Triton's interpreter (``TRITON_INTERPRET=1`` set before this module is
imported), which is how the test suite checks them without a GPU.
"""
import functools

import torch
import triton
import triton.language as tl

PHI_CODES = {'identity': 0, 'relu': 1, 'leakyrelu': 2, 'exp': 3}


@triton.jit
def _phi(k, PHI: tl.constexpr):
    if PHI == 1:
        k = tl.maximum(k, 0.0)
    elif PHI == 2:
        k = tl.where(k >= 0, k, 0.01 * k)
    elif PHI == 3:
        k = tl.exp(0.2 * k)
    return k


@triton.jit
def _image_and_head(pid, C, D: tl.constexpr):
    """A (image, head) program's image and head: programs run image-major over the C // D heads."""
    heads = C // D
    return pid // heads, pid % heads


@triton.jit
def _zero_sums(D: tl.constexpr):
    """The fp32 accumulators of one (image, head): phi(k)^T v (D x D), and the sums of phi(k), v and x (D)."""
    return (tl.zeros((D, D), dtype=tl.float32), tl.zeros((D,), dtype=tl.float32),
            tl.zeros((D,), dtype=tl.float32), tl.zeros((D,), dtype=tl.float32))


@triton.jit
def _kv_statistics_kernel(x_ptr, kv_ptr, mask_ptr, part_ptr, N, C, sxb, sxn, skb, skn, tokens_per_split, SPLITS,
                          D: tl.constexpr, PHI: tl.constexpr, HAS_MASK: tl.constexpr, HAS_X: tl.constexpr,
                          BLOCK_N: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b, head = _image_and_head(pid, C, D)
    cols = tl.arange(0, D)
    acc, k_sum, v_sum, x_sum = _zero_sums(D)
    count = tl.zeros((BLOCK_N,), dtype=tl.float32)
    start = split * tokens_per_split
    for n0 in range(start, start + tokens_per_split, BLOCK_N):
        rows = n0 + tl.arange(0, BLOCK_N)
        own = rows < N
        if HAS_MASK:
            own = own & (tl.load(mask_ptr + b * N + rows, mask=own, other=0) != 0)
        kv_rows = kv_ptr + b * skb + rows[:, None] * skn + head * D + cols[None, :]
        k = tl.load(kv_rows, mask=own[:, None], other=0.0)
        v = tl.load(kv_rows + C, mask=own[:, None], other=0.0)
        if PHI != 0:   # phi in fp32, zero again outside (exp(0) is 1)
            k = tl.where(own[:, None], _phi(k.to(tl.float32), PHI), 0.0).to(v.dtype)
        # fp32: exact fp32 products; bf16/fp16: converted to fp32, whose tf32 tensor-core products are exact
        # for them (tf32 holds every bf16 and fp16 value).
        if IEEE:
            acc += tl.dot(tl.trans(k), v, input_precision='ieee')
        else:
            acc += tl.dot(tl.trans(k.to(tl.float32)), v.to(tl.float32), input_precision='tf32')
        k_sum += tl.sum(k.to(tl.float32), axis=0)
        v_sum += tl.sum(v.to(tl.float32), axis=0)
        if HAS_X:
            x = tl.load(x_ptr + b * sxb + rows[:, None] * sxn + head * D + cols[None, :], mask=own[:, None], other=0.0)
            x_sum += tl.sum(x.to(tl.float32), axis=0)
        count += own.to(tl.float32)
    # partials: [KV (D*D) | k_sum (D) | v_sum (D) | x_sum (D) | count (D, the same value D times)]
    out = part_ptr + (pid * SPLITS + split) * (D * D + 4 * D)
    tl.store(out + cols[:, None] * D + cols[None, :], acc)
    tl.store(out + D * D + cols, k_sum)
    tl.store(out + D * D + D + cols, v_sum)
    tl.store(out + D * D + 2 * D + cols, x_sum)
    tl.store(out + D * D + 3 * D + cols, tl.zeros((D,), dtype=tl.float32) + tl.sum(count, axis=0))


@triton.jit
def _finalize_kernel(part_ptr, bq_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, m_ptr, bias_ptr, kern_ptr, C, SPLITS, scale,
                     D: tl.constexpr, HAS_BQ: tl.constexpr, RESIDUAL: tl.constexpr):
    pid = tl.program_id(0)
    b, head = _image_and_head(pid, C, D)
    i = tl.arange(0, D)
    kv, k_sum, v_sum, x_sum = _zero_sums(D)
    n = tl.zeros((D,), dtype=tl.float32)
    for split in range(0, SPLITS):
        part = part_ptr + (pid * SPLITS + split) * (D * D + 4 * D)
        kv += tl.load(part + i[:, None] * D + i[None, :])
        k_sum += tl.load(part + D * D + i)
        v_sum += tl.load(part + D * D + D + i)
        x_sum += tl.load(part + D * D + 2 * D + i)
        n += tl.load(part + D * D + 3 * D + i)
    n = tl.maximum(n, 1.0)              # an empty image (no own token) gives zeros, not NaN
    k_mean, v_mean = k_sum / n, v_sum / n
    m = kv * (scale / n)[:, None] - scale * k_mean[:, None] * v_mean[None, :]
    tl.store(m_ptr + pid * D * D + i[:, None] * D + i[None, :], m)
    bias = v_mean
    if HAS_BQ:   # + b_q M (q M with q = x W_q^T + b_q, folded into proj: see mixers/inline/gpu.py's attend_gpu)
        bq = tl.load(bq_ptr + head * D + i).to(tl.float32)
        bias += tl.sum(bq[:, None] * m, axis=0)
    tl.store(bias_ptr + b * C + head * D + i, bias)
    if RESIDUAL:
        # The residual's 3x3 kernels of this head's channels from the mean token: two 1x1 convs grouped by
        # head (head i reads and writes channels [i D, (i + 1) D)), exact GELU between them.
        rows = head * D + i
        x_mean = x_sum / n
        hidden = tl.sum(tl.load(w1_ptr + rows[:, None] * D + i[None, :]).to(tl.float32) * x_mean[None, :], axis=1)
        hidden += tl.load(b1_ptr + rows).to(tl.float32)
        hidden = 0.5 * hidden * (1.0 + tl.math.erf(hidden * 0.7071067811865476))
        for tap in tl.static_range(9):
            w2 = tl.load(w2_ptr + (rows[:, None] * 9 + tap) * D + i[None, :]).to(tl.float32)
            out = tl.sum(w2 * hidden[None, :], axis=1) + tl.load(b2_ptr + rows * 9 + tap).to(tl.float32)
            tl.store(kern_ptr + (b * C + rows) * 9 + tap, out)


@triton.jit
def _depthwise3x3_kernel(v_ptr, mask_ptr, w_ptr, bias_ptr, out_ptr, N, C, H, W, svb, svn,
                         MASK_MODE: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_T: tl.constexpr,
                         BLOCK_C: tl.constexpr):
    # MASK_MODE 0: no mask; 1: only the image's own neighbours count (the forward); 2: every neighbour counts
    # and the output is zero outside the image (the gradient of the forward's values, with flipped kernels).
    b = tl.program_id(0)
    t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    c = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    t_ok, c_ok = t < N, c < C
    row, col = t // W, t % W
    acc = tl.zeros((BLOCK_T, BLOCK_C), dtype=tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + b * C + c, mask=c_ok, other=0.0)[None, :]
    for tap in tl.static_range(9):
        r, q = row + (tap // 3 - 1), col + (tap % 3 - 1)
        ok = t_ok & (r >= 0) & (r < H) & (q >= 0) & (q < W)
        nt = r * W + q
        if MASK_MODE == 1:
            ok = ok & (tl.load(mask_ptr + b * N + nt, mask=ok, other=0) != 0)
        val = tl.load(v_ptr + b * svb + nt[:, None] * svn + c[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
        w = tl.load(w_ptr + (b * C + c) * 9 + tap, mask=c_ok, other=0.0)
        acc += val.to(tl.float32) * w.to(tl.float32)[None, :]
    if MASK_MODE == 2:
        acc = tl.where((tl.load(mask_ptr + b * N + t, mask=t_ok, other=0) != 0)[:, None], acc, 0.0)
    tl.store(out_ptr + (b * N + t[:, None]) * C + c[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=t_ok[:, None] & c_ok[None, :])


@triton.jit
def _depthwise3x3_weight_grad_kernel(g_ptr, v_ptr, mask_ptr, part_ptr, N, C, H, W, svb, svn, tokens_per_split,
                                     SPLITS, HAS_MASK: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    # part[b, split, c, tap] = sum over this split's tokens t of g[b, t, c] * v[b, t + tap, c] (taps 0-8, the
    # forward's neighbour rule), and tap 9: sum of g[b, t, c] (the gradient of the bias).
    b = tl.program_id(0)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    split = tl.program_id(2)
    c_ok = c < C
    taps = tl.arange(0, 16)
    acc = tl.zeros((16, BLOCK_C), dtype=tl.float32)
    start = split * tokens_per_split
    for t0 in range(start, start + tokens_per_split, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        t_ok = t < N
        row, col = t // W, t % W
        g = tl.load(g_ptr + (b * N + t[:, None]) * C + c[None, :], mask=t_ok[:, None] & c_ok[None, :],
                    other=0.0).to(tl.float32)
        acc += tl.where(taps[:, None] == 9, tl.sum(g, axis=0)[None, :], 0.0)
        for tap in tl.static_range(9):
            r, q = row + (tap // 3 - 1), col + (tap % 3 - 1)
            ok = t_ok & (r >= 0) & (r < H) & (q >= 0) & (q < W)
            nt = r * W + q
            if HAS_MASK:
                ok = ok & (tl.load(mask_ptr + b * N + nt, mask=ok, other=0) != 0)
            val = tl.load(v_ptr + b * svb + nt[:, None] * svn + c[None, :], mask=ok[:, None] & c_ok[None, :],
                          other=0.0).to(tl.float32)
            acc += tl.where(taps[:, None] == tap, tl.sum(g * val, axis=0)[None, :], 0.0)
    out = part_ptr + ((b * SPLITS + split) * C + c[None, :]) * 10 + taps[:, None]
    tl.store(out, acc, mask=(taps[:, None] < 10) & c_ok[None, :])


@functools.cache
def _multiprocessors(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


def _parallel_programs(device):
    """About four programs per streaming multiprocessor (a few on the CPU interpreter)."""
    if device.type == 'cuda':
        return 4 * _multiprocessors(device.index if device.index is not None else torch.cuda.current_device())
    return 4


def _mask_bytes(mask, B, N):
    """The (B, N, 1) bool token mask as (B, N) bytes (a view, no copy), or None."""
    if mask is None:
        return None
    mask = mask.reshape(B, N)
    return (mask if mask.dtype == torch.bool else mask != 0).contiguous().view(torch.uint8)


def kv_statistics(x, kv, mask, head_dims, kernel_func):
    """Per-split partial sums (B * h, splits, d * d + 4 d), fp32, of ``x`` (B, N, C; None: its sums are zero) and
    ``kv`` (B, N, 2C, any row stride): see the module docstring. ``mask`` (B, N, 1) or None."""
    B, N, C2 = kv.shape
    C, D = C2 // 2, head_dims
    assert kv.stride(-1) == 1 and (x is None or x.stride(-1) == 1 and x.shape == (B, N, C))
    block_n = 64
    splits = max(1, min(triton.cdiv(N, block_n), _parallel_programs(kv.device) // (B * (C // D))))
    tokens_per_split = triton.cdiv(triton.cdiv(N, splits), block_n) * block_n
    splits = triton.cdiv(N, tokens_per_split)
    part = torch.empty(B * (C // D), splits, D * D + 4 * D, device=kv.device, dtype=torch.float32)
    mask_bytes = _mask_bytes(mask, B, N)
    xs = kv if x is None else x
    _kv_statistics_kernel[(B * (C // D), splits)](
        xs, kv, kv if mask_bytes is None else mask_bytes, part, N, C, xs.stride(0), xs.stride(1), kv.stride(0),
        kv.stride(1), tokens_per_split, splits, D=D, PHI=PHI_CODES[kernel_func], HAS_MASK=mask_bytes is not None,
        HAS_X=x is not None, BLOCK_N=block_n, IEEE=kv.dtype == torch.float32, num_warps=4)
    return part


def finalize(part, C, head_dims, scale, b_q=None, residual=None):
    """``(M (B, h, d, d), bias (B, C), kernels (B, C, 9) or None)`` in fp32 from :func:`kv_statistics`'
    partials: ``bias = mean(v)`` (``+ b_q M`` when ``b_q`` is given) and, when ``residual`` (the layer's
    ``Conv1d, GELU, Conv1d`` predictor, grouped by head) is given, the 3x3 kernels it predicts from ``mean(x)``."""
    BH, splits, _ = part.shape
    D = head_dims
    B = BH // (C // D)
    m = torch.empty(B, C // D, D, D, device=part.device, dtype=torch.float32)
    bias = torch.empty(B, C, device=part.device, dtype=torch.float32)
    kernels = None if residual is None else torch.empty(B, C, 9, device=part.device, dtype=torch.float32)
    convs = (part,) * 4 if residual is None else (residual[0].weight, residual[0].bias, residual[2].weight,
                                                  residual[2].bias)
    _finalize_kernel[(BH,)](part, part if b_q is None else b_q, *convs, m, bias, part if kernels is None else kernels,
                            C, splits, float(scale), D=D, HAS_BQ=b_q is not None, RESIDUAL=residual is not None,
                            num_warps=4)
    return m, bias, kernels


def depthwise3x3(v, mask, weights, bias, hw_shape, out_dtype, mask_output=False):
    """The 3x3 residual (B, N, C) in ``out_dtype`` of the values ``v`` (B, N, C, any row stride) with
    per-image kernels ``weights`` (B, C, 9) and ``bias`` (B, C) or None; ``mask`` (B, N, 1) or None: only the
    image's own neighbours count or, with ``mask_output``, every neighbour counts and the output is zero outside
    the image (the transposed stencil of the backward, given flipped kernels)."""
    B, N, C = v.shape
    H, W = hw_shape
    assert v.stride(-1) == 1 and H * W == N
    out = torch.empty(B, N, C, device=v.device, dtype=out_dtype)
    block_t, block_c = 64, min(64, triton.next_power_of_2(C))
    mask_bytes = _mask_bytes(mask, B, N)
    grid = (B, triton.cdiv(N, block_t), triton.cdiv(C, block_c))
    mode = 0 if mask_bytes is None else 2 if mask_output else 1
    _depthwise3x3_kernel[grid](v, v if mask_bytes is None else mask_bytes, weights.contiguous(),
                               v if bias is None else bias.contiguous(), out, N, C, H, W, v.stride(0), v.stride(1),
                               MASK_MODE=mode, HAS_BIAS=bias is not None, BLOCK_T=block_t, BLOCK_C=block_c,
                               num_warps=4)
    return out


def depthwise3x3_weight_grad(grad, v, mask, hw_shape):
    """Gradients of :func:`depthwise3x3`'s ``weights`` (B, C, 9) and ``bias`` (B, C), fp32, from the output's
    gradient ``grad`` (B, N, C) and the values ``v``; sums over tokens split across programs, then added."""
    B, N, C = v.shape
    H, W = hw_shape
    grad = grad.contiguous()
    block_t, block_c = 32, min(64, triton.next_power_of_2(C))
    c_blocks = triton.cdiv(C, block_c)
    splits = max(1, min(triton.cdiv(N, block_t), _parallel_programs(v.device) // (B * c_blocks)))
    tokens_per_split = triton.cdiv(triton.cdiv(N, splits), block_t) * block_t
    splits = triton.cdiv(N, tokens_per_split)
    part = torch.empty(B, splits, C, 10, device=v.device, dtype=torch.float32)
    mask_bytes = _mask_bytes(mask, B, N)
    _depthwise3x3_weight_grad_kernel[(B, c_blocks, splits)](
        grad, v, v if mask_bytes is None else mask_bytes, part, N, C, H, W, v.stride(0), v.stride(1),
        tokens_per_split, splits, HAS_MASK=mask_bytes is not None, BLOCK_T=block_t, BLOCK_C=block_c, num_warps=4)
    total = part.sum(1)                                                            # (B, C, 10)
    return total[..., :9], total[..., 9]
