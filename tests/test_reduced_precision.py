"""bf16 inference (autocast and pure: weights and input cast) stays close to fp32; the fused oneDNN
linears of the inference path compute the same function as ``F.linear`` (+ GELU); both forms of q M
(folded into proj when N > C, explicit q otherwise) equal the N x N formula."""
import pytest
import torch
import torch.nn.functional as F
from conftest import naive_inline_attention

from inline_backbones import InLineAttention, InLineSwinTransformer
from inline_backbones.models.fused_linear import linear


def _relative(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.fixture(scope='module')
def tiny_and_input():
    torch.manual_seed(0)
    model = InLineSwinTransformer('tiny', drop_path_rate=0.).eval()
    model.init_weights()
    with torch.no_grad():  # non-trivial norms and biases, so every term of every layer matters
        for name, p in model.named_parameters():
            if name.endswith('bias') or 'norm' in name:
                p.add_(torch.randn_like(p) * 0.05)
    return model, torch.randn(1, 3, 384, 320) + 0.5


@pytest.mark.parametrize('mode', ['autocast', 'pure'])
def test_bf16_stage_outputs_are_finite_and_within_2e_2_of_fp32(tiny_and_input, mode):
    model, x = tiny_and_input
    with torch.no_grad():
        ref = model(x)
        if mode == 'autocast':
            with torch.autocast('cpu', dtype=torch.bfloat16):
                outs = model(x)
        else:
            outs = model.to(torch.bfloat16)(x.to(torch.bfloat16))
            model.float()
    for i, (out, r) in enumerate(zip(outs, ref)):
        assert out.dtype == torch.bfloat16 and out.shape == r.shape
        assert torch.isfinite(out).all(), i
        assert _relative(out, r) < 2e-2, (i, _relative(out, r))
    # The bound is not vacuous: fp32 outputs of another input are far outside it.
    with torch.no_grad():
        assert _relative(model(x + 0.1 * torch.randn_like(x))[3], ref[3]) > 2e-2


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('gelu', [False, True])
def test_fused_linear_equals_f_linear(dtype, gelu):
    x = torch.randn(2, 2100, 48).to(dtype)                          # >= MIN_ROWS rows: the oneDNN path
    weight, bias = torch.randn(96, 48).to(dtype) * 0.2, torch.randn(96).to(dtype)
    with torch.no_grad():
        fused = linear(x, weight, bias, gelu=gelu)
        ref = F.linear(x.float(), weight.float(), bias.float())
        ref = F.gelu(ref) if gelu else ref
    assert fused.dtype == dtype and fused.shape == ref.shape
    torch.testing.assert_close(fused.float(), ref, rtol=1e-5 if dtype == torch.float32 else 1e-2,
                               atol=1e-4 if dtype == torch.float32 else 3e-2)


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
        torch.testing.assert_close(attn(x, hw), naive_inline_attention(attn, x, hw), rtol=1e-10, atol=1e-12)
