"""Whether a forward runs eagerly or is being captured as a graph, for the layers that have a fast eager form.

Eager CPU inference takes forms that a captured graph must not: in-place accumulation into a view of
another op's output (``out.transpose(0, 1).baddbmm_(q, m)``) and branches on the input size. Graph
captures of three kinds see them differently:

* ``torch.jit.trace`` (also inside the TorchScript ONNX exporter, ``torch.onnx.export(..., dynamo=False)``,
  and in mmengine's FLOP analysis, which traces): the TorchScript ONNX exporter loses an in-place update
  made through a view (its file runs and is silently wrong), so traces take the out-of-place form.
* ``torch.compile``: inductor cannot replay that in-place update either. With dynamic shapes a branch on
  a size becomes a guard, and an input on its other side recompiles (measured on a CPU: 224x320 then 256x288
  recompiled on Swin's pad-to-window branch), so compiled graphs take the branch-free forms too.
* ``torch.export`` (also inside the default ONNX exporter, ``torch.onnx.export(..., dynamo=True)``): one
  graph for every size allowed by ``dynamic_shapes``, so a branch on a symbolic size becomes a guard
  that narrows (or, if the range crosses it, refuses) the export.

``torch.jit.script`` is refused, on a model and on an fx graph of one (:func:`graph_leaf`): the layers branch on
Python objects (the token map, the regions), which TorchScript cannot type.
"""
import contextlib

import torch
from timm.layers import register_notrace_module


def refuse_scripting(module):
    """``torch.jit.script`` calls ``__prepare_scriptable__`` on every module it compiles: refuse with the reason
    and what works instead."""
    raise RuntimeError(
        f'{type(module).__name__} (inline_backbones) does not support torch.jit.script, alone or inside an fx graph: '
        'its layers branch on Python objects (the token map of each stage, the regions of padding-aware mode), which '
        'TorchScript cannot type. Trace with torch.fx (timm.models.create_feature_extractor / torch.fx.symbolic_trace '
        'through timm\'s tracer), export with torch.export.export, or compile with torch.compile (docs/deployment.md)')


def graph_leaf(cls):
    """Class decorator: ``cls`` stays one ``call_module`` node of fx graphs (timm's tracer; it branches on sizes,
    devices or regions), and ``torch.jit.script`` refuses it, also inside a traced graph (:func:`refuse_scripting`)."""
    cls.__prepare_scriptable__ = refuse_scripting
    return register_notrace_module(cls)


def exporting_or_tracing() -> bool:
    """True while a graph is captured by any of the above (jit trace, torch.compile, torch.export, either
    ONNX exporter): take the out-of-place forms, which compute the same function as the eager in-place
    ones (same ops, same order, so the same rounding). False in eager mode (and under ``torch.jit.script``,
    which this package does not support)."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling() or torch.onnx.is_in_onnx_export()


def exporting() -> bool:
    """True under ``torch.export`` and either ONNX exporter: the graph must serve every input size that
    ``dynamic_shapes`` allows (the TorchScript exporter: the traced size)."""
    return torch.compiler.is_exporting() or torch.onnx.is_in_onnx_export()


_ANY_SIZE = [False]


@contextlib.contextmanager
def padding_at_any_size():
    """Within it, under :func:`exporting`, patch embedding and merging pad by 0 or more without a branch on the
    size, so that one exported graph serves heights and widths that are not multiples of their strides (the
    whole-model export, ``inline_backbones.deployment.whole``). Off elsewhere: the branch's guard keeps the symbolic
    shapes simple (padding always made ``torch.export`` of the dynamic-size backbone test run past 10 minutes)."""
    _ANY_SIZE[0] = True
    try:
        yield
    finally:
        _ANY_SIZE[0] = False


def needs_padding(H, W, multiple) -> bool:
    """Whether an H x W map is padded up to multiples of ``multiple``: where either side is not one, and always
    within :func:`padding_at_any_size` under :func:`exporting`."""
    if _ANY_SIZE[0] and exporting():
        return True
    return bool(H % multiple or W % multiple)


def regions_in_graph() -> bool:
    """True when each image's region is a tensor of the graph, not a host value to branch on: under
    :func:`exporting` and ``torch.compile``. The masks are then always applied and window canvases take their
    largest size, so that no shape and no branch depends on the regions."""
    return exporting() or torch.compiler.is_compiling()


def may_branch_on_size() -> bool:
    """True when a layer may pick between two forms of the same function by the input size (eager mode).
    False under jit tracing, whose FLOP counts must be those of the paper's order of operations whatever the
    size, under :func:`exporting` and under ``torch.compile`` (one graph for every size it allows)."""
    return not (torch.jit.is_tracing() or exporting() or torch.compiler.is_compiling())
