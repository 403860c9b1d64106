"""Every mask of the package, computed here only: which tokens are an image's own (padding-aware
mode), Swin's shift rule and seam mask, and window partitions as index maps over the token map (the
authors' windowed InLine, and the padding-aware partition of both InLine and softmax windows).
:class:`~.token_map.TokenMap` builds them once per stage and the mixers read them from it.

**Token masks.** In a zero-padded batch image ``b`` owns the top-left ``h_b x w_b`` tokens of the
``H x W`` map: :func:`region_mask` is 1 there and 0 elsewhere.

**Shift rule** (:func:`shift_sizes`, Swin's and the authors' rule for small maps): a shifted block
shifts its windows by ``ws // 2`` only where both sides of the map exceed the window, ``min(h, w) > ws``;
otherwise it does not shift. Eagerly the rule is a Python choice; in an exported graph it is a tensor op
on the map's sizes (:meth:`~.token_map.TokenMap.shift_size`), so that one graph shifts exactly where the
rule does for every size its dynamic shapes allow.

**Seam mask** (:func:`seam_mask`): for Swin's roll by ``-s``, 0 between tokens of the same region of the
rolled map and -100 across a wrap-around seam, so no window attends across it. With ``s = 0`` it is 0
everywhere (the graph form of an unshifted block).

Tokens are gathered into windows and scattered back with one ``index_select`` each (no loop over
images or windows); the attention layer then sees a batch of windows.

**Plain partition** (padding-aware mode off; InLine's and FLatten's windows use it, softmax blocks keep
:class:`WindowAttention`'s own roll and seam mask). The authors' rule for any H x W: windows of
``(wh, ww) = (min(ws, H), min(ws, W))`` (InLine; FLatten keeps ``ws x ws``: ``clip=False``); a shifted block, when
``min(H, W) > ws``, rolls the map by ``-s``, ``s = ws // 2``, on both axes, and, as in the authors' code (their
InLine and FLatten layers ignore Swin's seam mask), the windows that straddle the wrap-around seam are not split.
The map is zero-padded bottom/right to the canvas ``Hc x Wc = (H + (-H) mod wh) x (W + (-W) mod ww)`` and those zero
tokens count in their window, as padded tokens do in Swin: canvas cell ``(r, c)`` holds token
``((r + s) mod Hc, (c + s) mod Wc)`` where that lies in the map, and token ``(i, j)`` lies at cell
``((i - s) mod Hc, (j - s) mod Wc)``. With ``ws >= H, W`` this is global InLine. Under export ``s`` is a 0-d tensor
computed in the graph from the map's sizes (:func:`graph_shift`) and a symbolic canvas side enters ``mod`` as a 0-d
tensor (:func:`_modulo`), so that one exported graph partitions every size its dynamic shapes allow as eager does.

**Padding-aware partition** (each image's own ``h x w`` tokens known): the shift is decided per image
from its own region (``s = ws // 2`` when ``min(h, w) > ws``), and the windows cover the image's rows
``[s + (k - 1) ws, s + k ws)`` (likewise columns) clipped to the image: the partition a roll by ``-s``
plus Swin's seam mask gives, with the seam windows split exactly. Every window cell outside the image
is masked (``mask``). The partition depends on nothing but the image's own size, so an image's result is
the same in any padded batch. Where the authors' model rolls, padding-aware InLine windows therefore
differ from it: the authors' seam windows mix the image's bottom rows with its top rows, a grouping that
would depend on the padded size.
"""
from typing import NamedTuple

import torch

from .graph_mode import exporting, exporting_or_tracing, regions_in_graph

SEAM_VALUE = -100.0


