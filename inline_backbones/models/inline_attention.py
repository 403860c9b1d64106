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

    sum_j A_ij v_j = q_i M + mean_N(v),   M = (s / N) k^T v - s mean_N(k)^T mean_N(v)     (d x d),

which equals the released ``q KV + (1 - s q . mean_N k) mean_N v`` with ``KV = (s / N) k^T v``.

How the forward is laid out (it is memory-bound on CPUs, so it minimises passes over the N x C maps):
``s / N`` is the GEMM's ``alpha``, applied before its result is rounded to the autocast dtype, so ``M``
stays in range in fp16/bf16 at any N (tested at N = 512 x 512) (the release's ``sqrt(s / N)`` factors serve the same purpose); with the identity kernel the
means of k and v are the projections of the mean token; the depthwise conv runs channels-last on all
B * C maps at once with ``mean(v)`` as its bias, and ``q M`` is accumulated into its output in place by
one batched GEMM over all (image, head) pairs, which leaves the result in the (N, C) layout ``proj``
reads. No N x N tensor, no loop over heads, windows or images.

Padding-aware (``mask`` given, 1 on an image's own tokens): ``N`` becomes each image's own token count
``n`` and every mean a masked sum divided by ``n``; ``k`` is zeroed outside and scaled by ``s / n`` (the
per-image alpha), and ``v`` is zeroed outside, so ``k^T v`` and the 3x3 residual see exactly what they
see for the image alone (two extra elementwise passes, still no N x N tensor or loop over images).
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
        local_residual (bool): Add the dynamic 3x3 depthwise residual. False (an ablation) gives plain
            injective linear attention ``out_i = sum_j A_ij v_j`` and no ``residual`` module.
            Defaults to True (the released model).
    """

    def __init__(self, embed_dims, num_heads, qkv_bias=True, kernel_func='identity', proj_drop_rate=0.,
                 local_residual=True):
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
        self.local_residual = local_residual
        if not local_residual:
            return
        # Predicts a 3x3 depthwise kernel per channel from the mean token (grouped per head).
        self.residual = nn.Sequential(
            nn.Conv1d(embed_dims, embed_dims, 1, groups=num_heads),
            nn.GELU(),
            nn.Conv1d(embed_dims, embed_dims * 9, 1, groups=num_heads),
        )

    def forward(self, x, hw_shape, mask=None):
        """x: (B, N, C) tokens in row-major order of ``hw_shape`` = (H, W). Returns (B, N, C).

        ``mask`` (B, N, 1), 1 on each image's own tokens and 0 on padding, makes the layer padding-aware
        (see :meth:`_masked_qkv`); outputs on padding tokens are then meaningless (finite).
        """
        B, N, C = x.shape
        H, W = hw_shape
        h, d, s = self.num_heads, self.head_dims, self.scale
        alpha = s / N
        if mask is not None:
            q, k, v, x_mean, k_mean, v_mean = self._masked_qkv(x, mask)
            alpha = 1.
        else:
            x_mean = x.mean(dim=1)                                               # (B, C)
            q, k, v = self.qkv(x).view(B, N, 3, C).unbind(2)                     # strided (B, N, C) views
            if self.kernel_func == 'identity':
                k_mean, v_mean = self._mean_kv(x_mean)
            else:
                q, k = self.phi(q), self.phi(k)
                k_mean, v_mean = k.mean(dim=1), v.mean(dim=1)

        # M per (image, head): (s/N) k^T v - s mean(k)^T mean(v), one batched GEMM.
        k_t = k.reshape(B, N, h, d).permute(0, 2, 3, 1).reshape(B * h, d, N)
        v_h = v.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
        m = torch.baddbmm((k_mean.reshape(B * h, d, 1) * v_mean.reshape(B * h, 1, d)).mul_(-s).to(k_t.dtype),
                          k_t, v_h, alpha=alpha)                                   # (B*h, d, d)

        if not self.local_residual:                                                # q M + mean(v) only
            q_h = q.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
            out = torch.baddbmm(v_mean.reshape(B * h, 1, d).to(q_h.dtype), q_h, m.to(q_h.dtype))
            return self.proj_drop(self.proj(out.view(B, h, N, d).transpose(1, 2).reshape(B, N, C)))
        # Local residual + mean(v): depthwise 3x3 over the B*C maps, channels-last, in (N, B, C) memory.
        kernels = self.residual(x_mean.unsqueeze(-1)).view(B * C, 1, 3, 3)
        maps = v.reshape(B, H, W, C).permute(1, 2, 0, 3).reshape(1, H, W, B * C).permute(0, 3, 1, 2)
        out = F.conv2d(maps, kernels.to(maps.dtype), bias=v_mean.reshape(B * C).to(maps.dtype), padding=1,
                       groups=B * C)                                               # channels-last output
        out = out.permute(0, 2, 3, 1).reshape(N, B * h, d)                        # a view in eager mode
        # + q M per (image, head), accumulated in place (inductor cannot replay an in-place update
        # through this transposed view of the conv output, so compiled graphs take the out-of-place form).
        q_h = q.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
        if torch.compiler.is_compiling():
            out = torch.baddbmm(out.transpose(0, 1), q_h, m.to(q_h.dtype)).transpose(0, 1)
        else:
            out.transpose(0, 1).baddbmm_(q_h, m.to(q_h.dtype))
        return self.proj_drop(self.proj(out.reshape(N, B, C).transpose(0, 1)))

    def _mean_kv(self, x_mean):
        """Means of k and v for the identity kernel: the projections of the mean token (B, C) each."""
        C = self.embed_dims
        bias = None if self.qkv.bias is None else self.qkv.bias[C:]
        return F.linear(x_mean, self.qkv.weight[C:], bias).view(-1, 2, C).unbind(1)

    def _masked_qkv(self, x, mask):
        """Padding-aware inputs of the forward: with ``n`` = the image's own token count (mask sum),
        ``x_mean``, ``mean(k)``, ``mean(v)`` are sums over own tokens / n; ``v`` is zeroed on padding (so
        the 3x3 residual sees zeros there, as around an image alone) and ``k`` is zeroed there and
        scaled by ``s / n`` (the per-image GEMM alpha), so ``k^T v`` sums over own tokens only."""
        B, N, C = x.shape
        mask = mask.to(x.dtype)
        counts = mask.sum(dim=1).clamp_(min=1)                                   # (B, 1); 0 only if empty
        x_mean = torch.bmm(mask.transpose(1, 2), x).squeeze(1) / counts          # (B, C)
        q, k, v = self.qkv(x).view(B, N, 3, C).unbind(2)
        if self.kernel_func == 'identity':
            k_mean, v_mean = self._mean_kv(x_mean)
        else:
            q, k = self.phi(q), self.phi(k)
            k_mean = torch.bmm(mask.transpose(1, 2).to(k.dtype), k).squeeze(1) / counts
            v_mean = torch.bmm(mask.transpose(1, 2).to(v.dtype), v).squeeze(1) / counts
        k = k * (mask * (self.scale / counts).unsqueeze(1)).to(k.dtype)
        v = v * mask.to(v.dtype)
        return q, k, v, x_mean, k_mean, v_mean

    def extra_repr(self):
        return (f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, kernel_func={self.kernel_func!r}'
                + ('' if self.local_residual else ', local_residual=False'))
