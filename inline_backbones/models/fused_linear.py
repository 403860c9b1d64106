"""Linear layers with the bias (and GELU) applied inside the GEMM, for CPU inference.

``y = act(x W^T + b)``. ``F.linear`` with a bias runs ``addmm``, which first writes ``b`` broadcast to
every output row and then accumulates ``x W^T`` onto it, and GELU is one more read and write of the
output: on the 96-384-channel maps of InLine-Swin these passes cost about as much as the GEMM itself.
oneDNN's inner product (``torch.ops.mkldnn._linear_pointwise``, the kernel inductor uses for CPU
linears) adds the bias and applies GELU (exact, erf form, as ``nn.GELU()``) in the GEMM's epilogue.

It is used when nothing needs gradients, on CPU, for fp32 and bf16 (under CPU autocast the inputs are
cast to the autocast dtype, as autocast does for ``F.linear``), outside ``torch.compile`` (inductor
plans its own fusions) and jit tracing (FLOP counting); otherwise ``F.linear`` (+ ``F.gelu``) computes
the same function.
"""
import torch
import torch.nn.functional as F

_ONEDNN_LINEAR = getattr(torch.ops.mkldnn, '_linear_pointwise', None) if torch.backends.mkldnn.is_available() \
    else None


def _onednn_dtype(x, weight):
    """The dtype oneDNN should run in, or None when ``F.linear`` must (gradients, device, dtype)."""
    if _ONEDNN_LINEAR is None or x.device.type != 'cpu' or torch.compiler.is_compiling() or torch.jit.is_tracing() or (
            torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)):
        return None
    dtype = torch.get_autocast_dtype('cpu') if torch.is_autocast_enabled('cpu') else x.dtype
    return dtype if dtype in (torch.float32, torch.bfloat16) and weight.dtype in (torch.float32, dtype) else None


def linear(x, weight, bias=None, gelu=False):
    """``F.linear(x, weight, bias)``, followed by exact GELU if ``gelu``."""
    dtype = _onednn_dtype(x, weight)
    if dtype is None:
        y = F.linear(x, weight, bias)
        return F.gelu(y) if gelu else y
    return _ONEDNN_LINEAR(x.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype),
                          'gelu' if gelu else 'none', [], 'none' if gelu else '')
