"""bf16 inference (autocast and pure: weights and input cast) stays close to fp32; the fused oneDNN
linears of the inference path compute the same function as ``F.linear`` (+ GELU); both forms of q M
(folded into proj when N > C, explicit q otherwise) equal the N x N formula."""
import pytest
import torch
import torch.nn.functional as F
from reference_attention import naive_inline_attention

from inline_backbones import InLineAttention, InLineCSwinTransformer, InLineSwinTransformer
from inline_backbones.models.layers import fused_linear
from inline_backbones.models.layers.fused_linear import linear
from inline_backbones.models.tokens.token_map import TokenMap


def _relative(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.fixture(scope='module', params=[InLineSwinTransformer, InLineCSwinTransformer], ids=['swin-t', 'cswin-t'])
def tiny_and_input(request):
    """InLine-Swin-T, InLine-CSwin-T (global InLine with LePE; stripes of 7 over 16x14 maps: padded) at 256 x 224."""
    torch.manual_seed(0)
    model = request.param('tiny', drop_path_rate=0.).eval()
    model.init_weights()
    with torch.no_grad():  # non-trivial norms and biases, so every term of every layer matters
        for name, p in model.named_parameters():
            if name.endswith('bias') or 'norm' in name:
                p.add_(torch.randn_like(p) * 0.05)
    return model, torch.randn(1, 3, 256, 224) + 0.5   # stage maps 64x56 .. 8x7: shifted windows in stage 3


@pytest.mark.parametrize('mode', ['autocast', 'pure', 'pure, padding-aware'])
def test_bf16_stage_outputs_are_finite_and_within_2e_2_of_fp32(tiny_and_input, mode):
    """Padding-aware: the image's region (200 x 180 of the 256 x 224 input) compared, on every stage."""
    model, x = tiny_and_input
    shapes = [(200, 180)] if 'padding-aware' in mode else None
    model.padding_aware = shapes is not None
    try:
        with torch.no_grad():
            ref = model(x, image_shapes=shapes)
            if mode == 'autocast':
                with torch.autocast('cpu', dtype=torch.bfloat16):
                    outs = model(x)
            else:
                outs = model.to(torch.bfloat16)(x.to(torch.bfloat16), image_shapes=shapes)
    finally:
        model.float().padding_aware = False
    for i, (out, r) in enumerate(zip(outs, ref, strict=True)):
        assert out.dtype == torch.bfloat16 and out.shape == r.shape
        assert torch.isfinite(out).all(), i
        if shapes:
            h, w = -(-200 // 2 ** (i + 2)), -(-180 // 2 ** (i + 2))
            out, r = out[..., :h, :w], r[..., :h, :w]
        assert _relative(out, r) < 2e-2, (i, _relative(out, r))
    # The bound is not vacuous: fp32 outputs of another input are far outside it.
    with torch.no_grad():
        assert _relative(model(x + 0.1 * torch.randn_like(x))[3], ref[3]) > 2e-2


def _linear_inputs(dtype):
    x = torch.randn(2, 2100, 48).to(dtype)                          # >= MIN_ROWS rows: the oneDNN path
    return x, torch.randn(96, 48).to(dtype) * 0.2, torch.randn(96).to(dtype)


def _reference(x, weight, bias, gelu):
    ref = F.linear(x.float(), weight.float(), bias.float())
    return F.gelu(ref) if gelu else ref


@pytest.fixture
def fresh_probe(monkeypatch):
    """The oneDNN probe re-run inside the test and reset after it (with the failure flag)."""
    probe = fused_linear.onednn_linear
    monkeypatch.setattr(fused_linear, '_failed', False)
    probe.cache_clear()
    yield
    probe.cache_clear()


def _spy_on_op(monkeypatch, op):
    calls = []

    def spy(*args):
        calls.append(args[-3:])
        return op(*args)
    monkeypatch.setattr(fused_linear, 'onednn_linear', lambda: spy)
    return calls


@pytest.mark.skipif(fused_linear.onednn_linear() is None,
                    reason='this CPU/torch has no oneDNN bf16 inner product '
                           '(torch.ops.mkldnn._is_mkldnn_bf16_supported() is False, e.g. AVX2 without avx512_bf16)')
@pytest.mark.parametrize('autocast', [False, True])
@pytest.mark.parametrize('gelu', [False, True])
def test_fused_branch_runs_and_equals_f_linear(monkeypatch, autocast, gelu):
    calls = _spy_on_op(monkeypatch, fused_linear.onednn_linear())
    x, weight, bias = _linear_inputs(torch.float32 if autocast else torch.bfloat16)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
        fused = linear(x, weight, bias, gelu=gelu)
    assert calls == [('gelu' if gelu else 'none', [], 'none' if gelu else '')]
    assert fused.dtype == torch.bfloat16 and fused.shape == (2, 2100, 96)
    torch.testing.assert_close(fused.float(), _reference(x, weight, bias, gelu), rtol=1e-2, atol=3e-2)


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('gelu', [False, True])
def test_fallback_without_the_capability_equals_f_linear(monkeypatch, fresh_probe, dtype, gelu):
    """A CPU without oneDNN bf16 (AVX2 only): the probe says so and F.linear (+ GELU) runs instead."""
    monkeypatch.setattr(torch.ops.mkldnn, fused_linear.ONEDNN_BF16_CHECK, lambda: False)
    assert fused_linear.onednn_linear() is None
    x, weight, bias = _linear_inputs(dtype)
    with torch.no_grad():
        out = linear(x, weight, bias, gelu=gelu)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            autocast = linear(x.float(), weight.float(), bias.float(), gelu=gelu)
    assert out.dtype == dtype and autocast.dtype == torch.bfloat16
    ref = _reference(x, weight, bias, gelu)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-2, atol=3e-2)
    torch.testing.assert_close(out.float(), ref, **tol)
    torch.testing.assert_close(autocast.float(), ref, rtol=1e-2, atol=3e-2)


def test_a_renamed_op_means_the_fallback(monkeypatch, fresh_probe):
    """A torch that renames the private op costs the fast path, not an error."""
    monkeypatch.setattr(fused_linear, 'ONEDNN_OP', '_no_such_linear_op')
    assert fused_linear.onednn_linear() is None


def test_an_op_that_raises_falls_back_for_the_rest_of_the_process(monkeypatch, fresh_probe):
    calls = []

    def broken(*args):
        calls.append(1)
        raise RuntimeError('could not create a primitive descriptor for the inner product')
    monkeypatch.setattr(fused_linear, 'onednn_linear', lambda: broken)
    x, weight, bias = _linear_inputs(torch.bfloat16)
    with torch.no_grad():
        first, second = linear(x, weight, bias, gelu=True), linear(x, weight, bias, gelu=True)
    assert calls == [1]                                              # tried once, then never again
    for out in (first, second):
        torch.testing.assert_close(out.float(), _reference(x, weight, bias, True), rtol=1e-2, atol=3e-2)


def test_fused_linear_under_autocast_and_with_gradients():
    x = torch.randn(4, 10, 16, requires_grad=True)
    weight, bias = torch.randn(8, 16), torch.randn(8)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        assert linear(x, weight, bias).dtype == torch.bfloat16      # as autocast's own F.linear
    out = linear(x, weight, bias, gelu=True)                         # needs gradients: F.linear path
    out.sum().backward()
    torch.testing.assert_close(out, F.gelu(F.linear(x, weight, bias)))
    assert x.grad is not None and torch.isfinite(x.grad).all()


@pytest.mark.parametrize('hw', [(4, 5), (9, 9)])   # N = 20 < C (q formed) and N = 81 > C (q M folded)
@pytest.mark.parametrize('qkv_bias', [True, False])
def test_q_m_folded_or_not_equals_the_n_by_n_formula(hw, qkv_bias):
    attn = InLineAttention(32, 4, qkv_bias=qkv_bias).double()
    with torch.no_grad():
        for p in attn.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        x = torch.randn(2, hw[0] * hw[1], 32, dtype=torch.double)
        torch.testing.assert_close(attn(x, TokenMap.of(x, hw)), naive_inline_attention(attn, x, hw),
                                   rtol=1e-10, atol=1e-12)


def test_when_the_fused_onednn_linear_is_taken(monkeypatch):
    """The fused kernel is taken for bf16 CPU inference (pure or autocast) from MIN_ROWS rows, with fp32 or bf16
    weights; never when gradients are needed, a graph is captured, the dtype is another, or the op failed."""
    monkeypatch.setattr(fused_linear, 'onednn_linear', lambda: object())   # as on a CPU with oneDNN bf16
    monkeypatch.setattr(fused_linear, '_failed', False)
    bf16, rows = torch.bfloat16, fused_linear.MIN_ROWS
    w32, w16 = torch.zeros(8, 4), torch.zeros(8, 4, dtype=bf16)
    decide = fused_linear._onednn_dtype
    with torch.no_grad():
        assert decide(torch.zeros(rows, 4, dtype=bf16), w32) == decide(torch.zeros(rows, 4, dtype=bf16), w16) == bf16
        assert decide(torch.zeros(rows - 1, 4, dtype=bf16), w16) is None              # too few rows
        assert decide(torch.zeros(rows, 4), w32) is None                               # fp32, no autocast
        assert decide(torch.zeros(rows, 4, dtype=bf16), w16.half()) is None             # fp16 weights
        with torch.autocast('cpu', dtype=bf16):
            assert decide(torch.zeros(rows, 4), w32) == bf16
        with torch.autocast('cpu', dtype=torch.float16):
            assert decide(torch.zeros(rows, 4), w32) is None
        assert decide(torch.zeros(rows, 4, dtype=bf16, device='meta'), w16.to('meta')) is None   # not a CPU
    trainable = torch.zeros(rows, 4, dtype=bf16, requires_grad=True)
    assert decide(trainable, w16) is None and decide(torch.zeros(rows, 4, dtype=bf16), w16.requires_grad_()) is None
    with torch.no_grad():
        assert decide(trainable, w16) == bf16                                          # inference on a leaf
    monkeypatch.setattr(fused_linear, 'exporting_or_tracing', lambda: True)
    with torch.no_grad():
        assert decide(torch.zeros(rows, 4, dtype=bf16), w16) is None                   # a graph is captured
    monkeypatch.setattr(fused_linear, 'exporting_or_tracing', lambda: False)
    monkeypatch.setattr(fused_linear, '_failed', True)
    with torch.no_grad():
        assert decide(torch.zeros(rows, 4, dtype=bf16), w16) is None                   # the op failed before
