"""The GPU inference forms of InLine attention, on the Triton kernels (taken when :func:`~.paths.choose` says
``'triton'``)."""
import torch
import torch.nn.functional as F

from .paths import triton_kernels


def block_diagonal(m):
    """(B, h, d, d) -> (B, h d, h d): each image's per-head matrices on the diagonal, zeros elsewhere."""
    B, h, d, _ = m.shape
    out = m.new_zeros(B, h * d, h * d)
    out.view(B, h, d, h, d).diagonal(dim1=1, dim2=3).copy_(m.permute(0, 2, 3, 1))
    return out


def attend_gpu(attn, x, hw_shape, mask=None, fold=False):
    """InLine attention of ``attn`` on the (B, N, C) tokens ``x`` with the Triton kernels (inference).

    ``k, v = kv(x)`` (one GEMM, read in place by the kernels);
    :func:`~inline_backbones.kernels.inline_triton.kv_statistics` and ``finalize`` give ``M``, the residual's bias
    and its 3x3 kernels (predicted from ``mean(x)``) in fp32;
    :func:`~inline_backbones.kernels.inline_triton.depthwise3x3` writes ``r = dwconv3x3(v) + bias``.
    With ``fold`` (the identity kernel and N > C, :func:`~.paths.choose`) ``q M`` is folded into ``proj``
    (as on the CPU path: ``y = proj(r) + x P``, ``P = W_q^T blockdiag(M) W_p^T`` in fp32, ``bias = mean(v) +
    b_q M``), so q is never formed; otherwise ``y = proj(r + phi(q) blockdiag(M))``. The launches do not depend on
    the batch size.
    """
    kernels = triton_kernels()
    B, N, C = x.shape
    h, d, s = attn.num_heads, attn.head_dims, attn.scale
    w_q, b_q = attn.projections()[:2]
    w_kv, b_kv = attn.kv_projection()
    kv = F.linear(x, w_kv, b_kv)                                                   # (B, N, 2C)
    dtype = kv.dtype
    x = x.contiguous()
    m, bias, weights = kernels.finalize(kernels.kv_statistics(x, kv, mask, d, attn.kernel_func), C, d, s,
                                        b_q if fold else None, attn.residual if attn.local_residual else None)
    if attn.local_residual:
        base = kernels.depthwise3x3(kv[..., C:], mask, weights, bias, hw_shape, dtype)
    else:
        base = bias.to(dtype).unsqueeze(1)                                         # (B, 1, C), broadcast
    # (autocast, when on, casts the GEMMs' operands below to its dtype, with its cache for the weights)
    if fold:
        with torch.autocast(x.device.type, enabled=False):
            p = torch.matmul(m, attn.proj.weight.float().t().reshape(h, d, C)).view(B, C, C)   # Mb W_p^T
            p = torch.matmul(w_q.float().t(), p).to(dtype)                                    # W_q^T Mb W_p^T
        return attn.proj_drop(torch.baddbmm(F.linear(base, attn.proj.weight, attn.proj.bias), x, p))
    q = attn.phi(F.linear(x, w_q, b_q))
    y = F.linear(torch.baddbmm(base, q, block_diagonal(m).to(q.dtype)), attn.proj.weight, attn.proj.bias)
    return attn.proj_drop(y)
