"""The token mixers of the InLine-CSwin family, on the mixer contract ``mixer(x, tokens) -> y`` of :mod:`.mixers`.

Both hold CSWin's block-level projections ``qkv`` (C -> 3C: q, k, v = output channels ``[0, C)``, ``[C, 2C)``,
``[2C, 3C)``) and ``proj``, and CSWin's locally-enhanced positional encoding (LePE) of each branch,
``lepe.{b}``: a depthwise 3x3 conv with bias on v, added to the branch's output, within each of its windows
(zero padding at a window's edge). With ``h`` heads of ``d`` channels (channel ``head * d + j``):

* :class:`CSwinInLineAttention` (``I``): global InLine attention over each image's whole map, the LePE over the
  whole map, and InLine's dynamic 3x3 residual predicted from the mean of the block's *input* (before ``norm1``),
  as the authors' InLine-CSwin block does::

      out = q M + mean_N(v) + dwconv3x3(v; residual(mean_N x_in) + W_lepe) + b_lepe,   y = proj(out)

  with ``M`` InLine's d x d matrix (:mod:`.inline.attention`). The two 3x3 convs on the same v are one conv with
  the summed kernels. At 224 px this is the authors' block with ``CSWIN_LA_SPLIT_SIZE = 56-28-14-7`` (one branch
  over the whole map, ``idx=-1``); here it is global at every map size.
* :class:`CSwinStripeAttention` (``S``): CSWin's LePE cross-shaped window softmax attention. ``split_size`` an
  int: two branches on the two halves of the channels (heads ``[0, h/2)`` and ``[h/2, h)``), the first over
  vertical stripes ``split_size`` columns wide and as high as the map, the second over horizontal stripes;
  per stripe and head ``softmax(q k^T / sqrt(d)) v + lepe(v)``; the halves concatenated, then ``proj``.
  ``split_size=None``: one branch over the whole map (CSWin's last stage).

**Stripes of any map** (:func:`~..tokens.masks.stripe_plan`): a side that is no multiple of the stripe width is
padded symmetrically, the same stripe grid as CSWin's segmentation backbone (``F.pad`` with half on each side, then
a crop), with one change: CSWin's padded cells are zero q, k, v that take part in the softmax as keys (each adds
``exp(0)`` to the denominator), so a token's attention depends on how much padding its stripe got; here they are
masked out of the keys, so every stripe attends over its own tokens only (the LePE sees zeros there, as in CSWin).
At sizes where nothing is padded (224 px: 56, 28, 14 tokens for stripes 1, 2, 7) both are the authors' model.
Padding-aware maps (:attr:`~..tokens.token_map.TokenMap.aware`) pad each image's own ``h x w`` tokens to its own
stripes and mask everything else, so an image's result is the same in any padded batch.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelArgumentError, check_heads
from ..layers.fused_linear import linear
from ..tokens.masks import from_windows, to_windows
from .inline.attention import InLineAttention
from .inline.paths import choose


def lepe_conv(channels):
    """CSWin's LePE: a depthwise 3x3 conv with bias (``get_v`` in the authors' code)."""
    return nn.Conv2d(channels, channels, 3, padding=1, groups=channels)


def own_mean(x, mask):
    """(B, C) mean of the (B, N, C) tokens ``x`` over each image's own tokens (``mask`` (B, N, 1) bool; None: all),
    summed in fp32 at least and returned in ``x``'s dtype."""
    if mask is None:
        return x.mean(dim=1)
    acc = torch.promote_types(x.dtype, torch.float32)
    mask = mask.to(acc)
    return ((x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).to(x.dtype)


class CSwinInLineAttention(InLineAttention):
    """Global InLine attention with CSWin's LePE (the ``I`` blocks of InLine-CSwin; module docstring).

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h.
        qkv_bias (bool): Bias of ``qkv``. Defaults to True (the released models).
        proj_drop_rate (float): Dropout after ``proj`` (the authors' block defines it but does not apply it: keep 0
            to train as they did).
    """

    alternates_shift = False    # global: every block the same
    reads_block_input = True    # the residual's kernels come from the mean of the block's input

    def __init__(self, embed_dims, num_heads, qkv_bias=True, proj_drop_rate=0.):
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, proj_drop_rate=proj_drop_rate)
        self.lepe = nn.ModuleList([lepe_conv(embed_dims)])

    def forward(self, x, tokens, block_input=None):
        """x: (B, N, C) normalised tokens of the map ``tokens``; ``block_input``: the block's input (B, N, C), before
        ``norm1`` (None: ``x``, for the layer on its own). Returns (B, N, C). The ``'torch'`` implementation on every
        device (the GPU kernels of :mod:`.inline.gpu` know no LePE); ``q M`` folded into ``proj`` where
        :func:`~.inline.paths.choose` folds."""
        mask = tokens.token_mask()
        mean_token = own_mean(x if block_input is None else block_input, mask)
        return self.attend_torch(x, tokens.hw_shape, mask, choose(x, self).fold, mean_token=mean_token)

    def residual_kernels(self, x_mean):
        """InLine's predicted 3x3 kernels plus the LePE's (one conv on v for both)."""
        B, C = x_mean.shape
        kernels = self.residual(x_mean.unsqueeze(-1)).view(B, C, 9) + self.lepe[0].weight.view(1, C, 9)
        return kernels.view(B * C, 1, 3, 3)

    def _local_residual(self, x_mean, v, bias, hw_shape):
        """The residual and the LePE, with the LePE's bias."""
        return super()._local_residual(x_mean, v, bias + self.lepe[0].bias.to(bias.dtype), hw_shape)

    def extra_repr(self):
        return f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, lepe=True'


