"""FLatten's focused linear attention (Han et al., "FLatten Transformer: Vision Transformer using Focused Linear
Attention", ICCV 2023), the layout letter ``F`` of the Swin family: the comparison model for InLine.

For the tokens ``X`` (N x C) of one window (or, global, of one image's map), ``h`` heads of ``d = C / h`` channels
(channel ``head * d + j``), the learned per-channel ``scale`` (C,), the focusing power ``p`` (3) and the learned
positional encoding ``P`` (N x C, one row per cell of the window)::

    q, k, v = split(qkv(X));   k = k + P
    q' = (relu(q) + 1e-6) / softplus(scale),  k' likewise                     (per channel)
    f(t) = ||t|| t**p / ||t**p||       (per token, norms over all C channels: the direction sharpened, the norm kept)
    q, k = f(q'), f(k')
    out_i = q_i (k^T v / N) / (q_i . mean_j k_j + 1e-6)                         (per head; k^T v / N is the
                                                                                 released (k N^-1/2)^T (v N^-1/2))
          + dwconv_5x5(v)        (one depthwise 5x5 kernel of d channels with bias, shared by the h heads)
    y = proj(out)

No N x N tensor is formed. The depthwise conv runs on each window's (or the map's) v, zero-padded at its border.

Where it attends:

* **Windows** (the authors' FLatten-Swin): windows of ``window_size`` x ``window_size`` tokens, the positional
  encoding's size; a map side smaller than the window or no multiple of it is zero-padded bottom/right to whole
  windows, and those zero tokens count in their window, as padded tokens do in Swin's softmax windows (the windows
  keep their size, like softmax windows with their bias table). A shifted block (odd blocks of a stage) rolls the map
  by ``-window_size // 2`` where both sides exceed the window, and, as in the authors' blocks (their
  ``FocusedLinearAttention`` ignores the Swin seam mask it is handed), the windows that straddle the wrap-around seam
  are not split (:func:`~.masks.window_plan`, plain partition). At 224 px the released models' windows (56 and 28)
  are the whole maps of stages 1 and 2, where nothing rolls. Under export the shift is a tensor op on the map's sizes
  and the padding and roll are index arithmetic on its symbolic sides (the plan's graph form), so one exported graph
  rolls and pads as eager does at every size its dynamic shapes allow.
* **Global** (``global_attention=True``): the whole map of each image, with ``P`` resized from its
  ``window_size`` x ``window_size`` grid to the map bicubically (``align_corners=False``): the interpolation the
  authors' own loader applies to this table when it fine-tunes FLatten-Swin-B from 224 to 384 px (``utils.py``,
  ``load_pretrained``), and timm's for absolute position embeddings; at the window's size it is the table itself.

Padding-aware (each image's own region known): ``N`` becomes each window's (or image's) own token count ``n``; ``k``
and ``v`` are zeroed outside, so ``k^T v / n``, ``mean(k)`` and the 5x5 conv are those of the image alone. Windows
are the image's own (:func:`~.masks.window_plan`, padding-aware partition); globally, ``P`` is resized to each image's
own region and placed at its top-left corner. The sums accumulate in (at least) fp32 outside autocast.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelArgumentError, check_heads
from ..tokens.graph_mode import may_branch_on_size, regions_in_graph
from ..tokens.masks import from_windows, to_windows

EPS = 1e-6              # added after the ReLU and to the normaliser, as released
PE_RESIZE = 'bicubic'   # global mode: the positional encoding's interpolation to the map (see the module doc)


def resize_positional_encoding(table, side, hw_shape):
    """The (1, side*side, C) positional encoding resized to an H x W map: (1, H*W, C), row-major; bicubic,
    ``align_corners=False``; the table itself at ``side x side`` (captured graphs, which serve every size, resize
    always: at the table's own size the bicubic weights are 0, 1, 0, 0)."""
    H, W = hw_shape
    if may_branch_on_size() and (H, W) == (side, side):
        return table
    grid = table.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(H, W), mode=PE_RESIZE, align_corners=False)
    return grid.flatten(2).transpose(1, 2)


