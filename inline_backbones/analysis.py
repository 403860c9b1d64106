"""FLOP counting with mmengine's analysis, extended to the ops mmengine has no handle for.

mmengine's ``FlopAnalyzer`` (fvcore's jit tracer; one FLOP = one multiply-add) already counts linear
layers, matmul/bmm/einsum (so InLine's ``k^T v`` and ``q M``) and convolutions with groups (so InLine's
dynamic depthwise 3x3 and its kernel generator). It has no handle for
``aten::scaled_dot_product_attention`` (the window attention's ``q k^T`` and ``attn v``), and its
einsum handle rounds to three significant digits (it parses ``numpy.einsum_path``'s printout): both are
replaced here by exact counts.
"""
from math import prod

from mmengine.analysis import FlopAnalyzer
from mmengine.analysis.jit_handles import get_shape


def sdpa_flop_jit(inputs, outputs):
    """Multiply-adds of softmax(q k^T + mask) v for q (..., L, E), k (..., S, E), v (..., S, Ev)."""
    q, k, v = (get_shape(x) for x in inputs[:3])
    return prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])


def einsum_flop_jit(inputs, outputs):
    """Exact multiply-adds of a two-operand einsum: the product of the sizes of all its indices."""
    equation = inputs[0].toIValue().replace(' ', '')
    operands = [get_shape(v) for v in inputs[1].node().inputs()]
    terms = equation.split('->')[0].split(',')
    if len(operands) != 2 or '.' in equation:
        raise NotImplementedError(f'einsum {equation!r} with {len(operands)} operands')
    sizes = {}
    for term, shape in zip(terms, operands):
        sizes.update(zip(term, shape))
    return prod(sizes.values())


def flop_analyzer(model, inputs):
    """``mmengine.analysis.FlopAnalyzer`` with the attention handle; ``.total()`` gives the count."""
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle(**{'aten::scaled_dot_product_attention': sdpa_flop_jit,
                              'aten::einsum': einsum_flop_jit})
    analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    return analyzer
