"""Linear layers with the bias (and GELU) applied inside the GEMM, for CPU inference.

``y = act(x W^T + b)``. ``F.linear`` with a bias runs ``addmm``, which first writes ``b`` broadcast to
every output row and then accumulates ``x W^T`` onto it, and GELU is one more read and write of the
output: on the 96-384-channel maps of InLine-Swin these passes cost about as much as the GEMM itself.
oneDNN's inner product (``torch.ops.mkldnn._linear_pointwise``, the kernel inductor uses for CPU
linears) adds the bias and applies GELU (exact, erf form, as ``nn.GELU()``) in the GEMM's epilogue.

It is used for bf16 on CPU (pure, or CPU autocast to bf16: the inputs are then cast as autocast does
for ``F.linear``) when nothing needs gradients, for at least ``MIN_ROWS`` rows, outside
``torch.compile`` (inductor plans its own fusions) and jit tracing (FLOP counting); otherwise
``F.linear`` (+ ``F.gelu``) computes the same function.
"""
import torch
import torch.nn.functional as F

# Below this many rows (tokens) oneDNN's per-call set-up outweighs the passes it saves (InLine-Swin-T
# at 224x224, batch 1, was slower with it); measured on a 2-core AMD EPYC (Zen 4), torch 2.14.1.
MIN_ROWS = 4096

_ONEDNN_LINEAR = getattr(torch.ops.mkldnn, '_linear_pointwise', None) if torch.backends.mkldnn.is_available() \
    else None


def _onednn_dtype(x, weight):
    """The dtype oneDNN should run in, or None when ``F.linear`` should (see the module docstring)."""
    if (_ONEDNN_LINEAR is None or x.device.type != 'cpu' or torch.compiler.is_compiling() or torch.jit.is_tracing()
            or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))):
        return None
    dtype = torch.get_autocast_dtype('cpu') if torch.is_autocast_enabled('cpu') else x.dtype
    rows = x.numel() // x.shape[-1]
    return dtype if dtype == torch.bfloat16 and weight.dtype in (torch.float32, dtype) and rows >= MIN_ROWS else None


def linear(x, weight, bias=None, gelu=False):
    """``F.linear(x, weight, bias)``, followed by exact GELU if ``gelu``."""
    dtype = _onednn_dtype(x, weight)
    if dtype is None:
        y = F.linear(x, weight, bias)
        return F.gelu(y) if gelu else y
    return _ONEDNN_LINEAR(x.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype),
                          'gelu' if gelu else 'none', [], 'none' if gelu else '')
