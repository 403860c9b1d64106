"""Which implementation computes InLine attention (and the block's LayerNorms), chosen in one function.

Three implementations of one function (:mod:`.inline_reference` states it):

* ``'reference'``: :func:`~.inline_reference.inline_attention_reference`, plain PyTorch, one image at a
  time. The spec every other path is tested against; never chosen unless forced.
* ``'torch'``: :meth:`~.inline_attention.InLineAttention.attend_torch`, batched PyTorch with the CPU's
  fast forms (oneDNN fused linears, ``q M`` folded into ``proj``). Differentiable and capturable: it is
  what training, ``torch.compile``, ``torch.export``/ONNX and FLOP counting run, on every device.
* ``'triton'``: :func:`attend_gpu` and :func:`layer_norm`, the GPU inference path: one projection GEMM
  for k and v, three Triton kernels (:mod:`..kernels.inline_triton`), ``q M`` folded into ``proj``, and
  LayerNorm written in the autocast dtype; in training :func:`~.inline_autograd.attend_gpu_train`, the same
  kernels with a written-out backward. The launches per layer do not depend on the batch size.

:func:`select_path` picks ``'triton'`` for a CUDA tensor when no graph is being captured, the dtype is
fp32/bf16/fp16, Triton imports, (attention) the head size is a power of two from 16 to 128, and either
gradients are off or the layer has a written-out backward (:mod:`.inline_autograd`: InLine attention with the
identity kernel and the local residual, the released models' layers; LayerNorm has none); else ``'torch'``.
:func:`force_path` overrides the choice (tests, debugging, benchmarks), except that it never sends a layer
without a backward down the Triton path while gradients are on. The kernels are built for NVIDIA GPUs from
Ampere on (compute capability 8.0: bf16 and TF32 tensor cores); elsewhere, and for the rest of the process
after a kernel fails to build on a GPU (logged as a warning), the generic path runs.
"""
import contextlib
import functools
import logging

import torch
import torch.nn.functional as F

from ..tokens.graph_mode import exporting_or_tracing

PATHS = ('reference', 'torch', 'triton')
_forced = None
_failed = None   # the error of a Triton kernel that could not be built on this GPU: the generic path from then on
_logger = logging.getLogger(__name__)


@contextlib.contextmanager
def force_path(name):
    """Within the block, every InLine layer and block norm takes the path ``name`` (one of :data:`PATHS`;
    ``'triton'`` on a CPU tensor needs ``TRITON_INTERPRET=1`` set before the first kernel is compiled)."""
    global _forced
    if name not in PATHS:
        raise ValueError(f'unknown InLine attention path {name!r}; choose one of {PATHS}')
    previous, _forced = _forced, name
    try:
        yield
    finally:
        _forced = previous


@functools.cache
def triton_kernels():
    """The kernel modules ``(inline_triton, layer_norm_triton)``, or None when Triton does not import."""
    try:
        from ...kernels import inline_triton, layer_norm_triton
    except ImportError:
        return None
    return inline_triton, layer_norm_triton


@functools.cache
def _triton_gpu(index):
    """Whether the kernels are for this GPU: NVIDIA from Ampere on (bf16 and TF32 tensor cores); not ROCm."""
    return torch.version.hip is None and torch.cuda.get_device_capability(index)[0] >= 8


def _kernel_errors():
    """What Triton raises when a kernel cannot be built for this GPU (compilation, ptxas, resources)."""
    import triton.compiler.errors as compiler_errors
    import triton.runtime.errors as runtime_errors

    names = ('CompilationError', 'PTXASError', 'OutOfResources')
    return tuple(getattr(module, name) for module in (compiler_errors, runtime_errors) for name in names
                 if hasattr(module, name))


def with_fallback(triton_fn, torch_fn, *args):
    """``triton_fn(*args)``; if its kernels cannot be built on this GPU, log it once and return ``torch_fn(*args)``,
    and take the generic path for the rest of the process."""
    global _failed
    try:
        return triton_fn(*args)
    except _kernel_errors() as err:
        _failed = err
        _logger.warning('InLine: a Triton kernel could not be built on this GPU (%s: %s); using the generic PyTorch '
                        'path from now on', type(err).__name__, err)
        return torch_fn(*args)


def select_path(x, head_dims=None, differentiable=False):
    """The path for the input ``x`` (and, for attention, heads of ``head_dims`` channels); ``differentiable``:
    the caller's Triton path has a backward (InLine attention with the identity kernel and the local residual,
    :mod:`.inline_autograd`), so it may take it with gradients enabled. See the module docstring."""
    needs_backward = torch.is_grad_enabled() and not differentiable
    if _forced is not None:
        return 'torch' if _forced == 'triton' and needs_backward else _forced
    if (x.device.type != 'cuda' or needs_backward or exporting_or_tracing()
            or x.dtype not in (torch.float32, torch.bfloat16, torch.float16)):
        return 'torch'
    if head_dims is not None and head_dims not in (16, 32, 64, 128):
        return 'torch'
    if _failed is not None or triton_kernels() is None:
        return 'torch'
    return 'triton' if _triton_gpu(x.device.index if x.device.index is not None else torch.cuda.current_device()) \
        else 'torch'


def compute_dtype(x):
    """The dtype GEMMs run in for ``x``: the autocast dtype of its device when autocast is on, else its own."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


def layer_norm(norm, x):
    """``norm(x)`` for an ``nn.LayerNorm`` whose output feeds a linear layer: on the ``'triton'`` path one
    kernel that writes the GEMMs' dtype (:mod:`..kernels.layer_norm_triton`), else ``F.layer_norm``."""
    def plain(x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    if select_path(x) != 'triton':
        return plain(x)
    return with_fallback(lambda x: triton_kernels()[1].layer_norm(x, norm.weight, norm.bias, norm.eps,
                                                                  compute_dtype(x)), plain, x)


def block_diagonal(m):
    """(B, h, d, d) -> (B, h d, h d): each image's per-head matrices on the diagonal, zeros elsewhere."""
    B, h, d, _ = m.shape
    out = m.new_zeros(B, h * d, h * d)
    out.view(B, h, d, h, d).diagonal(dim1=1, dim2=3).copy_(m.permute(0, 2, 3, 1))
    return out


def attend_gpu(attn, x, hw_shape, mask=None):
    """InLine attention of ``attn`` on the (B, N, C) tokens ``x`` with the Triton kernels (inference).

    ``k, v = kv(x)`` (one GEMM, read in place by the kernels); :func:`~..kernels.inline_triton.kv_statistics`
    and ``finalize`` give ``M``, the residual's bias and its 3x3 kernels (predicted from ``mean(x)``) in fp32;
    :func:`~..kernels.inline_triton.depthwise3x3` writes ``r = dwconv3x3(v) + bias``.
    With the identity kernel and N > C, ``q M`` is folded into ``proj`` (as on the CPU path:
    ``y = proj(r) + x P``, ``P = W_q^T blockdiag(M) W_p^T`` in fp32, ``bias = mean(v) + b_q M``), so q is never
    formed; otherwise ``y = proj(r + phi(q) blockdiag(M))``. The launches do not depend on the batch size.
    """
    kernels = triton_kernels()[0]
    B, N, C = x.shape
    h, d, s = attn.num_heads, attn.head_dims, attn.scale
    w_q, b_q = attn.projections()[:2]
    w_kv, b_kv = attn.kv_projection()
    kv = F.linear(x, w_kv, b_kv)                                                   # (B, N, 2C)
    dtype = kv.dtype
    x = x.contiguous()
    fold = attn.kernel_func == 'identity' and N > C
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