def to_device(t, device):
    """The host tensor ``t`` (region sizes, index offsets: a few bytes) on ``device`` without waiting for the
    device. A copy from pageable host memory blocks the host until the stream has run all the work queued
    before it, which serialises the host's enqueueing with the GPU's work (measured on an H200: padding-aware
    InLine-Swin-T at batch 8 took 1.56x the plain forward); a copy from pinned memory is asynchronous.
    Plain ``.to`` on other devices and while a graph is captured."""
    device = torch.device(device if device is not None else t.device)
    if device.type != 'cuda' or t.device.type != 'cpu' or exporting_or_tracing():
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def region_mask(shapes, hw_shape, device=None):
    """(B, H*W, 1) bool on ``device``: True on each image's ``shapes`` rows x cols of the H x W map."""
    H, W = hw_shape
    shapes = to_device(shapes, device)
    rows = torch.arange(H, device=device) < shapes[:, :1]                        # (B, H)
    cols = torch.arange(W, device=device) < shapes[:, 1:]                        # (B, W)
    return (rows[:, :, None] & cols[:, None, :]).reshape(-1, H * W, 1)


def fills_map(shapes, hw_shape):
    """True when every image covers the whole H x W map (nothing to mask); False under export and compile, where
    the regions are a graph input (the masks are then always applied)."""
    if regions_in_graph():
        return False
    return bool((shapes[:, 0] >= hw_shape[0]).all() and (shapes[:, 1] >= hw_shape[1]).all())


