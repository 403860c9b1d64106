"""InLine attention: injective linear attention with a dynamic local residual.

For the tokens ``X`` (N x C) of one image (after ``norm1``) and ``h`` heads of ``d = C / h`` channels
(channel index ``head * d + j``), with ``s = d ** -0.5``::

    q, k, v = split(qkv(X));  q, k = phi(q), phi(k)
    out_i   = sum_j A_ij v_j + dwconv3x3(v; w)
    A_ij    = s / N * (q_i . k_j - mean_l q_i . k_l) + 1 / N          (per head)
    w       = residual(mean_N X)                                      (9 weights per channel)
    y       = proj(out)

The rows of ``A`` sum to one and distinct queries get distinct weights (the map ``q -> A q`` is
injective), unlike plain linear attention. ``A`` is never formed: per head,

    sum_j A_ij v_j = q_i M + mean_N(v),   M = (s / N) * sum_j (k_j - mean_N k)^T v_j     (d x d),

which equals the released ``q KV + (1 - s q . mean_N k) mean_N v`` with ``KV = (s / N) k^T v``. The
centred keys and the ``sqrt(s / N)`` factor on both operands keep ``M`` in range in fp16/bf16 at large N.
"""
import torch
import torch.nn.functional as F
from torch import nn

KERNEL_FUNCTIONS = {
    'identity': lambda x: x,
    'relu': F.relu,
    'leakyrelu': F.leaky_relu,
    'exp': lambda x: torch.exp(0.2 * x),
}


class InLineAttention(nn.Module):
    """Global InLine attention over an H x W token map.

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h; C must be divisible by h.
        qkv_bias (bool): Bias of the ``qkv`` projection. Defaults to True.
        kernel_func (str): Kernel phi on queries and keys: ``identity``, ``relu``, ``leakyrelu``
            or ``exp`` (``exp(0.2 x)``). Defaults to ``identity``.
        proj_drop_rate (float): Dropout after ``proj``.
    """

    def __init__(self, embed_dims, num_heads, qkv_bias=True, kernel_func='identity', proj_drop_rate=0.):
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by num_heads {num_heads}')
        if kernel_func not in KERNEL_FUNCTIONS:
            raise ValueError(f'unknown kernel_func {kernel_func!r}; choose one of {sorted(KERNEL_FUNCTIONS)}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.scale = self.head_dims ** -0.5
        self.kernel_func = kernel_func
        self.phi = KERNEL_FUNCTIONS[kernel_func]
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)
        # Predicts a 3x3 depthwise kernel per channel from the mean token (grouped per head).
        self.residual = nn.Sequential(
            nn.Conv1d(embed_dims, embed_dims, 1, groups=num_heads),
            nn.GELU(),
            nn.Conv1d(embed_dims, embed_dims * 9, 1, groups=num_heads),
        )

    def forward(self, x, hw_shape):
        """x: (B, N, C) tokens in row-major order of ``hw_shape`` = (H, W). Returns (B, N, C)."""
        B, N, C = x.shape
        H, W = hw_shape
        h, d = self.num_heads, self.head_dims
        q, k, v = self.qkv(x).view(B, N, 3, h, d).unbind(2)
        q, k = self.phi(q), self.phi(k)

        factor = (self.scale / N) ** 0.5
        v_mean = v.mean(dim=1, keepdim=True)                                   # (B, 1, h, d)
        k_centred = (k - k.mean(dim=1, keepdim=True)) * factor
        m = torch.einsum('bnhd,bnhe->bhde', k_centred, v * factor)               # (B, h, d, d)
        out = torch.einsum('bnhd,bhde->bnhe', q, m) + v_mean                  # (B, N, h, d)

        # Dynamic local residual: one grouped conv over the B * C maps.
        w = self.residual(x.mean(dim=1).unsqueeze(-1))                         # (B, 9C, 1)
        v_maps = v.reshape(B, H, W, C).permute(0, 3, 1, 2).reshape(1, B * C, H, W)
        local = F.conv2d(v_maps, w.reshape(B * C, 1, 3, 3), padding=1, groups=B * C)
        out = out.reshape(B, N, C) + local.reshape(B, C, N).transpose(1, 2)
        return self.proj_drop(self.proj(out))

    def extra_repr(self):
        return f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, kernel_func={self.kernel_func!r}'
