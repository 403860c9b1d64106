import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def naive_inline_attention(attn, x, hw_shape, return_weights=False):
    """InLine attention written out with the full N x N weight matrix (reference for tests)."""
    B, N, C = x.shape
    H, W = hw_shape
    h, d, s = attn.num_heads, attn.head_dims, attn.scale
    q, k, v = attn.qkv(x).view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)          # (B, h, N, d)
    q, k = attn.phi(q), attn.phi(k)
    scores = q @ k.transpose(-1, -2)                                           # (B, h, N, N)
    weights = s / N * (scores - scores.mean(-1, keepdim=True)) + 1.0 / N
    out = (weights @ v).transpose(1, 2).reshape(B, N, C)
    kernel = attn.residual(x.mean(1).unsqueeze(-1)).view(B, C, 3, 3)
    v_map = torch.nn.functional.pad(v.transpose(1, 2).reshape(B, N, C).transpose(1, 2).reshape(B, C, H, W),
                                    (1, 1, 1, 1))
    local = torch.zeros(B, C, H, W, dtype=x.dtype)
    for a in range(3):
        for b in range(3):
            local += kernel[:, :, a, b, None, None] * v_map[:, :, a:a + H, b:b + W]
    out = attn.proj(out + local.flatten(2).transpose(1, 2))
    return (out, weights) if return_weights else out
