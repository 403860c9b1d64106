"""Plain (non-injective) linear attention, the layout letter ``L``: the ablation InLine is compared with.

For the tokens ``X`` (N x C) of one image and ``h`` heads of ``d = C / h`` channels, with a
non-negative kernel ``phi`` (``relu`` or ``exp(0.2 x)``)::

    q, k, v = split(qkv(X));  q, k = phi(q), phi(k)
    out_i   = sum_j A_ij v_j,   A_ij = q_i . k_j / (N (q_i . mean_l k_l + eps))            (per head)
    y       = proj(out)

The rows of ``A`` sum to one (up to ``eps``) but ``A`` depends on ``q_i`` only through its direction:
queries ``q`` and ``c q`` (c > 0) get the same weights, the "semantic confusion" InLine removes by
centring. ``A`` is never formed: ``out_i = q_i (k^T v / N) / (q_i . mean(k) + eps)``, linear in N.
Same ``qkv`` / ``proj`` parameters as :class:`InLineAttention`, no local residual.

Padding-aware (``mask`` given, 1 on an image's own tokens): ``N`` becomes the image's own token count
``n`` and ``k`` is zeroed outside its region, so ``k^T v / n`` and ``mean(k)`` are those of the image alone.
The sums over tokens accumulate in fp32 (or fp64) whatever the input dtype.
"""
import torch
from torch import nn

from ..errors import ModelArgumentError, check_heads
from .inline.attention import KERNEL_FUNCTIONS

LINEAR_KERNELS = ('exp', 'relu')   # non-negative kernels: the normaliser q_i . mean(k) is >= 0
EPS = 1e-6                         # added to the normaliser (zero when relu zeroes a query)


class LinearAttention(nn.Module):
    """Global linear attention over an H x W token map, normalised by division.

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h; C must be divisible by h.
        qkv_bias (bool): Bias of the ``qkv`` projection. Defaults to True.
        kernel_func (str): Non-negative kernel phi on queries and keys: ``relu`` (default) or ``exp``.
        proj_drop_rate (float): Dropout after ``proj``.
    """

    def __init__(self, embed_dims, num_heads, qkv_bias=True, kernel_func='relu', proj_drop_rate=0.):
        super().__init__()
        check_heads(embed_dims, num_heads)
        if kernel_func not in LINEAR_KERNELS:
            raise ModelArgumentError(f'linear attention needs a non-negative kernel; kernel_func {kernel_func!r} is '
                                     f'not one of {list(LINEAR_KERNELS)}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.kernel_func = kernel_func
        self.phi = KERNEL_FUNCTIONS[kernel_func]
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)

    def forward(self, x, tokens):
        """x: (B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`; attention is global,
        padding-aware maps give each image's own tokens). Returns (B, N, C)."""
        B, N, C = x.shape
        mask = tokens.token_mask()
        h, d = self.num_heads, self.head_dims
        q, k, v = self.qkv(x).view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)           # (B, h, N, d)
        q, k = self.phi(q), self.phi(k)
        # The sums over N tokens (k^T v, mean(k)) and the normaliser accumulate in (at least) fp32, outside
        # autocast: in fp16 they overflow at COCO token counts (max 65,504).
        acc = torch.promote_types(q.dtype, torch.float32)
        with torch.autocast(x.device.type, enabled=False):
            q32, k, v32 = q.to(acc), k.to(acc), v.to(acc)
            n = N
            if mask is not None:
                mask = mask.to(acc).unsqueeze(1)                                    # (B, 1, N, 1)
                n = mask.sum(dim=2, keepdim=True).clamp_(min=1)                     # (B, 1, 1, 1)
                k = k * mask
            kv = torch.matmul(k.transpose(-1, -2), v32) / n                         # (B, h, d, d)
            k_mean = k.sum(dim=2, keepdim=True) / n                                 # (B, h, 1, d)
            norm = torch.matmul(q32, k_mean.transpose(-1, -2)) + EPS                # (B, h, N, 1)
        out = (torch.matmul(q, kv.to(q.dtype)) / norm).to(q.dtype)
        return self.proj_drop(self.proj(out.transpose(1, 2).reshape(B, N, C)))

    def extra_repr(self):
        return f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, kernel_func={self.kernel_func!r}'
