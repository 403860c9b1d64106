"""Linear layers with the bias (and GELU) applied inside the GEMM, for bf16 CPU inference; elsewhere
``F.linear`` and, in inference, GELU in place (the 4C-channel hidden map of the MLP is then held once, not
twice: at 6048x6048 on a GPU that is 1.7 GB of InLine-Swin-T's peak memory).

``y = act(x W^T + b)``. ``F.linear`` with a bias runs ``addmm``, which first writes ``b`` broadcast to
every output row and then accumulates ``x W^T`` onto it, and GELU is one more read and write of the
output: on the 96-384-channel maps of InLine-Swin these passes cost about as much as the GEMM itself.
oneDNN's inner product (``torch.ops.mkldnn._linear_pointwise``, the kernel inductor uses for CPU
linears) adds the bias and applies GELU (exact, erf form, as ``nn.GELU()``) in the GEMM's epilogue.

The fused kernel is a private torch op, so it is reached through :func:`onednn_linear` only, and used
when all of these hold (otherwise ``F.linear`` (+ ``F.gelu``) computes the same function):

* the CPU runs oneDNN bf16 (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``, the check inductor uses;
  False on AVX2-only CPUs, where oneDNN's bf16 inner product cannot be created) and this torch build
  has the op; a call that raises disables it for the rest of the process (logged once);
* bf16 on CPU (pure, or CPU autocast to bf16: the inputs are cast as autocast does for ``F.linear``),
  at least ``MIN_ROWS`` rows, nothing needs gradients, and no graph is being captured
  (:func:`~.graph_mode.exporting_or_tracing`: inductor plans its own fusions, FLOP counting traces,
  exporters need standard ops).
"""
import functools
import logging

import torch
import torch.nn.functional as F
from timm.layers import register_notrace_function

from ..tokens.graph_mode import exporting_or_tracing

_logger = logging.getLogger(__name__)

# Below this many rows (tokens) oneDNN's per-call set-up outweighs the passes it saves (InLine-Swin-T
# at 224x224, batch 1, was slower with it); measured on a 2-core AMD EPYC (Zen 4), torch 2.14.1.
MIN_ROWS = 4096
_failed = False   # set when the op raised: F.linear for the rest of the process


# The private ops, named here only: oneDNN's inner product and the bf16 capability check inductor uses.
ONEDNN_OP, ONEDNN_BF16_CHECK = '_linear_pointwise', '_is_mkldnn_bf16_supported'


@functools.cache
def onednn_linear():
    """oneDNN's fused bf16 inner product (``op(x, w, b, attr, scalars, algorithm)``), or None when this
    torch build or this CPU cannot run it (checked once per process)."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        op, supported = getattr(torch.ops.mkldnn, ONEDNN_OP), getattr(torch.ops.mkldnn, ONEDNN_BF16_CHECK)
        return op if supported() else None
    except (AttributeError, RuntimeError):   # renamed or removed in another torch: F.linear it is
        return None


def _onednn_dtype(x, weight):
    """The dtype oneDNN should run in, or None when ``F.linear`` should (see the module docstring)."""
    if (_failed or x.device.type != 'cpu' or exporting_or_tracing()
            or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))):
        return None
    dtype = torch.get_autocast_dtype('cpu') if torch.is_autocast_enabled('cpu') else x.dtype
    if dtype != torch.bfloat16 or weight.dtype not in (torch.float32, dtype) or x.numel() < MIN_ROWS * x.shape[-1]:
        return None
    return dtype if onednn_linear() is not None else None


@register_notrace_function   # a leaf of fx graphs (timm's tracer): it branches on dtype, device and size
def linear(x, weight, bias=None, gelu=False):
    """``F.linear(x, weight, bias)``, followed by exact GELU if ``gelu``."""
    global _failed
    dtype = _onednn_dtype(x, weight)
    if dtype is not None:
        try:
            return onednn_linear()(x.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype),
                                   'gelu' if gelu else 'none', [], 'none' if gelu else '')
        except RuntimeError as err:   # e.g. no primitive for this CPU after all: never again this process
            _failed = True
            _logger.warning('oneDNN bf16 linear unavailable (%s); using F.linear from now on', err)
    y = F.linear(x, weight, bias)
    if not gelu:
        return y
    if torch.is_grad_enabled() or exporting_or_tracing():
        return F.gelu(y)
    return torch.ops.aten.gelu_(y)   # inference: in place on the fresh GEMM output (the MLP's 4C-channel map once)
