"""Windows for InLine blocks (the authors' windowed InLine), as index maps over the token map.

InLine attention runs on each window as on an image of its own: the means, ``k^T v`` and the mean token
that predicts the 3x3 kernels are per window, and the 3x3 residual sees zeros outside the window.
Tokens are gathered into windows and scattered back with one ``index_select`` each (no loop over
images or windows).

Partition with padding-aware mode off (the authors' rule, any H x W): windows of
``(min(ws, H), min(ws, W))``; a shifted block, when ``min(H, W) > ws``, rolls the map by ``-ws // 2`` on
both axes, and, as in the authors' code (their InLine layer ignores Swin's seam mask), the windows that
straddle the wrap-around seam are not split. The map is zero-padded bottom/right to a window multiple
and those zero tokens count in their window's means, as padded tokens do in Swin. With ``ws >= H, W``
this is global InLine.

Padding-aware (each image's own ``h x w`` tokens known): the shift is decided per image from its own
region (``ws // 2`` when ``min(h, w) > ws``), the image is placed at ``(shift, shift)`` of a canvas of
window multiples, and every canvas cell outside the image is masked. An image's windows then cover its
rows ``[-shift + k ws, -shift + (k + 1) ws)`` (likewise columns) clipped to the image: the seam windows
are split as Swin's mask splits them. This partition depends on nothing but the image's own size, so
the result is the same in any padded batch; at sizes where the authors' model rolls, it differs from
it (the authors' seam windows mix the image's bottom rows with its top rows, a grouping that would
depend on the padded size).
"""
from typing import NamedTuple, Optional, Tuple

import torch


class WindowPlan(NamedTuple):
    """How one stage's map is cut into InLine windows (see the module doc)."""
    gather: torch.Tensor           # (B * nW * L,) rows of the (B * (N + 1), C) tokens, row N of each image = 0
    scatter: torch.Tensor          # (B * N,) rows of the (B * nW * L + 1, C) window outputs, last row = 0
    window_hw: Tuple[int, int]
    mask: Optional[torch.Tensor]   # (B * nW, L, 1) 1 on the image's own tokens; None = all count


def _flat_positions(rows, cols, window_hw, canvas_w):
    """Index in window-major order (window, row in window, col in window) of canvas cells (rows, cols)."""
    wh, ww = window_hw
    window = (rows // wh) * (canvas_w // ww) + cols // ww
    return (window * wh + rows % wh) * ww + cols % ww


def window_plan(hw_shape, batch_size, window_size, shift, region_shapes=None, device=None):
    """The :class:`WindowPlan` of an H x W map for a (shifted) InLine block; ``region_shapes`` (B, 2)
    turns on the padding-aware partition."""
    H, W = hw_shape
    B, ws = batch_size, window_size
    if region_shapes is None:
        window_hw = (min(ws, H), min(ws, W))
        shifts = torch.full((B,), ws // 2 if shift and min(H, W) > ws else 0, device=device)
        heights = torch.full((B,), H, device=device)
        widths = torch.full((B,), W, device=device)
        canvas_h, canvas_w = H + (-H) % window_hw[0], W + (-W) % window_hw[1]
    else:
        heights, widths = region_shapes[:, 0], region_shapes[:, 1]
        shifts = torch.where(torch.minimum(heights, widths) > ws, ws // 2, 0) if shift else torch.zeros_like(heights)
        window_hw = (ws, ws) if bool(shifts.any()) else (min(ws, H), min(ws, W))
        extra = int(shifts.max())
        canvas_h, canvas_w = H + extra + (-(H + extra)) % window_hw[0], W + extra + (-(W + extra)) % window_hw[1]

    # Canvas cell (r, c) of image b holds its token (r - s_b, c - s_b); mode off wraps around (a roll).
    s = shifts[:, None]
    src_r = torch.arange(canvas_h, device=device) - s                            # (B, canvas_h)
    src_c = torch.arange(canvas_w, device=device) - s
    if region_shapes is None:
        src_r, src_c = src_r % canvas_h, src_c % canvas_w
    ok_r = (src_r >= 0) & (src_r < heights[:, None])
    ok_c = (src_c >= 0) & (src_c < widths[:, None])
    ok = ok_r[:, :, None] & ok_c[:, None, :]                                     # (B, canvas_h, canvas_w)
    src = torch.where(ok, src_r[:, :, None] * W + src_c[:, None, :], H * W)
    src = _partition_rect(src, window_hw)                                         # (B, nW, L)
    num_windows, L = src.shape[1], window_hw[0] * window_hw[1]
    offsets = torch.arange(B, device=device) * (H * W + 1)
    gather = (src.reshape(B, -1) + offsets[:, None]).reshape(-1)

    # Token (i, j) of image b sits at canvas cell (i + s_b, j + s_b) (mode off: modulo the canvas).
    rows = torch.arange(H, device=device) + s
    cols = torch.arange(W, device=device) + s
    if region_shapes is None:
        rows, cols = rows % canvas_h, cols % canvas_w
    pos = _flat_positions(rows[:, :, None], cols[:, None, :], window_hw, canvas_w)
    pos = pos + (torch.arange(B, device=device) * num_windows * L)[:, None, None]
    own = (torch.arange(H, device=device) < heights[:, None])[:, :, None] & \
        (torch.arange(W, device=device) < widths[:, None])[:, None, :]
    scatter = torch.where(own, pos, B * num_windows * L).reshape(-1)

    mask = None
    if region_shapes is not None:
        keep = src.reshape(B * num_windows, L, 1) != H * W
        mask = None if bool(keep.all()) else keep
    return WindowPlan(gather, scatter, window_hw, mask)


def _partition_rect(grid, window_hw):
    """(B, Hc, Wc) -> (B, nW, wh * ww) for a rectangular window, Swin's window order."""
    B, Hc, Wc = grid.shape
    wh, ww = window_hw
    grid = grid.view(B, Hc // wh, wh, Wc // ww, ww)
    return grid.permute(0, 1, 3, 2, 4).reshape(B, -1, wh * ww)


def to_windows(x, plan):
    """(B, N, C) tokens -> (B * nW, L, C) windows (cells outside the image hold zeros)."""
    B, N, C = x.shape
    x = torch.cat([x, x.new_zeros(B, 1, C)], dim=1).view(B * (N + 1), C)
    return x.index_select(0, plan.gather).view(-1, plan.window_hw[0] * plan.window_hw[1], C)


def from_windows(windows, plan, batch_size):
    """(B * nW, L, C) window outputs -> (B, N, C); tokens outside each image's region get zeros."""
    C = windows.shape[-1]
    flat = torch.cat([windows.reshape(-1, C), windows.new_zeros(1, C)])
    return flat.index_select(0, plan.scatter).view(batch_size, -1, C)
