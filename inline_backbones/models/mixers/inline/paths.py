"""Which implementation computes InLine attention and the blocks' LayerNorms: one decision, :func:`choose`.

The implementations of InLine attention (one function, stated by :mod:`.reference`), by name; the table
that maps each name to its function is :data:`~.attention.IMPLEMENTATIONS`, each called as
``fn(attn, x, hw_shape, mask, fold)``:

* ``'reference'``: :func:`~.reference.inline_attention_reference`, plain PyTorch, one image at a time. The
  spec every other implementation is tested against; never chosen unless forced.
* ``'torch'``: :func:`~.attention.attend_torch`, batched PyTorch with the CPU's fast forms (oneDNN fused
  linears). Differentiable and capturable: it is what training, ``torch.compile``, ``torch.export``/ONNX and FLOP
  counting run, on every device.
* ``'triton'``: :func:`~.gpu.attend_gpu`, GPU inference: one projection GEMM for k and v and three Triton
  kernels; the launches per layer do not depend on the batch size.
* ``'triton-train'``: :func:`~.autograd.attend_gpu_train`, GPU training: the same kernels with a
  written-out backward (InLine attention with the identity kernel and the local residual, the released layers).

and of the blocks' LayerNorm (:func:`~inline_backbones.models.layers.layer_norm.layer_norm`): ``'torch'``
(``F.layer_norm``) or ``'triton'`` (one kernel that writes the GEMMs' dtype; no backward).

:func:`choose` decides from the input and the layer, in this order: a path forced by :func:`force_path` within a
block, else the process-wide one of :func:`set_path` or of the environment variable ``INLINE_ATTN_PATH`` (read at
import; ``auto`` or unset: none) (except that a layer without a backward never takes a Triton path while gradients
are on); ``'torch'`` unless the tensor
is on a CUDA GPU of compute capability 8.0 or more (Ampere: bf16 and TF32 tensor cores; not ROCm), no graph is
being captured, the dtype is fp32/bf16/fp16, Triton imports, no kernel has failed to build in this process, the
head size (attention) is 16, 32, 64 or 128, and gradients are off or the layer has a backward on the Triton path;
then ``'triton-train'`` with gradients on, ``'triton'`` without. It also decides ``fold``: with the identity kernel,
``q M`` folded into ``proj`` when the map has more tokens than channels (N > C), on ``'torch'`` and ``'triton'``,
in eager mode only (:func:`~...tokens.graph_mode.may_branch_on_size`: a captured graph serves every size, and FLOP
counts are those of the paper's order of operations).

A kernel that fails to build on a GPU is logged once and the generic implementation runs, then and for the rest of
the process (:func:`with_fallback`). Adding a GPU kernel: write it in ``kernels/`` and list it in
:data:`~inline_backbones.kernels.KERNELS`; call it by name from :func:`triton_kernels` in an implementation with the
signature above; give that implementation a name in :data:`~.attention.IMPLEMENTATIONS` and a rule here.
"""
import contextlib
import functools
import logging
import os
from typing import NamedTuple

import torch

from ...errors import ModelArgumentError
from ...tokens.graph_mode import exporting_or_tracing, may_branch_on_size

PATHS = ('reference', 'torch', 'triton')
HEAD_SIZES = (16, 32, 64, 128)     # the head sizes the Triton kernels take
ENV_VAR = 'INLINE_ATTN_PATH'       # the process-wide path at import: one of PATHS, or auto
_forced = None
_failed = None   # the error of a Triton kernel that could not be built on this GPU: the generic path from then on
_logger = logging.getLogger(__name__)


class Implementation(NamedTuple):
    """What computes a layer: ``name`` (``'reference'``, ``'torch'``, ``'triton'``, ``'triton-train'``) and
    ``fold`` (``q M`` folded into ``proj``)."""

    name: str
    fold: bool = False


def _checked(name, source):
    """``name`` if it is a path (None for ``'auto'``), else :class:`~...errors.ModelArgumentError` naming
    ``source``."""
    if name in (None, 'auto'):
        return None
    if name not in PATHS:
        raise ModelArgumentError(f'{source} {name!r} is not an InLine attention path: choose one of {PATHS} or auto')
    return name


_default = _checked(os.environ.get(ENV_VAR, '').strip() or None, f'the environment variable {ENV_VAR} =')


def set_path(name):
    """Every InLine layer and block norm of the process takes the path ``name`` (one of :data:`PATHS`; ``'auto'``
    or None: :func:`choose`'s rule again) wherever :func:`force_path` does not pin another, as timm's
    ``set_fused_attn``; the environment variable ``INLINE_ATTN_PATH`` sets the same at import. Returns the previous
    setting."""
    global _default
    previous, _default = _default, _checked(name, 'set_path:')
    return previous or 'auto'


@contextlib.contextmanager
def force_path(name):
    """Within the block, every InLine layer and block norm takes the path ``name`` (one of :data:`PATHS`; the
    Triton path is the training one with gradients on; ``'triton'`` on a CPU tensor needs ``TRITON_INTERPRET=1``
    set before the first kernel is compiled)."""
    global _forced
    if name not in PATHS:
        raise ModelArgumentError(f'unknown InLine attention path {name!r}; choose one of {PATHS}')
    previous, _forced = _forced, name
    try:
        yield
    finally:
        _forced = previous


@functools.cache
def triton_kernels():
    """The Triton kernels by name (:data:`~inline_backbones.kernels.KERNELS`), or None when Triton does not import."""
    from ....kernels import load_kernels

    try:
        return load_kernels()
    except ImportError:
        return None


@functools.cache
def _triton_gpu(index):
    """Whether the kernels are for this GPU: NVIDIA from Ampere on (bf16 and TF32 tensor cores); not ROCm."""
    return torch.version.hip is None and torch.cuda.get_device_capability(index)[0] >= 8


def _triton_runs(x, head_dims):
    """Whether the Triton kernels take ``x`` (heads of ``head_dims`` channels; None: a LayerNorm) on this machine."""
    if (x.device.type != 'cuda' or exporting_or_tracing() or x.dtype not in (torch.float32, torch.bfloat16,
                                                                               torch.float16)):
        return False
    if head_dims is not None and head_dims not in HEAD_SIZES:
        return False
    if _failed is not None or triton_kernels() is None:
        return False
    return _triton_gpu(x.device.index if x.device.index is not None else torch.cuda.current_device())


def choose(x, layer=None):
    """The :class:`Implementation` for the input ``x`` (B, N, C) of ``layer`` (an InLine attention layer: its
    ``head_dims``, ``kernel_func``, ``local_residual``; None: a LayerNorm). See the module docstring."""
    has_backward = layer is not None and layer.kernel_func == 'identity' and layer.local_residual
    training = torch.is_grad_enabled()
    path = _forced or _default
    if path is None:
        path = 'triton' if _triton_runs(x, None if layer is None else layer.head_dims) else 'torch'
    if path == 'triton' and training:
        path = 'triton-train' if has_backward else 'torch'
    fold = (layer is not None and layer.kernel_func == 'identity' and path in ('torch', 'triton')
            and x.shape[1] > x.shape[2] and may_branch_on_size())
    return Implementation(path, fold)


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