class CSwinStripeAttention(nn.Module):
    """CSWin's LePE cross-shaped window softmax attention (the ``S`` blocks of InLine-CSwin; module docstring).

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h (even when ``split_size`` is an int: half per branch).
        split_size (int, optional): Stripe width (1, 2, 7 in stages 1-3 of the released models); None: one branch
            over the whole map (stage 4).
        qkv_bias (bool): Bias of ``qkv``. Defaults to True.
        attn_drop_rate (float): Dropout on the attention weights.
        proj_drop_rate (float): Dropout after ``proj`` (unused by the authors: keep 0 to train as they did).
    """

    alternates_shift = False

    def __init__(self, embed_dims, num_heads, split_size=7, qkv_bias=True, attn_drop_rate=0., proj_drop_rate=0.):
        super().__init__()
        check_heads(embed_dims, num_heads)
        branches = 1 if split_size is None else 2
        if branches == 2 and (num_heads % 2 or isinstance(split_size, bool) or not isinstance(split_size, int)
                              or split_size < 1):
            raise ModelArgumentError(f'cross-shaped stripes take a positive int split_size and an even head count '
                                     f'(half per branch), got split_size={split_size!r}, num_heads={num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.split_size = split_size
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.lepe = nn.ModuleList([lepe_conv(embed_dims // branches) for _ in range(branches)])
        self.attn_drop_rate = attn_drop_rate
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)

    def forward(self, x, tokens):
        """x: (B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`). Returns (B, N, C)."""
        B, N, C = x.shape
        qkv = linear(x, self.qkv.weight, self.qkv.bias)                           # (B, N, 3C)
        if self.split_size is None:                                               # one window: the whole map
            mask = tokens.token_mask()
            if mask is not None:
                qkv = qkv * mask                                                  # the LePE sees zeros outside
            out = self._attend(qkv, tokens.hw_shape, mask, self.lepe[0], self.num_heads)
        else:
            halves = qkv.view(B, N, 3, 2, C // 2)
            out = torch.cat([self._stripes(halves[:, :, :, b].reshape(B, N, 3 * C // 2), tokens.stripe_plan(
                self.split_size, b), self.lepe[b]) for b in range(2)], dim=-1)
        return self.proj_drop(linear(out, self.proj.weight, self.proj.bias))

    def _stripes(self, qkv, plan, lepe):
        """One branch over the stripes of ``plan``: (B, N, 3c) -> (B, N, c)."""
        windows = to_windows(qkv, plan)                                           # (B * nW, L, 3c), zeros off-map
        out = self._attend(windows, plan.window_hw, plan.mask, lepe, self.num_heads // 2)
        return from_windows(out, plan, qkv.shape[0])

    def _attend(self, qkv, window_hw, mask, lepe, heads):
        """Softmax attention plus LePE in each window: (W, L, 3c) q, k, v of (wh, ww) windows -> (W, L, c);
        ``mask`` (W, L, 1) bool, False on cells that are no token of the image (not attended to)."""
        n, L, c3 = qkv.shape
        c = c3 // 3
        d = c // heads
        q, k, v = qkv.view(n, L, 3, heads, d).permute(2, 0, 3, 1, 4).unbind(0)    # (W, heads, L, d)
        bias = None
        if mask is not None:
            bias = torch.where(mask, 0., torch.finfo(q.dtype).min / 2).view(n, 1, 1, L).to(q.dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                             dropout_p=self.attn_drop_rate if self.training else 0.)
        lepe = lepe(v.transpose(2, 3).reshape(n, c, *window_hw))                  # channel head * d + j
        out = out + lepe.view(n, heads, d, L).transpose(2, 3)
        return out.transpose(1, 2).reshape(n, L, c)

    def extra_repr(self):
        return f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, split_size={self.split_size}'
