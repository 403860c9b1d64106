"""The window partition (``tokens/masks.window_plan``) against a naive definition of Swin's windows, and the token map
that builds and caches it (``tokens/token_map.TokenMap``).

Plain maps (Swin): pad bottom/right to a window multiple, roll by ``-s`` (``s = ws // 2`` on shifted blocks of a
map larger than the window, else 0), cut ``ws x ws`` windows; token (i, j) sits at cell
``((i - s) mod Hp, (j - s) mod Wp)``. Padding-aware maps: each image b is placed at offset
``o_b = (ws - s_b) mod ws`` on a canvas (``s_b`` from its own region), so token (i, j) of its region sits at cell
``(i + o_b, j + o_b)`` and every other cell is masked. Checked for each token: which tokens share its window and
where in the window it sits (what the relative position bias reads); for each window cell: masked exactly when it
holds no token of the image. The export/compile form (``regions_in_graph``: a canvas of the largest size for any
regions) must give the same windows.
"""
import pytest
import torch

from inline_backbones.models.tokens import masks
from inline_backbones.models.tokens.masks import from_windows, to_windows, window_plan
from inline_backbones.models.tokens.token_map import TokenMap


def naive_cells(H, W, ws, shift, regions, clip):
    """token (b, i, j) -> (window key, row and column inside the window), by the definition above."""
    cells = {}
    for b, (h, w) in enumerate(regions if regions is not None else [(H, W)]):
        s = ws // 2 if shift and min(h, w) > ws else 0
        if regions is None:
            wh, ww = (ws, ws) if s or not clip else (min(ws, H), min(ws, W))
            Hp, Wp = H + (-H) % wh, W + (-W) % ww
            place = [((i - s) % Hp, (j - s) % Wp) for i in range(H) for j in range(W)]
        else:
            wh = ww = ws
            o = (ws - s) % ws
            place = [(i + o, j + o) for i in range(h) for j in range(w)]
        tokens = [(i, j) for i in range(h) for j in range(w)]
        for (i, j), (r, c) in zip(tokens, place, strict=True):
            cells[(b, i, j)] = ((b, r // wh, c // ww), (r % wh, c % ww))
    return cells


def planned_cells(H, W, B, plan):
    """The same map read off the plan: token ids through ``to_windows``."""
    ids = torch.arange(1, B * H * W + 1, dtype=torch.float64).view(B, H * W, 1)
    windows = to_windows(ids, plan)                                          # (B * nW, L, 1)
    wh, ww = plan.window_hw
    cells = {}
    for k, window in enumerate(windows[..., 0].tolist()):
        for cell, value in enumerate(window):
            if value:
                b, n = divmod(int(value) - 1, H * W)
                cells[(b, n // W, n % W)] = (k, (cell // ww, cell % ww))
        if plan.mask is not None:
            assert plan.mask[k, :, 0].tolist() == [bool(v) for v in window]    # masked exactly where no token
    return cells, windows


def same_partition(naive, planned):
    """Equal window membership (up to the windows' numbering) and equal places inside the windows."""
    assert set(naive) == set(planned)
    assert all(naive[t][1] == planned[t][1] for t in naive), 'a token sits at another place in its window'
    def groups(cells):
        return {frozenset(t for t in cells if cells[t][0] == key) for key in {v[0] for v in cells.values()}}
    assert groups(naive) == groups(planned)


@pytest.mark.parametrize('H, W', [(14, 14), (9, 16), (7, 7), (5, 12)])
@pytest.mark.parametrize('shift', [False, True])
@pytest.mark.parametrize('clip', [True, False])
def test_plain_windows_are_swins(H, W, shift, clip):
    plan = window_plan((H, W), 1, 7, shift, clip=clip)
    cells, windows = planned_cells(H, W, 1, plan)
    same_partition(naive_cells(H, W, 7, shift, None, clip), cells)
    assert plan.mask is None
    x = torch.randn(1, H * W, 3)
    assert torch.equal(from_windows(to_windows(x, plan), plan, 1), x)         # every token back in its place


@pytest.mark.parametrize('static', [False, True], ids=['eager', 'regions-in-graph'])
@pytest.mark.parametrize('shift', [False, True])
@pytest.mark.parametrize('hw, regions', [
    ((14, 14), [(14, 14), (14, 14)]), ((14, 14), [(14, 14), (9, 12)]), ((14, 14), [(5, 14), (14, 3)]),
    ((14, 14), [(8, 8), (8, 8)]), ((11, 11), [(11, 11), (8, 9)]), ((12, 17), [(12, 17), (10, 2)]),
])
def test_padding_aware_windows_place_each_image_on_its_own(monkeypatch, hw, regions, shift, static):
    H, W = hw
    monkeypatch.setattr(masks, 'regions_in_graph', lambda: static)
    plan = window_plan((H, W), 2, 7, shift, region_shapes=torch.tensor(regions))
    cells, windows = planned_cells(H, W, 2, plan)
    same_partition(naive_cells(H, W, 7, shift, regions, True), cells)
    assert plan.window_hw == (7, 7)
    fills = all(r == (H, W) for r in regions) and not shift     # no offset, a window multiple: every cell a token
    assert (plan.mask is None) == (fills and not static)
    x = torch.randn(2, H * W, 3)
    inside = masks.region_mask(torch.tensor(regions), (H, W))
    assert torch.equal(from_windows(to_windows(x, plan), plan, 2), x * inside)  # outside each region: zeros


def test_a_token_map_builds_its_masks_on_its_device_once():
    """On the meta device (where a GPU run would put them on the GPU): every mask and index map the map builds
    is on the tokens' device, each built once and cached under its own key."""
    x = torch.empty(2, 12 * 9, 8, device='meta')
    tokens = TokenMap.of(x, (12, 9), regions=torch.tensor([[12, 9], [7, 5]]))
    assert tokens.device == x.device and tokens.batch_size == 2
    plan = tokens.window_plan(7, True)
    built = [tokens.token_mask(), tokens.seam_mask(7), plan.gather, plan.scatter, plan.mask]
    assert all(t.device.type == 'meta' for t in built)
    assert tokens.window_plan(7, True) is plan and tokens.seam_mask(7) is built[1] and tokens.token_mask() is built[0]
    assert tokens.window_plan(7, False) is not plan and tokens.window_plan(7, True, clip=False) is not plan
    assert tokens.downsampled((6, 5), 2).device == x.device


def test_downsampled_regions_are_ceiled_and_clamped_per_side():
    tokens = TokenMap((9, 4), 2, 'cpu', torch.tensor([[9, 4], [3, 1]]))
    assert tokens.downsampled((5, 2), 2).regions.tolist() == [[5, 2], [2, 1]]
    assert tokens.downsampled((4, 2), 2).regions.tolist() == [[4, 2], [2, 1]]     # at most the new map
    assert TokenMap((9, 4), 2, 'cpu').downsampled((5, 2), 2).regions is None
