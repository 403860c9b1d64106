"""LayerNorm as one Triton kernel that writes the dtype the next GEMM reads.

``y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` over the last dimension, with the mean and
variance (biased, as ``nn.LayerNorm``) in fp32 whatever the input dtype. Under CUDA autocast torch runs
``layer_norm`` in fp32 and writes fp32, which the next linear then casts to bf16/fp16: two extra passes
over the map. Here the output is written once, in the autocast dtype (what the linear would have cast
it to). Several rows per program, so the 96-channel rows of stage 1 do not leave the GPU idle.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, rows, C, eps, BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    c = tl.arange(0, BLOCK_C)
    ok = (r < rows)[:, None] & (c < C)[None, :]
    x = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / C
    xc = tl.where(ok, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / C + eps)
    w = tl.load(w_ptr + c, mask=c < C, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=c < C, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + r[:, None] * C + c[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)


def layer_norm(x, weight, bias, eps, out_dtype):
    """LayerNorm of ``x`` (..., C) over C with affine ``weight`` and ``bias`` (C,), written in ``out_dtype``."""
    C = x.shape[-1]
    x = x.contiguous()
    y = torch.empty(x.shape, device=x.device, dtype=out_dtype)
    rows = x.numel() // C
    block_c = triton.next_power_of_2(C)
    block_m = max(1, min(64, 4096 // block_c))
    _layer_norm_kernel[(triton.cdiv(rows, block_m),)](x, weight, bias, y, rows, C, float(eps), BLOCK_M=block_m,
                                                      BLOCK_C=block_c, num_warps=4 if block_c <= 1024 else 8)
    return y
