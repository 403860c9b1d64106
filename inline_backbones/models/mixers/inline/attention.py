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
stays in range in fp16/bf16 at any N (tested at N = 512 x 512) (the release's ``sqrt(s / N)`` factors
serve the same purpose); with the identity kernel the means of k and v are the projections of the mean
token; k and v are separate GEMM outputs (contiguous, so bf16 matmuls and the conv read them without
copies); the depthwise conv runs channels-last on all B * C maps at once with ``mean(v)`` as its bias;
``q M`` is accumulated in place into the conv's output by one batched GEMM over all (image, head)
pairs, which leaves it in the (N, C) layout ``proj`` reads; for the identity kernel and N > C it is
instead folded into ``proj``: with ``P = blockdiag_heads(M) W_p^T`` (C x C per image),
``proj(q M + r) = q P + proj(r)`` and ``q P = x (W_q^T P) + b_q M W_p^T``, so q is never formed
(``b_q M`` joins the conv's bias) and ``x (W_q^T P)`` is accumulated in place into ``proj``'s output.
Linears put their bias (and the MLP's GELU) in the GEMM (``fused_linear.py``). The result is in the
(N, C) layout the block reads. No N x N tensor, no loop over heads, windows or images.

Padding-aware (``mask`` given, 1 on an image's own tokens): ``N`` becomes each image's own token count
``n`` and every mean a masked sum divided by ``n``; ``k`` is zeroed outside and scaled by ``s / n`` (the
per-image alpha), and ``v`` is zeroed outside, so ``k^T v`` and the 3x3 residual see exactly what they
see for the image alone (two extra elementwise passes, still no N x N tensor or loop over images).
These per-image sums, and ``k^T v``, accumulate in fp32 (fp64 for fp64 inputs) under any autocast or
input dtype: an fp16 sum over the ~67,000 stage-1 tokens of a padded COCO batch overflows (65,504), and
``s / n`` rounded to fp16 is off by up to 1e-3 relative; ``M`` returns to the input dtype where ``q``
meets it.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ModelArgumentError, check_heads
from ...layers.fused_linear import linear
from ...tokens.graph_mode import exporting_or_tracing
from ...tokens.masks import from_windows, to_windows
from .autograd import attend_gpu_train
from .gpu import attend_gpu
from .paths import choose, with_fallback
from .reference import inline_attention_reference

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
        window_size (int, optional): None: global over the map (default). An int: within windows of that
            size (the authors' windowed InLine; partition in :mod:`.masks`).
        shift (bool): With ``window_size``, take the shifted windows (odd blocks of a stage).
    """

    alternates_shift = True   # windowed: odd blocks of a stage take the shifted windows

    def __init__(self, embed_dims, num_heads, qkv_bias=True, kernel_func='identity', proj_drop_rate=0.,
                 local_residual=True, window_size=None, shift=False):
        super().__init__()
        if window_size is not None and (isinstance(window_size, bool) or not isinstance(window_size, int)
                                        or window_size < 1):
            raise ModelArgumentError(
                f'window_size of InLine attention must be None or a positive int, got {window_size!r}')
        check_heads(embed_dims, num_heads)
        if kernel_func not in KERNEL_FUNCTIONS:
            raise ModelArgumentError(f'unknown kernel_func {kernel_func!r}; choose one of {sorted(KERNEL_FUNCTIONS)}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.scale = self.head_dims ** -0.5
        self.window_size = window_size
        self.shift = shift
        self.kernel_func = kernel_func
        self.phi = KERNEL_FUNCTIONS[kernel_func]
        self._build_projections(embed_dims, qkv_bias)
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

    def forward(self, x, tokens):
        """x: (B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`). Returns (B, N, C).

        Padding-aware maps give each image's own tokens (see the module docstring); outputs on padding
        tokens are then meaningless (finite). Windowed: the same layer on each window of the map.
        """
        if self.window_size is None:
            return self.attend(x, tokens.hw_shape, tokens.token_mask())
        if torch.jit.is_tracing() and torch.onnx.is_in_onnx_export():
            raise NotImplementedError(
                'InLine attention in windows (inline_window_size) cannot be exported by the TorchScript ONNX '
                'exporter (dynamo=False): the window count is not a constant in its graph, so the dynamic '
                'depthwise convolution has no known kernel shape. Use the default exporter (dynamo=True)')
        plan = tokens.window_plan(self.window_size, self.shift)
        return from_windows(self.attend(to_windows(x, plan), plan.window_hw, plan.mask), plan, x.shape[0])

    def _build_projections(self, embed_dims, qkv_bias):
        """The q, k, v projection modules: the released InLine-Swin's one ``qkv`` (read by :meth:`projections`)."""
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)

    def projections(self):
        """Weights and biases of the q, k, v projections (views of the released ``qkv`` parameters)."""
        C = self.embed_dims
        w_q, w_k, w_v = self.qkv.weight.view(3, C, C).unbind(0)
        b_q, b_k, b_v = (None,) * 3 if self.qkv.bias is None else self.qkv.bias.view(3, C).unbind(0)
        return w_q, b_q, w_k, b_k, w_v, b_v

    def qkv_projection(self):
        """Weight (3C, C) and bias of q, k and v as one projection: the released ``qkv``."""
        return self.qkv.weight, self.qkv.bias

    def kv_projection(self):
        """Weight (2C, C) and bias of k and v as one projection (a view of the released ``qkv``)."""
        C = self.embed_dims
        return self.qkv.weight[C:], None if self.qkv.bias is None else self.qkv.bias[C:]

    def attend(self, x, hw_shape, mask=None):
        """The layer on the (B, N, C) tokens of one ``hw_shape`` map (or a batch of windows); ``mask``
        (B, N, 1), true or 1 on each image's own tokens, makes it padding-aware. The implementation is the one
        :func:`~.paths.choose` names (:data:`IMPLEMENTATIONS`); a Triton one falls back to ``'torch'``
        where its kernels cannot be built."""
        name, fold = choose(x, self)
        if name.startswith('triton'):
            return with_fallback(IMPLEMENTATIONS[name], IMPLEMENTATIONS['torch'], self, x, hw_shape, mask, fold)
        return IMPLEMENTATIONS[name](self, x, hw_shape, mask, fold)

    def attend_torch(self, x, hw_shape, mask=None, fold=False, mean_token=None):
        """:meth:`attend` in batched PyTorch (the ``'torch'`` implementation: any device, differentiable,
        capturable); ``fold``: ``q M`` folded into ``proj`` (:meth:`_folded_output`). ``mean_token`` (B, C): the
        token the 3x3 kernels are predicted from, if not the mean of ``x`` over each image's own tokens (InLine-CSwin
        predicts them from the mean of its block's input, before ``norm1``)."""
        B, N, C = x.shape
        h, d, s = self.num_heads, self.head_dims, self.scale
        # q, k and v projections as three GEMMs, so k and v come out contiguous: the conv and the GEMMs
        # below read them without layout copies (bf16 matmuls copy every operand that is not contiguous
        # or a transposed contiguous matrix).
        w_q, b_q, w_k, b_k, w_v, b_v = self.projections()
        k, v = linear(x, w_k, b_k), linear(x, w_v, b_v)                          # (B, N, C) each
        if self.kernel_func != 'identity':
            k = self.phi(k)
        if mask is None:
            x_mean = x.mean(dim=1)                                               # (B, C)
            if self.kernel_func != 'identity':
                k_mean, v_mean = k.mean(dim=1), v.mean(dim=1)
            k_t = k.reshape(B, N, h, d).permute(0, 2, 3, 1).reshape(B * h, d, N)
            v_h = v.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
        else:
            # Sums over up to ~67,000 own tokens: in fp16 they overflow (max 65,504) and s / n rounds, so
            # they accumulate, and k^T v is computed, in (at least) fp32: the product with the mask in that
            # dtype promotes; M goes back to the input dtype where q meets it.
            acc = torch.promote_types(k.dtype, torch.float32)
            mask = mask.to(acc)
            counts = mask.sum(dim=1).clamp_(min=1)                               # (B, 1); 0 only if empty
            x_mean = ((x * mask).sum(dim=1) / counts).to(x.dtype)               # as x.mean: in x's dtype
            k = k * (mask * (s / counts).unsqueeze(1))            # own tokens, per-image alpha s / n folded in
            v = v * mask.to(v.dtype)                              # the 3x3 residual sees zeros outside
            if self.kernel_func != 'identity':
                k_mean, v_mean = k.sum(dim=1) / s, v.sum(dim=1, dtype=acc) / counts
            k_t = k.reshape(B, N, h, d).permute(0, 2, 3, 1).reshape(B * h, d, N)
            v_h = v.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d).to(acc)
        if self.kernel_func == 'identity':                          # means of k, v = projected mean token
            k_mean, v_mean = F.linear(x_mean, w_k, b_k), F.linear(x_mean, w_v, b_v)

        # M per (image, head): (s/N) k^T v - s mean(k)^T mean(v), one batched GEMM (alpha s / N applied
        # before the result is rounded; masked: in the accumulation dtype, outside autocast).
        mean_term = (k_mean.reshape(B * h, d, 1) * v_mean.reshape(B * h, 1, d)).mul_(-s).to(k_t.dtype)
        if mask is None:
            m = torch.baddbmm(mean_term, k_t, v_h, alpha=s / N)                    # (B*h, d, d)
        else:
            with torch.autocast(x.device.type, enabled=False):
                m = torch.baddbmm(mean_term, k_t, v_h)

        if mean_token is None:
            mean_token = x_mean
        if fold:
            out = self._folded_output(x, mean_token, v, m, v_mean, w_q, b_q, hw_shape)
        else:
            out = self._output(self.phi(linear(x, w_q, b_q)), mean_token, v, m, v_mean, hw_shape)
        return self.proj_drop(out)

    def _output(self, q, x_mean, v, m, v_mean, hw_shape):
        """``proj(q M + mean(v) + dwconv3x3(v))``: the released order of operations."""
        B, N, C = q.shape
        h, d = self.num_heads, self.head_dims
        q_h = q.reshape(B, N, h, d).transpose(1, 2).reshape(B * h, N, d)
        m = m.to(q_h.dtype)
        if not self.local_residual:                                                # q M + mean(v) only
            out = torch.baddbmm(v_mean.reshape(B * h, 1, d).to(q_h.dtype), q_h, m)
            return linear(out.view(B, h, N, d).transpose(1, 2).reshape(B, N, C), self.proj.weight, self.proj.bias)
        out = self._local_residual(x_mean, v, v_mean, hw_shape).permute(0, 2, 3, 1).reshape(N, B * h, d)  # view
        # + q M per (image, head), accumulated in place; captured graphs take the out-of-place form (inductor
        # cannot replay an in-place update through this transposed view of the conv output, and the
        # TorchScript ONNX exporter drops it: see graph_mode.py).
        if exporting_or_tracing():
            out = torch.baddbmm(out.transpose(0, 1), q_h, m).transpose(0, 1)
        else:
            out.transpose(0, 1).baddbmm_(q_h, m)
        return linear(out.reshape(N, B, C).transpose(0, 1), self.proj.weight, self.proj.bias)

    def _folded_output(self, x, x_mean, v, m, v_mean, w_q, b_q, hw_shape):
        """The same output with ``q M`` folded into ``proj``: with Mb = blockdiag_heads(M) and
        P = Mb W_p^T (C x C per image), proj(q Mb + r) = q P + proj(r), and for the identity kernel
        q P = x (W_q^T P) + b_q Mb W_p^T: q is never formed, and b_q Mb joins the conv's bias.
        W_q^T P costs C^3 MACs and saves a pass over q (N x C), so it is taken when N > C. It adds
        FLOPs when C^3 > N C d (at 224, stage 3), so FLOP counting (jit tracing) takes :meth:`_output`,
        the arithmetic the paper counts (4.5G for InLine-Swin-T at 224), and so does export, whose graph
        serves every size (the rule: :func:`~.paths.choose`)."""
        B, N, C = x.shape
        h, d = self.num_heads, self.head_dims
        m = m.view(B, h, d, d)
        p = torch.matmul(m, self.proj.weight.t().reshape(h, d, C).to(m.dtype)).view(B, C, C)   # Mb W_p^T
        p = torch.matmul(w_q.t().to(p.dtype).expand(B, C, C), p)                              # W_q^T Mb W_p^T
        bias = v_mean
        if b_q is not None:
            bias = bias + torch.matmul(b_q.view(1, h, 1, d).to(m.dtype).expand(B, h, 1, d), m).view(B, C)
        if self.local_residual:
            out = self._local_residual(x_mean, v, bias, hw_shape)
            out = linear(out.permute(0, 2, 3, 1).reshape(N, B, C).transpose(0, 1), self.proj.weight,
                         self.proj.bias)                                          # (B, N, C)
        else:                                                                     # proj(q M + mean(v))
            out = linear(bias.to(v.dtype), self.proj.weight, self.proj.bias).unsqueeze(1).expand(B, N, C).contiguous()
        # + x P per image, accumulated in place (out of place in captured graphs, see graph_mode.py).
        x, p = x.to(out.dtype), p.to(out.dtype)
        if exporting_or_tracing():
            return torch.baddbmm(out, x, p)
        return out.baddbmm_(x, p)

    def residual_kernels(self, x_mean):
        """The 3x3 depthwise kernels (B * C, 1, 3, 3) of the local residual: ``residual(x_mean)``, per image from its
        mean token ``x_mean`` (B, C)."""
        B, C = x_mean.shape
        return self.residual(x_mean.unsqueeze(-1)).view(B * C, 1, 3, 3)

    def _local_residual(self, x_mean, v, bias, hw_shape):
        """``dwconv3x3(v; residual(x_mean)) + bias`` over all B * C maps at once, channels-last, in
        (N, B, C) memory (for one image: v itself, no copy). Returns (1, B * C, H, W), channels-last."""
        B, N, C = v.shape
        H, W = hw_shape
        kernels = self.residual_kernels(x_mean)
        maps = v.reshape(B, H, W, C).permute(1, 2, 0, 3).reshape(1, H, W, B * C).permute(0, 3, 1, 2)
        return F.conv2d(maps, kernels.to(maps.dtype), bias=bias.reshape(B * C).to(maps.dtype), padding=1,
                        groups=B * C)

    # ---- what the attention analysis reads (inline_backbones.analysis) --------------------------------
    def head_qkv(self, x):
        """Raw (pre-kernel) q, k, v of every head of one image's tokens ``x`` (N, C): each (h, N, d)."""
        w_q, b_q, w_k, b_k, w_v, b_v = self.projections()
        N, h, d = x.shape[0], self.num_heads, self.head_dims
        return tuple(F.linear(x, w, b).view(N, h, d).transpose(0, 1) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))

    def residual_output(self, x, v, hw_shape):
        """The 3x3 residual per head (h, N, d) of one image's tokens ``x`` (N, C) with values ``v``
        (h, N, d): ``dwconv3x3(v; residual(mean_N x))``; None without the residual."""
        if not self.local_residual:
            return None
        h, N, d = v.shape
        out = self._local_residual(x.mean(0, keepdim=True), v.transpose(0, 1).reshape(1, N, h * d),
                                   v.new_zeros(1, h * d), hw_shape)
        return out.reshape(h, d, N).transpose(1, 2)

    def extra_repr(self):
        return (f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, kernel_func={self.kernel_func!r}'
                + ('' if self.local_residual else ', local_residual=False')
                + ('' if self.window_size is None else f', window_size={self.window_size}, shift={self.shift}'))


# InLine attention's implementations by the name :func:`~.paths.choose` gives (its module docstring says
# which runs when), each ``fn(attn, x, hw_shape, mask, fold)``; ``fold`` is only ever true for 'torch' and 'triton'.
IMPLEMENTATIONS = {
    'reference': lambda attn, x, hw_shape, mask, fold: inline_attention_reference(attn, x, hw_shape, mask),
    'torch': lambda attn, x, hw_shape, mask, fold: attn.attend_torch(x, hw_shape, mask, fold),
    'triton': lambda attn, x, hw_shape, mask, fold: attend_gpu(attn, x, hw_shape, mask, fold),
    'triton-train': lambda attn, x, hw_shape, mask, fold: attend_gpu_train(attn, x, hw_shape, mask),
}