def shift_sizes(heights, widths, window_size):
    """The shift rule: ``ws // 2`` where ``min(h, w) > ws``, else 0; per image ((B,) int tensors), for one map
    in a graph (0-d int tensors: a tensor op, no guard on the sizes) or for one map eagerly (ints)."""
    if isinstance(heights, torch.Tensor):
        return torch.where(torch.minimum(heights, widths) > window_size, window_size // 2, 0)
    return window_size // 2 if min(heights, widths) > window_size else 0


def graph_shift(hw_shape, window_size, device=None):
    """The shift rule of an H x W map as a 0-d long tensor computed from the map's sizes (``ws // 2`` where
    ``min(H, W) > ws``, else 0): the form of an exported graph, where ``H`` and ``W`` may be symbolic and a Python
    choice on them would keep the example's side of the rule."""
    H, W = (torch.scalar_tensor(s, dtype=torch.long, device=device) for s in hw_shape)
    return shift_sizes(H, W, window_size)


def _modulo(index, size):
    """``index mod size`` of an int tensor; a symbolic ``size`` (a graph's map side) enters as a 0-d tensor, since
    the ONNX exporter takes no symbolic scalar in ``remainder``."""
    if isinstance(size, torch.SymInt):
        size = torch.scalar_tensor(size, dtype=torch.long, device=index.device)
    return index.remainder(size)


def seam_mask(hw_padded, window_size, shift_size, device=None):
    """(nW, ws*ws, ws*ws) additive mask (0 or -100) of the windows of an Hp x Wp map rolled by ``-s``.

    Swin's nine regions of the rolled map: rows ``[0, Hp - ws)``, ``[Hp - ws, Hp - s)``, ``[Hp - s, Hp)``
    (region index ``[r >= Hp - ws] + [r >= Hp - s]``), likewise columns; two tokens of a window get 0 when they
    lie in the same region and -100 otherwise. ``s``: an int, or a 0-d int tensor (the shift decided in a
    graph). With ``s = 0`` the mask is 0: the last row and column of windows are then one region each."""
    Hp, Wp = hw_padded
    ws, s = window_size, shift_size
    r, c = torch.arange(Hp, device=device), torch.arange(Wp, device=device)
    row_region = (r >= Hp - ws).long() + (r >= Hp - s).long()
    col_region = (c >= Wp - ws).long() + (c >= Wp - s).long()
    img = (row_region[:, None] * 3 + col_region[None, :]).float()
    ids = _partition(img[None], (ws, ws))[0]                                  # (nW, ws*ws)
    return (ids[:, None, :] - ids[:, :, None]).ne(0).float() * SEAM_VALUE


class WindowPlan(NamedTuple):
    """How a map is cut into windows (see the module doc)."""
    gather: torch.Tensor           # (B * nW * L,) rows of the (B * (N + 1), C) tokens; row N of each image = 0
    scatter: torch.Tensor          # (B * N,) rows of the (B * nW * L + 1, C) window outputs; last row = 0
    window_hw: tuple[int, int]
    mask: torch.Tensor | None   # (B * nW, L, 1) bool, True on the image's own tokens; None = all count


def window_plan(hw_shape, batch_size, window_size, shift, region_shapes=None, clip=True, device=None):
    """The :class:`WindowPlan` of an H x W map for a (shifted) block. ``region_shapes`` (B, 2) turns on
    the padding-aware partition; ``clip`` lets windows shrink to a map side smaller than the window
    (InLine; softmax windows keep ``ws x ws`` for their relative position bias, FLatten's for its positional
    encoding)."""
    if region_shapes is None:
        return _plain_plan(hw_shape, batch_size, window_size, shift, clip, device)
    H, W = hw_shape
    B, ws = batch_size, window_size
    # What decides the partition's size is computed on the host (the shapes are small host tensors), so
    # building a plan never waits for the device; the index maps are built on ``device``. Under export the
    # regions are a graph input: the canvas takes its largest size for any regions (the extra windows hold
    # masked cells only) and every plan has a mask, so the graph's shapes do not depend on the regions.
    static = regions_in_graph()
    region_shapes = region_shapes.to('cpu' if not static else device)
    heights, widths = region_shapes[:, 0], region_shapes[:, 1]
    shifts = shift_sizes(heights, widths, ws) if shift else torch.zeros_like(heights)
    rolls = shift if static else bool(shifts.any())
    window_hw = (min(ws, H), min(ws, W)) if clip and not rolls else (ws, ws)
    # Canvas cell (r, c) of image b holds its token (r - o_b, c - o_b): the image placed at offset
    # o = (ws - s) % ws, the rest masked.
    offsets = (ws - shifts) % ws
    if static:
        extra = (ws - ws // 2) % ws if shift else 0
    else:
        extra = int(offsets.max())
    canvas_h = H + extra + (-(H + extra)) % window_hw[0]
    canvas_w = W + extra + (-(W + extra)) % window_hw[1]
    # Every cell of every window holds an own token: nothing to mask.
    fills = not static and bool(((offsets == 0) & (heights == canvas_h) & (widths == canvas_w)).all())
    heights, widths, offsets = (to_device(t, device) for t in (heights, widths, offsets))
    o = offsets[:, None]
    src_r = torch.arange(canvas_h, device=device) - o                               # (B, canvas_h)
    src_c = torch.arange(canvas_w, device=device) - o
    ok = ((src_r >= 0) & (src_r < heights[:, None]))[:, :, None] & \
        ((src_c >= 0) & (src_c < widths[:, None]))[:, None, :]                      # (B, canvas_h, canvas_w)
    src = _partition(torch.where(ok, src_r[:, :, None] * W + src_c[:, None, :], H * W), window_hw)
    own = (torch.arange(H, device=device) < heights[:, None])[:, :, None] & \
        (torch.arange(W, device=device) < widths[:, None])[:, None, :]
    # Token (i, j) of image b sits at canvas cell (i + o_b, j + o_b).
    rows, cols = torch.arange(H, device=device) + o, torch.arange(W, device=device) + o
    gather, scatter = _index_maps(src, rows, cols, own, hw_shape, window_hw, canvas_w, B)
    mask = None if fills else src.reshape(-1, src.shape[2], 1) != H * W
    return WindowPlan(gather, scatter, window_hw, mask)


def _plain_plan(hw_shape, batch_size, window_size, shift, clip, device):
    """The plain partition (module doc), one for every image of the batch: canvas cell ``(r, c)`` holds token
    ``((r + s) mod Hc, (c + s) mod Wc)`` (none where that lies outside the H x W map), token ``(i, j)`` lies at
    cell ``((i - s) mod Hc, (j - s) mod Wc)``. Built on ``device`` from sizes alone (no host copy, so a CUDA graph
    can capture it); ``s`` is an int, or under export a 0-d tensor decided in the graph."""
    H, W = hw_shape
    ws = window_size
    # Where the map rolls both its sides exceed ws, so clipped windows are ws x ws there too.
    window_hw = (min(ws, H), min(ws, W)) if clip else (ws, ws)
    s = (graph_shift(hw_shape, ws, device) if exporting() else shift_sizes(H, W, ws)) if shift else 0
    # Whole windows, by a floor division of non-negative sizes: the ONNX exporter turns a symbolic ``//`` into an
    # integer division that truncates (the file computed ``-(-H // wh) * wh`` as 60 for H = 64, wh = 20, not 80).
    canvas_h, canvas_w = ((n + w - 1) // w * w for n, w in zip(hw_shape, window_hw, strict=True))
    src_r = _modulo(torch.arange(canvas_h, device=device) + s, canvas_h)           # (canvas_h,)
    src_c = _modulo(torch.arange(canvas_w, device=device) + s, canvas_w)
    ok = (src_r < H)[:, None] & (src_c < W)[None, :]                                # (canvas_h, canvas_w)
    src = _partition(torch.where(ok, src_r[:, None] * W + src_c[None, :], H * W)[None], window_hw)
    rows = _modulo(torch.arange(H, device=device) - s, canvas_h)[None]               # (1, H)
    cols = _modulo(torch.arange(W, device=device) - s, canvas_w)[None]
    gather, scatter = _index_maps(src, rows, cols, None, hw_shape, window_hw, canvas_w, batch_size)
    return WindowPlan(gather, scatter, window_hw, None)


def _index_maps(src, rows, cols, own, hw_shape, window_hw, canvas_w, batch_size):
    """A plan's ``gather`` and ``scatter`` for a batch of B images of an H x W map, from ``src`` (b, nW, L), the
    token (``i W + j``; ``H W``: none) in each cell of each window, and ``rows`` (b, H), ``cols`` (b, W), the canvas
    row of each token row and column (``b``: B, or 1 for a partition the batch shares). The window of canvas cell
    ``(r, c)`` is ``(r // wh) (Wc // ww) + c // ww``, its place there ``(r mod wh) ww + c mod ww``. ``own`` (B, H, W)
    bool: the tokens of each image (None: all), the others scatter the zero row."""
    H, W = hw_shape
    B, device = batch_size, src.device
    num_windows, L = src.shape[1], src.shape[2]
    gather = (src + (torch.arange(B, device=device) * (H * W + 1))[:, None, None]).reshape(-1)
    wh, ww = window_hw
    window = (rows // wh)[:, :, None] * (canvas_w // ww) + (cols // ww)[:, None, :]
    pos = (window * wh + (rows % wh)[:, :, None]) * ww + (cols % ww)[:, None, :]
    pos = pos + (torch.arange(B, device=device) * num_windows * L)[:, None, None]
    scatter = pos if own is None else torch.where(own, pos, B * num_windows * L)
    return gather, scatter.reshape(-1)


def _partition(grid, window_hw):
    """(B, Hc, Wc) -> (B, nW, wh * ww), Swin's window order (row-major windows, row-major inside)."""
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


def stripe_plan(hw_shape, batch_size, split_size, axis, region_shapes=None, device=None):
    """The :class:`WindowPlan` of CSWin's cross-shaped stripes of an H x W map (``axis`` 0: vertical stripes,
    ``split_size`` columns wide and as high as the map, CSWin's branch ``idx=0``; ``axis`` 1: horizontal stripes,
    ``split_size`` rows high and as wide as the map, ``idx=1``).

    A side ``n`` that is no multiple of ``sp = split_size`` is padded symmetrically, as CSWin's own segmentation
    backbone pads it: ``p = (-n) % sp`` cells, ``p // 2`` before the first token and the rest after the last, so
    stripe ``k`` holds the tokens ``[k sp - p // 2, (k + 1) sp - p // 2)`` of that side. The canvas is
    ``(H, ceil(W / sp) sp)`` (or ``(ceil(H / sp) sp, W)``), its windows the stripes, in row-major order.

    Every cell that holds no token of the image (the padding to whole stripes; in padding-aware mode,
    ``region_shapes`` (B, 2) given, also everything outside the image's own ``h x w`` tokens, whose padding is
    decided from ``h`` and ``w`` alone) gathers zeros and is marked False in ``mask``; ``mask`` is None when every
    cell is a token. The partition of an image depends on nothing but its own size, so its stripes are the same in
    any padded batch."""
    H, W = hw_shape
    B, sp = batch_size, split_size
    static = region_shapes is not None and regions_in_graph()
    canvas_h, canvas_w = (H, W + (-W) % sp) if axis == 0 else (H + (-H) % sp, W)
    window_hw = (canvas_h, sp) if axis == 0 else (sp, canvas_w)
    if region_shapes is None:
        # One size for the batch: the offset and whether anything is padded are sizes, never tensor values, so a
        # graph (export, compile, trace) stays free of data-dependent branches; it always takes the mask.
        pad = (-W) % sp if axis == 0 else (-H) % sp
        fills = not exporting_or_tracing() and pad == 0
        heights, widths = (torch.full((B,), n, device=device) for n in (H, W))
        offset = torch.full((B,), pad // 2, device=device)
    else:
        region_shapes = region_shapes.to('cpu' if not static else device)
        heights, widths = region_shapes[:, 0], region_shapes[:, 1]
        side = widths if axis == 0 else heights
        offset = ((-side) % sp) // 2                                              # (B,) cells before the first token
        fills = not static and bool(((offset == 0) & (heights == canvas_h) & (widths == canvas_w)).all())
    zeros = torch.zeros_like(offset)
    row_off, col_off = (zeros, offset) if axis == 0 else (offset, zeros)
    heights, widths, row_off, col_off = (to_device(t, device) for t in (heights, widths, row_off, col_off))
    src_r = torch.arange(canvas_h, device=device) - row_off[:, None]                # (B, canvas_h)
    src_c = torch.arange(canvas_w, device=device) - col_off[:, None]
    ok = ((src_r >= 0) & (src_r < heights[:, None]))[:, :, None] & \
        ((src_c >= 0) & (src_c < widths[:, None]))[:, None, :]                      # (B, canvas_h, canvas_w)
    src = _partition(torch.where(ok, src_r[:, :, None] * W + src_c[:, None, :], H * W), window_hw)
    num_windows, L = src.shape[1], window_hw[0] * window_hw[1]
    gather = (src + (torch.arange(B, device=device) * (H * W + 1))[:, None, None]).reshape(-1)

    # Token (i, j) of image b sits at canvas cell (r, c) = (i + row_off_b, j + col_off_b): in the row-major stripes,
    # position ((c // sp) canvas_h + r) sp + c % sp (vertical) or r canvas_w + c (horizontal). Only ``sp``, an int,
    # divides: a graph's symbolic side as a divisor is an op on a symbolic scalar, which ONNX cannot take.
    rows = torch.arange(H, device=device) + row_off[:, None]                        # (B, H)
    cols = torch.arange(W, device=device) + col_off[:, None]                        # (B, W)
    if axis == 0:
        pos = ((cols // sp)[:, None, :] * canvas_h + rows[:, :, None]) * sp + (cols % sp)[:, None, :]
    else:
        pos = rows[:, :, None] * canvas_w + cols[:, None, :]
    pos = pos + (torch.arange(B, device=device) * num_windows * L)[:, None, None]
    own = (torch.arange(H, device=device) < heights[:, None])[:, :, None] & \
        (torch.arange(W, device=device) < widths[:, None])[:, None, :]
    scatter = torch.where(own, pos, B * num_windows * L).reshape(-1)
    mask = None if fills else src.reshape(B * num_windows, L, 1) != H * W
    return WindowPlan(gather, scatter, window_hw, mask)
