"""InLine attention for training on the GPU: the Triton forward, with its backward written out.

Per image and head (identity kernel; the own tokens: all N, or the n where ``mask`` is true)::

    S = sum_own k^T v,  kbar = sum_own k / n,  vbar = sum_own v / n
    M = (s / n) S - s kbar^T vbar                              (d x d, fp32)
    r = dwconv3x3(v; K) + vbar                                 (K: per-image 3x3 kernels, an input)
    o = q blockdiag(M) + r

:class:`InLineCore` computes ``o`` from ``qkv`` and ``K`` with the kernels of
:mod:`inline_backbones.kernels.inline_triton`; the projections, the kernel predictor ``K = residual(mean x)`` and
``proj`` stay ordinary autograd ops around it (:func:`attend_gpu_train`). Its backward, from ``g = dL/do``::

    dq = g blockdiag(M)^T;   dM = the diagonal (head) blocks of q^T g
    dK, dvbar_r = sum_t g_t v_(t + tap), sum_t g_t      (Triton reduction; the forward's neighbour rule)
    dv_conv = own * dwconv3x3(g; K flipped)             (the transposed stencil)
    dS = (s / n) dM;  dkbar = -s dM vbar^T;  dvbar = dvbar_r - s kbar dM
    dk = own * (v dS^T + dkbar / n);  dv = own * (k dS + dvbar / n) + dv_conv

Every step is one batched op over all images and heads, so the kernel launches of a training step do not grow
with the batch. Tested against the autograd of the ``'torch'`` path (tests/test_inline_paths.py).
"""
import torch
import torch.nn.functional as F

from .gpu import block_diagonal
from .paths import triton_kernels


def _diagonal_blocks(full, heads):
    """(B, C, C) -> (B, h, d, d): the head blocks on the diagonal."""
    B, C, _ = full.shape
    d = C // heads
    return full.view(B, heads, d, heads, d).diagonal(dim1=1, dim2=3).permute(0, 3, 1, 2)


def _bmm_fp32(a, b):
    """``a @ b`` batched, written in fp32: a sum over all N tokens, which in fp16 can exceed 65,504 (gradients
    carry the loss scale). On CUDA in one GEMM (``out_dtype``), elsewhere in the inputs' dtype, then cast."""
    if a.is_cuda and a.dtype in (torch.float16, torch.bfloat16):
        try:
            return torch.bmm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError):   # a torch without bmm's out_dtype (before 2.8)
            pass
    return torch.bmm(a, b).float()


class InLineCore(torch.autograd.Function):
    """``o = q blockdiag(M) + dwconv3x3(v; K) + vbar`` from ``qkv`` (B, N, 3C) and ``K`` (B, C, 9) fp32."""

    @staticmethod
    def forward(ctx, qkv, kernels, mask, hw_shape, head_dims, scale):
        kern = triton_kernels()
        C = qkv.shape[-1] // 3
        with torch.autocast(qkv.device.type, enabled=False):
            q, kv = qkv[..., :C], qkv[..., C:]
            part = kern.kv_statistics(None, kv, mask, head_dims, 'identity')
            m, vbar, _ = kern.finalize(part, C, head_dims, scale)
            r = kern.depthwise3x3(kv[..., C:], mask, kernels, vbar, hw_shape, qkv.dtype)
            out = torch.baddbmm(r, q, block_diagonal(m).to(qkv.dtype))
        ctx.save_for_backward(qkv, kernels, m, part, mask)
        ctx.hw_shape, ctx.head_dims, ctx.scale = hw_shape, head_dims, scale
        return out

    @staticmethod
    def backward(ctx, g):
        qkv, kernels, m, part, mask = ctx.saved_tensors
        kern = triton_kernels()
        B, N, C3 = qkv.shape
        C, d, s, dtype = C3 // 3, ctx.head_dims, ctx.scale, qkv.dtype
        h = C // d
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        with torch.autocast(qkv.device.type, enabled=False):
            g = g.to(dtype).contiguous()
            dq = torch.bmm(g, block_diagonal(m).to(dtype).transpose(1, 2))
            dm = _diagonal_blocks(_bmm_fp32(q.transpose(1, 2), g), h)                         # (B, h, d, d)
            d_kernels, dvbar = kern.depthwise3x3_weight_grad(g, v, mask, ctx.hw_shape)
            dv_conv = kern.depthwise3x3(g, mask, kernels.flip(-1), None, ctx.hw_shape, dtype, mask_output=True)
            dd = d * d
            sums = part.sum(1).view(B, h, dd + 4 * d)
            n = sums[..., dd + 3 * d:dd + 3 * d + 1].clamp(min=1).unsqueeze(-1)             # (B, h, 1, 1)
            kbar = sums[..., dd:dd + d].unsqueeze(-2) / n                                   # (B, h, 1, d)
            vbar = sums[..., dd + d:dd + 2 * d].unsqueeze(-2) / n
            ds = dm * (s / n)
            dkbar = -s * (dm @ vbar.transpose(-1, -2)).transpose(-1, -2)                    # (B, h, 1, d)
            dvbar = dvbar.view(B, h, 1, d) - s * (kbar @ dm)
            bd = block_diagonal(ds).to(dtype)
            dk = torch.baddbmm((dkbar / n).reshape(B, 1, C).to(dtype), v, bd.transpose(1, 2))
            dv = torch.baddbmm((dvbar / n).reshape(B, 1, C).to(dtype), k, bd)
            if mask is not None:
                own = mask.to(dtype)
                dk, dv = dk * own, dv * own
            dqkv = torch.cat([dq, dk, dv + dv_conv], dim=-1)
        return dqkv, d_kernels, None, None, None, None


def attend_gpu_train(attn, x, hw_shape, mask=None):
    """InLine attention of ``attn`` (identity kernel, with the local residual) on the (B, N, C) tokens ``x``,
    differentiable: the projections, the kernel predictor and ``proj`` by autograd, the rest by
    :class:`InLineCore`."""
    if mask is None:
        x_mean = x.mean(dim=1)
    else:   # own-token sums accumulate in fp32 (an fp16 sum over a padded COCO batch's stage 1 overflows)
        own = mask.to(torch.float32)
        x_mean = (x * own).sum(dim=1) / own.sum(dim=1).clamp(min=1)
    B, N, C = x.shape
    kernels = attn.residual(x_mean.unsqueeze(-1).to(attn.residual[0].weight.dtype)).view(B, C, 9).float()
    w_qkv, b_qkv = attn.qkv_projection()
    out = InLineCore.apply(F.linear(x, w_qkv, b_qkv), kernels, mask, hw_shape, attn.head_dims, attn.scale)
    return attn.proj_drop(F.linear(out, attn.proj.weight, attn.proj.bias))