class FocusedLinearAttention(nn.Module):
    """FLatten's focused linear attention, in (shifted) windows or global.

    Args:
        embed_dims (int): Channels C.
        num_heads (int): Heads h; C must be divisible by h.
        window_size (int): Side of the windows and of the positional encoding's grid (``window_size ** 2`` rows).
            Defaults to 56 (the released models' first stage at 224 px).
        qkv_bias (bool): Bias of ``qkv``. Defaults to True.
        focusing_factor (int | float): The focusing power p. Defaults to 3 (released).
        kernel_size (int): Side of the depthwise conv on v. Defaults to 5 (released).
        proj_drop_rate (float): Dropout after ``proj``.
        global_attention (bool): Attend over each image's whole map, the positional encoding resized to it
            (bicubic). Defaults to False (the authors' windows).
        shift (bool): Take the shifted windows (odd blocks of a stage; windowed only).
    """

    alternates_shift = True   # windowed: odd blocks of a stage take the shifted windows

    def __init__(self, embed_dims, num_heads, window_size=56, qkv_bias=True, focusing_factor=3, kernel_size=5,
                 proj_drop_rate=0., global_attention=False, shift=False):
        super().__init__()
        check_heads(embed_dims, num_heads)
        for name, value in (('window_size', window_size), ('kernel_size', kernel_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelArgumentError(f'{name} of focused linear attention must be a positive int, got {value!r}')
        if kernel_size % 2 == 0:
            raise ModelArgumentError(f'kernel_size of focused linear attention must be odd, got {kernel_size}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.window_size = window_size
        self.focusing_factor = focusing_factor
        self.global_attention = bool(global_attention)
        self.shift = shift
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop_rate)
        d = self.head_dims
        self.dwc = nn.Conv2d(d, d, kernel_size, padding=kernel_size // 2, groups=d)
        self.scale = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.positional_encoding = nn.Parameter(torch.zeros(1, window_size * window_size, embed_dims))

    def forward(self, x, tokens):
        """x: (B, N, C) tokens of the map ``tokens`` (:class:`~.token_map.TokenMap`). Returns (B, N, C)."""
        if self.global_attention:
            return self.attend(x, tokens.hw_shape, self._global_encoding(tokens), tokens.token_mask())
        plan = tokens.window_plan(self.window_size, self.shift, clip=False)
        out = self.attend(to_windows(x, plan), plan.window_hw, self.positional_encoding, plan.mask)
        return from_windows(out, plan, x.shape[0])

    def _global_encoding(self, tokens):
        """The positional encoding of a global block: resized to the map, or (padding-aware) to each image's own
        region, placed at its top-left corner and zero elsewhere: (1 or B, N, C)."""
        ws, table = self.window_size, self.positional_encoding
        if tokens.token_mask() is None:
            return resize_positional_encoding(table, ws, tokens.hw_shape)
        if regions_in_graph():
            raise NotImplementedError(
                'global focused linear attention resizes its positional encoding to each image\'s own region in '
                'padding-aware mode, a shape that depends on the regions: it cannot be exported or compiled with '
                'the regions as a graph input; use windowed FLatten blocks or export without padding_aware')
        H, W = tokens.hw_shape
        out = table.new_zeros(tokens.batch_size, H, W, table.shape[-1])
        regions = [tuple(r) for r in tokens.regions.tolist()]
        for h, w in set(regions):
            own = [b for b, r in enumerate(regions) if r == (h, w)]
            out[own, :h, :w] = resize_positional_encoding(table, ws, (h, w)).view(1, h, w, -1)
        return out.view(tokens.batch_size, H * W, -1)

    def focus(self, t):
        """``f((relu(t) + 1e-6) / softplus(scale))``, ``f(t) = ||t|| t**p / ||t**p||`` per token (last dim: C)."""
        t = (F.relu(t) + EPS) / F.softplus(self.scale.to(t.dtype))
        powered = t ** self.focusing_factor
        return powered * (t.norm(dim=-1, keepdim=True) / powered.norm(dim=-1, keepdim=True))

    def attend(self, x, hw_shape, encoding, mask=None):
        """The layer on a batch of (B', N, C) windows (or maps) of ``hw_shape``; ``encoding`` (1 or B', N, C) is added
        to k; ``mask`` (B', N, 1), true on each image's own tokens, makes it padding-aware."""
        B, N, C = x.shape
        h, d = self.num_heads, self.head_dims
        q, k, v = self.qkv(x).view(B, N, 3, C).unbind(2)
        acc = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(x.device.type, enabled=False):
            q, k, v = q.to(acc), (k + encoding.to(k.dtype)).to(acc), v.to(acc)
            q, k = self.focus(q), self.focus(k)
            n = N
            if mask is not None:
                mask = mask.to(acc)
                n = mask.sum(dim=1, keepdim=True).clamp_(min=1)                     # (B', 1, 1)
                k, v = k * mask, v * mask
                n = n.unsqueeze(1)                                                  # (B', 1, 1, 1)
            q, k, v = (t.view(B, N, h, d).transpose(1, 2) for t in (q, k, v))       # (B', h, N, d)
            kv = torch.matmul(k.transpose(-1, -2), v) / n                           # (B', h, d, d)
            norm = torch.matmul(q, (k.sum(dim=2, keepdim=True) / n).transpose(-1, -2)) + EPS   # (B', h, N, 1)
            out = torch.matmul(q, kv) / norm
            Hw, Ww = hw_shape
            maps = v.reshape(B * h, Hw, Ww, d).permute(0, 3, 1, 2)                  # (B' h, d, H, W)
            conv = F.conv2d(maps, self.dwc.weight.to(acc), self.dwc.bias.to(acc), padding=self.dwc.padding,
                            groups=d)
            out = out + conv.view(B, h, d, N).transpose(-1, -2)
        out = out.transpose(1, 2).reshape(B, N, C).to(x.dtype)
        return self.proj_drop(self.proj(out))

    def extra_repr(self):
        return (f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, window_size={self.window_size}'
                + (', global_attention=True' if self.global_attention else f', shift={self.shift}'))
