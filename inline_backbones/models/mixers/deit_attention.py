"""InLine attention over a map led by prefix tokens (a class token): the mixer of InLine-DeiT's blocks.

The tokens ``X`` (N x C, after ``norm1``) of one image are ``P`` prefix tokens (DeiT's class token, ``P = 1``)
followed by the ``H x W`` map in row-major order (``N = P + HW``, ``tokens.prefix_tokens`` says ``P``). With ``h``
heads of ``d = C / h`` channels and ``s = d ** -0.5``, as the authors' ``InLineAttention`` of ``inline_deit.py``::

    q, k, v = split(qkv(X));  q, k = phi(q), phi(k)                      (every token, the class token too)
    M       = (s / N) k^T v - s mean_N(k)^T mean_N(v)                    (d x d per head, means over all N)
    out_i   = q_i M + mean_N(v)                                          (every token)
    out_i  += dwconv3x3(v_map; residual(mean_N X))_i                     (map tokens only)
    y       = proj(out)

so the class token takes part in the global attention (as a key and value of every query, and as a query) and in
the mean token the 3x3 kernels are predicted from, but not in the 3x3 residual, which runs over the map's tokens
alone (zero padding at the map's edge): ``out`` of the class token has no residual term. With ``P = 0`` this is
:class:`~.inline.attention.InLineAttention`, and that class's forward runs (its padding-aware mode and GPU paths
included); with prefix tokens there is no padding-aware mode. The projections (``qkv``, ``proj``) and the kernel
predictor (``residual``) are that class's, with its keys; the computation is batched PyTorch on every device (the GPU
kernels of :mod:`.inline.gpu` know no prefix tokens).
"""
import torch

from ..layers.fused_linear import linear
from .inline.attention import InLineAttention


class PrefixInLineAttention(InLineAttention):
    """Global InLine attention over prefix tokens and a map (module docstring).

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h.
        qkv_bias (bool): Bias of ``qkv``. Defaults to True (the released models).
        kernel_func (str): Kernel phi on queries and keys (InLine's; the released models: ``identity``).
        proj_drop_rate (float): Dropout after ``proj``.
        local_residual (bool): The dynamic 3x3 residual on the map's tokens. Defaults to True.
    """

    alternates_shift = False   # global: every block the same

    def __init__(self, embed_dims, num_heads, qkv_bias=True, kernel_func='identity', proj_drop_rate=0.,
                 local_residual=True):
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, kernel_func=kernel_func,
                         proj_drop_rate=proj_drop_rate, local_residual=local_residual)

    def forward(self, x, tokens):
        """x: (B, P + HW, C) normalised tokens, the ``P = tokens.prefix_tokens`` prefix tokens first, then the map
        ``tokens.hw_shape``. Returns (B, P + HW, C)."""
        P = tokens.prefix_tokens
        if not P:
            return super().forward(x, tokens)
        if tokens.token_mask() is not None:
            raise NotImplementedError('InLine attention with prefix tokens has no padding-aware mode')
        B, N, C = x.shape
        h, d, s = self.num_heads, self.head_dims, self.scale
        w_q, b_q, w_k, b_k, w_v, b_v = self.projections()
        q, k, v = self.phi(linear(x, w_q, b_q)), self.phi(linear(x, w_k, b_k)), linear(x, w_v, b_v)
        k_mean, v_mean = k.mean(dim=1), v.mean(dim=1)                            # (B, C): over all N tokens
        k_t = k.reshape(B, N, h, d).permute(0, 2, 3, 1).reshape(B * h, d, N)
        v_h = v.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
        mean_term = (k_mean.reshape(B * h, d, 1) * v_mean.reshape(B * h, 1, d)).mul_(-s)
        m = torch.baddbmm(mean_term, k_t, v_h, alpha=s / N)                       # M: (B*h, d, d)
        q_h = q.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
        out = torch.baddbmm(v_mean.reshape(B * h, 1, d), q_h, m)                 # q M + mean(v): (B*h, N, d)
        out = out.view(B, h, N, d).transpose(1, 2).reshape(B, N, C)
        if self.local_residual:
            H, W = tokens.hw_shape
            res = self._local_residual(x.mean(dim=1), v[:, P:], v.new_zeros(B, C), (H, W))   # (1, B*C, H, W)
            out = torch.cat([out[:, :P], out[:, P:] + res.reshape(B, C, H * W).transpose(1, 2)], dim=1)
        return self.proj_drop(linear(out, self.proj.weight, self.proj.bias))

    def extra_repr(self):
        return super().extra_repr() + ', residual on the map\'s tokens'
