"""FLOP counting with mmengine's analysis, extended to the ops mmengine has no handle for.

mmengine's ``FlopAnalyzer`` (fvcore's jit tracer; one FLOP = one multiply-add) already counts linear
layers, matmul/bmm and convolutions with groups (so InLine's dynamic depthwise 3x3 and its kernel
generator). It has no handle for ``aten::baddbmm`` (InLine's ``k^T v`` and ``q M``) nor for
``aten::scaled_dot_product_attention`` (the window attention's ``q k^T`` and ``attn v``): both are
added here, with exact counts.
"""
from math import prod

from ..frameworks import require_openmmlab

require_openmmlab("inline_backbones.analysis.flops (mmengine's FlopAnalyzer)")

from mmengine.analysis import FlopAnalyzer  # noqa: E402  (after the check: one line naming the extras without it)
from mmengine.analysis.jit_handles import get_shape  # noqa: E402


def sdpa_flop_jit(inputs, outputs):
    """Multiply-adds of softmax(q k^T + mask) v for q (..., L, E), k (..., S, E), v (..., S, Ev)."""
    q, k, v = (get_shape(x) for x in inputs[:3])
    return prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])


def baddbmm_flop_jit(inputs, outputs):
    """Multiply-adds of input + batch1 @ batch2: (b, n, k) @ (b, k, m)."""
    b, n, k = get_shape(inputs[1])
    return b * n * k * get_shape(inputs[2])[-1]


def flop_analyzer(model, inputs):
    """``mmengine.analysis.FlopAnalyzer`` with the attention handle; ``.total()`` gives the count."""
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle(**{'aten::scaled_dot_product_attention': sdpa_flop_jit,
                              'aten::baddbmm': baddbmm_flop_jit,
                              'aten::baddbmm_': baddbmm_flop_jit})
    analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    return analyzer
