"""InLine attention written out with the full N x N weight matrix: the reference the tests of the InLine layer, its
windows, its padding-aware and reduced-precision forms, linear attention and the attention analysis compare with.
Torch only (no OpenMMLab), so its importers stay off the ``openmmlab`` marker."""
import torch
import torch.nn.functional as F

# The kernel functions of the paper / the authors' code, written out here on purpose: the reference must
# not read them (nor the scale) from the module under test, or a wrong constant there would go unseen.
REFERENCE_KERNELS = {
    'identity': lambda x: x,
    'relu': F.relu,
    'leakyrelu': lambda x: F.leaky_relu(x, 0.01),
    'exp': lambda x: torch.exp(0.2 * x),
}


def naive_inline_attention(attn, x, hw_shape, return_weights=False):
    """InLine attention written out with the full N x N weight matrix (reference for tests).

    Per head with ``d = C / h`` and ``s = d ** -0.5``: ``A = s/N (q k^T - mean_l q k_l) + 1/N``,
    ``out = proj(A v + dwconv3x3(v; residual(mean x)))``. Only the learned weights (``qkv``,
    ``residual``, ``proj``) come from ``attn``; the constants are this function's own.
    """
    B, N, C = x.shape
    H, W = hw_shape
    h = attn.num_heads
    d = C // h
    s = d ** -0.5
    phi = REFERENCE_KERNELS[attn.kernel_func]
    q, k, v = attn.qkv(x).view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)          # (B, h, N, d)
    q, k = phi(q), phi(k)
    scores = q @ k.transpose(-1, -2)                                           # (B, h, N, N)
    weights = s / N * (scores - scores.mean(-1, keepdim=True)) + 1.0 / N
    out = (weights @ v).transpose(1, 2).reshape(B, N, C)
    kernel = attn.residual(x.mean(1).unsqueeze(-1)).view(B, C, 3, 3)
    v_map = F.pad(v.transpose(1, 2).reshape(B, N, C).transpose(1, 2).reshape(B, C, H, W), (1, 1, 1, 1))
    local = torch.zeros(B, C, H, W, dtype=x.dtype)
    for a in range(3):
        for b in range(3):
            local += kernel[:, :, a, b, None, None] * v_map[:, :, a:a + H, b:b + W]
    out = attn.proj(out + local.flatten(2).transpose(1, 2))
    return (out, weights) if return_weights else out
