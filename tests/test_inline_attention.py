import pytest
import torch
import torch.nn.functional as F
from reference_attention import REFERENCE_KERNELS, naive_inline_attention

from inline_backbones import InLineAttention
from inline_backbones.models.mixers.inline.attention import KERNEL_FUNCTIONS
from inline_backbones.models.tokens.token_map import TokenMap


def _released_formula(attn, x):
    """The release's form: q KV + (1 - s q . mean k) mean v with KV = (k sqrt(s/N))^T (v sqrt(s/N)).

    ``s = d^-0.5`` and the kernel are this function's own (only the ``qkv`` weights come from ``attn``).
    """
    B, N, C = x.shape
    h = attn.num_heads
    d = C // h
    s = d ** -0.5
    phi = REFERENCE_KERNELS[attn.kernel_func]
    q, k, v = attn.qkv(x).view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)
    q, k = phi(q), phi(k)
    kv = (k * (s / N) ** 0.5).transpose(-1, -2) @ (v * (s / N) ** 0.5)
    out = q @ kv + (1 - s * q @ k.mean(2, keepdim=True).transpose(-1, -2)) * v.mean(2, keepdim=True)
    return out.transpose(1, 2).reshape(B, N, C)


def _probe_layer(kernel_func, C=8, seed=0):
    """A one-head layer whose weights A can be read off: q and k read channels 0..C-2 of the tokens
    (no query bias), v's first channel is channel C-1 and its other channels are zero; the local
    residual is switched off and ``proj`` is the identity. Then ``out[:, i, 0] = sum_j A_ij x_j[C-1]``."""
    g = torch.Generator().manual_seed(seed)
    attn = InLineAttention(C, 1, kernel_func=kernel_func).double()
    with torch.no_grad():
        w = torch.zeros(3 * C, C, dtype=torch.float64)
        w[:2 * C, :C - 1] = torch.randn(2 * C, C - 1, generator=g, dtype=torch.float64)
        w[2 * C, C - 1] = 1.0
        attn.qkv.weight.copy_(w)
        attn.qkv.bias.zero_()
        attn.qkv.bias[C:2 * C].copy_(0.3 * torch.randn(C, generator=g, dtype=torch.float64))
        attn.residual[2].weight.zero_()
        attn.residual[2].bias.zero_()
        attn.proj.weight.copy_(torch.eye(C))
        attn.proj.bias.zero_()
    return attn


def _weights_of_layer(attn, x, hw):
    """The N x N weights A of the implementation for the tokens ``x`` (N, C), one probe per column:
    image j of the batch carries a one-hot value at token j (q and k do not see that channel)."""
    N, C = x.shape
    probes = x.expand(N, N, C).clone()
    probes[..., C - 1] = torch.eye(N, dtype=x.dtype)
    with torch.no_grad():
        out = attn(probes, TokenMap.of(probes, hw))                  # out[j, i, 0] = A_ij
    return out[..., 0].T


def _reference_weights(attn, x, kernel_func):
    """``s/N (phi(q_i) . phi(k_j) - mean_l phi(q_i) . phi(k_l)) + 1/N`` with ``s = d^-0.5`` (one head)."""
    N, C = x.shape
    phi = REFERENCE_KERNELS[kernel_func]
    q, k, _ = attn.qkv(x).split(C, dim=-1)
    scores = phi(q) @ phi(k).T
    return C ** -0.5 / N * (scores - scores.mean(-1, keepdim=True)) + 1.0 / N


