import pytest
import torch
from conftest import naive_inline_attention

from inline_backbones import InLineAttention
from inline_backbones.models.inline_attention import KERNEL_FUNCTIONS


def _released_formula(attn, x):
    """The release's form: q KV + (1 - s q . mean k) mean v with KV = (k sqrt(s/N))^T (v sqrt(s/N))."""
    B, N, C = x.shape
    h, d, s = attn.num_heads, attn.head_dims, attn.scale
    q, k, v = attn.qkv(x).view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)
    q, k = attn.phi(q), attn.phi(k)
    kv = (k * (s / N) ** 0.5).transpose(-1, -2) @ (v * (s / N) ** 0.5)
    out = q @ kv + (1 - s * q @ k.mean(2, keepdim=True).transpose(-1, -2)) * v.mean(2, keepdim=True)
    return out.transpose(1, 2).reshape(B, N, C)


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
@pytest.mark.parametrize('hw', [(5, 7), (8, 8), (3, 11)])
def test_matches_naive_and_weights_sum_to_one(kernel_func, hw):
    attn = InLineAttention(24, 3, kernel_func=kernel_func).double()
    x = torch.randn(2, hw[0] * hw[1], 24, dtype=torch.float64)
    ref, weights = naive_inline_attention(attn, x, hw, return_weights=True)
    torch.testing.assert_close(attn(x, hw), ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights[..., 0]), rtol=0, atol=1e-12)


@pytest.mark.parametrize('B, N', [(1, 16), (3, 100), (2, 1000)])
def test_fp32_fast_path_agrees_with_naive(B, N):
    attn = InLineAttention(32, 4, kernel_func='identity')
    x = torch.randn(B, N, 32)
    hw = (N // 4, 4) if N % 4 == 0 else (N, 1)
    torch.testing.assert_close(attn(x, hw), naive_inline_attention(attn, x, hw), rtol=1e-5, atol=1e-5)


def test_centred_form_equals_released_formula():
    attn = InLineAttention(16, 2).double()
    x = torch.randn(2, 30, 16, dtype=torch.float64)
    with torch.no_grad():  # switch off the local residual and the output projection
        attn.residual[2].weight.zero_()
        attn.residual[2].bias.zero_()
        attn.proj.weight.copy_(torch.eye(16))
        attn.proj.bias.zero_()
        ours = attn(x, (5, 6))
    torch.testing.assert_close(ours, _released_formula(attn, x), rtol=1e-9, atol=1e-9)


def test_weights_can_be_negative_and_distinct_queries_get_distinct_weights():
    attn = InLineAttention(8, 1).double()
    x = torch.randn(1, 16, 8, dtype=torch.float64)
    _, weights = naive_inline_attention(attn, x, (4, 4), return_weights=True)
    assert (weights < 0).any()
    assert torch.unique(weights[0, 0], dim=0).shape[0] == 16


def test_bad_arguments():
    with pytest.raises(ValueError, match='kernel_func'):
        InLineAttention(8, 2, kernel_func='softplus')
    with pytest.raises(ValueError, match='divisible'):
        InLineAttention(10, 3)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_low_precision_at_2048_is_finite_and_close(dtype):
    """Autocast at the stage-1 map of a 2048x2048 image (N = 262144 tokens), the largest N of the suite."""
    attn = InLineAttention(96, 3)
    H = W = 512
    x = torch.randn(1, H * W, 96) + 0.5        # a mean offset, as real features have
    with torch.no_grad():
        ref = attn(x, (H, W))
        with torch.autocast('cpu', dtype=dtype):
            out = attn(x, (H, W))
    assert out.dtype == dtype and torch.isfinite(out).all()
    rel = (out.float() - ref).norm() / ref.norm()
    assert rel < 1e-2, rel


def test_torch_compile_matches_eager():
    attn = InLineAttention(32, 4).eval()
    x = torch.randn(2, 12 * 10, 32)
    with torch.no_grad():
        eager = attn(x, (12, 10))
        compiled = torch.compile(attn)(x, (12, 10))
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