def _probe_tokens(N, C, seed=1):
    x = torch.randn(N, C, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x[:, C - 1] = 0
    return x


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
@pytest.mark.parametrize('hw', [(5, 7), (8, 8), (3, 11)])
def test_matches_naive_reference(kernel_func, hw):
    attn = InLineAttention(24, 3, kernel_func=kernel_func).double()
    x = torch.randn(2, hw[0] * hw[1], 24, dtype=torch.float64)
    torch.testing.assert_close(attn(x, TokenMap.of(x, hw)), naive_inline_attention(attn, x, hw), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('B, N', [(1, 16), (3, 100), (2, 1000)])
def test_fp32_fast_path_agrees_with_naive(B, N):
    attn = InLineAttention(32, 4, kernel_func='identity')
    x = torch.randn(B, N, 32)
    hw = (N // 4, 4) if N % 4 == 0 else (N, 1)
    torch.testing.assert_close(attn(x, TokenMap.of(x, hw)), naive_inline_attention(attn, x, hw), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
def test_centred_form_equals_released_formula(kernel_func):
    attn = InLineAttention(16, 2, kernel_func=kernel_func).double()
    x = torch.randn(2, 30, 16, dtype=torch.float64)
    with torch.no_grad():  # switch off the local residual and the output projection
        attn.residual[2].weight.zero_()
        attn.residual[2].bias.zero_()
        attn.proj.weight.copy_(torch.eye(16))
        attn.proj.bias.zero_()
        ours = attn(x, TokenMap.of(x, (5, 6)))
    torch.testing.assert_close(ours, _released_formula(attn, x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
def test_layer_weights_sum_to_one_and_equal_the_formula(kernel_func):
    """The weights read off the implementation: rows sum to one, some are negative, and they are
    ``s/N (q k^T - mean) + 1/N`` with ``s = d^-0.5`` and the paper's kernel."""
    attn = _probe_layer(kernel_func)
    x = _probe_tokens(20, 8)
    weights = _weights_of_layer(attn, x, (4, 5))
    torch.testing.assert_close(weights, _reference_weights(attn, x, kernel_func), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(20, dtype=torch.float64), rtol=0, atol=1e-12)
    if kernel_func in ('identity', 'leakyrelu'):      # centred scores of unbounded sign
        assert (weights < 0).any()
    # distinct queries get distinct weights
    assert torch.unique(weights, dim=0).shape[0] == 20


def test_collinear_queries_get_distinct_rows_unlike_linear_attention():
    """q and 2q: linear attention normalises the scale away (identical rows), InLine does not
    (row(2q) - 1/N = 2 (row(q) - 1/N))."""
    attn = _probe_layer('relu')
    N, C = 12, 8
    x = _probe_tokens(N, C)
    x[1, :C - 1] = 2 * x[0, :C - 1]                 # no query bias: q_1 = 2 q_0, and relu keeps it
    weights = _weights_of_layer(attn, x, (3, 4))

    q, k, _ = attn.qkv(x).split(C, dim=-1)
    torch.testing.assert_close(F.relu(q[1]), 2 * F.relu(q[0]))
    linear = F.relu(q) @ F.relu(k).T
    linear = linear / linear.sum(-1, keepdim=True)
    torch.testing.assert_close(linear[1], linear[0], rtol=1e-12, atol=1e-14)

    assert (weights[1] - weights[0]).abs().max() > 1e-3
    torch.testing.assert_close(weights[1] - 1 / N, 2 * (weights[0] - 1 / N), rtol=1e-10, atol=1e-13)


def test_bad_arguments():
    with pytest.raises(ValueError, match='kernel_func'):
        InLineAttention(8, 2, kernel_func='softplus')
    with pytest.raises(ValueError, match='divisible'):
        InLineAttention(10, 3)


# Relative error of the layer's output under autocast at N = 512 x 512: a few unit roundoffs of the
# dtype (u = 2^-11 for fp16, 2^-8 for bf16). Measured (seed 0): fp16 5.6e-4, bf16 4.7e-3.
LOW_PRECISION_RTOL = {torch.float16: 2 * 2 ** -11, torch.bfloat16: 2 * 2 ** -8}


@pytest.mark.slow
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_low_precision_at_2048_is_finite_and_close(dtype):
    """Autocast at the stage-1 map of a 2048x2048 image (N = 262144 tokens), the largest N of the suite."""
    attn = InLineAttention(96, 3)
    H = W = 512
    x = torch.randn(1, H * W, 96) + 0.5        # a mean offset, as real features have
    with torch.no_grad():
        ref = attn(x, TokenMap.of(x, (H, W)))
        with torch.autocast('cpu', dtype=dtype):
            out = attn(x, TokenMap.of(x, (H, W)))
    assert out.dtype == dtype and torch.isfinite(out).all()
    rel = (out.float() - ref).norm() / ref.norm()
    assert rel < LOW_PRECISION_RTOL[dtype], rel


@pytest.mark.slow
def test_torch_compile_matches_eager():
    """The layer's graph-capture branch, traced by dynamo and AOT autograd, computes what eager mode does. The
    ``aot_eager`` backend runs the captured graph with torch's own kernels: inductor's code generation is torch's to
    test, and costs about 20 s of C++ compilation on a 2-core CPU."""
    attn = InLineAttention(32, 4).eval()
    x = torch.randn(2, 12 * 10, 32)
    with torch.no_grad():
        eager = attn(x, TokenMap.of(x, (12, 10)))
        compiled = torch.compile(attn, backend='aot_eager')(x, TokenMap.of(x, (12, 10)))
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('kernel_func', ['identity', 'relu'])
def test_without_qkv_bias_matches_naive_reference(kernel_func):
    attn = InLineAttention(16, 2, qkv_bias=False, kernel_func=kernel_func).double()
    assert attn.qkv.bias is None
    x = torch.randn(2, 20, 16, dtype=torch.float64) + 0.3
    torch.testing.assert_close(attn(x, TokenMap.of(x, (4, 5))), naive_inline_attention(attn, x, (4, 5)),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('hw', [(4, 5), (9, 10)])          # N < C: q M added after the conv; N > C: folded into proj
@pytest.mark.parametrize('local_residual', [True, False])
def test_the_captured_graph_form_equals_the_eager_form(monkeypatch, hw, local_residual):
    """Under export, compile and FLOP counting the layer adds q M out of place (graph_mode.py says why); the same
    values as the eager in-place form, checked without capturing a graph."""
    from inline_backbones.models.mixers.inline import attention as inline_attention
    from inline_backbones.models.mixers.inline.reference import inline_attention_reference

    torch.manual_seed(0)
    attn = InLineAttention(32, 2, local_residual=local_residual).eval()
    x = torch.randn(2, hw[0] * hw[1], 32)
    tokens = TokenMap.of(x, hw)
    with torch.no_grad():
        eager = attn(x, tokens)
        monkeypatch.setattr(inline_attention, 'exporting_or_tracing', lambda: True)
        captured = attn(x, tokens)
        torch.testing.assert_close(captured, eager, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(eager, inline_attention_reference(attn, x, hw), rtol=1e-4, atol=1e-4)
