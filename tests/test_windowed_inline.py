"""Windowed InLine (``inline_window_size``): global when the window covers the map, the authors'
roll-and-partition otherwise, and per-image clipped windows in padding-aware mode."""
import pytest
import torch
import torch.nn.functional as F
from conftest import naive_inline_attention
from padding_cases import small_backbone

from inline_backbones.models.mixers.inline.attention import InLineAttention
from inline_backbones.models.tokens.token_map import TokenMap


def windowed(attn, x, hw_shape, window_size, shift, region_shapes=None):
    """``attn`` (global) on the windows of the map, through the windowed layer with the same weights."""
    layer = InLineAttention(attn.embed_dims, attn.num_heads, kernel_func=attn.kernel_func, window_size=window_size,
                            shift=shift)
    layer.load_state_dict(attn.state_dict())
    return layer.eval()(x, TokenMap.of(x, hw_shape, region_shapes))


@pytest.mark.parametrize('padding_aware', [False, True])
def test_a_window_covering_the_map_is_global_inline(padding_aware):
    x = torch.randn(2, 3, 96, 160)                        # stage maps 24x40, 12x20, 6x10, 3x5
    with torch.no_grad():
        ref = small_backbone('tiny', padding_aware=padding_aware)(x)
        out = small_backbone('tiny', padding_aware=padding_aware, inline_window_size=40)(x)
    for a, b in zip(out, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_smaller_window_is_not_global():
    """The comparison above can fail: windows of 8 change the features."""
    x = torch.randn(1, 3, 96, 160)
    with torch.no_grad():
        ref = small_backbone('tiny')(x)
        out = small_backbone('tiny', inline_window_size=8)(x)
    assert (out[0] - ref[0]).norm() / ref[0].norm() > 1e-2


def authors_windows(attn, x, hw_shape, ws, shift):
    """Written out as the authors' block does it: zero-pad to a window multiple, roll by -ws // 2 when
    shifted, InLine on every window as an image of its own (no seam mask), roll back, crop."""
    B, N, C = x.shape
    H, W = hw_shape
    grid = F.pad(x.view(B, H, W, C), (0, 0, 0, (-W) % ws, 0, (-H) % ws))
    s = ws // 2 if shift else 0
    grid = torch.roll(grid, (-s, -s), (1, 2))
    out = torch.empty_like(grid)
    for r in range(0, grid.shape[1], ws):
        for c in range(0, grid.shape[2], ws):
            window = grid[:, r:r + ws, c:c + ws].reshape(B, ws * ws, C)
            out[:, r:r + ws, c:c + ws] = naive_inline_attention(attn, window, (ws, ws)).view(B, ws, ws, C)
    return torch.roll(out, (s, s), (1, 2))[:, :H, :W].reshape(B, N, C)


@pytest.mark.parametrize('hw_shape', [(16, 24), (13, 20)])
@pytest.mark.parametrize('shift', [False, True])
def test_windows_equal_the_authors_roll_and_partition(hw_shape, shift):
    attn = InLineAttention(16, 2).eval()
    x = torch.randn(2, hw_shape[0] * hw_shape[1], 16)
    with torch.no_grad():
        torch.testing.assert_close(windowed(attn, x, hw_shape, 8, shift),
                                   authors_windows(attn, x, hw_shape, 8, shift), rtol=1e-4, atol=1e-5)


def clipped_windows(attn, own, ws, shift):
    """Padding-aware reference for one image alone (h x w tokens): windows at rows/cols
    [s + (k - 1) ws, s + k ws) clipped to the image, each attended as an image of its own."""
    _, h, w, C = own.shape
    s = ws // 2 if shift and min(h, w) > ws else 0
    out = torch.empty_like(own)
    edges = lambda n: [(max(a, 0), min(a + ws, n)) for a in range(s - ws if s else 0, n, ws)]  # noqa: E731
    for r0, r1 in edges(h):
        for c0, c1 in edges(w):
            part = own[:, r0:r1, c0:c1].reshape(1, -1, C)
            out[:, r0:r1, c0:c1] = naive_inline_attention(attn, part, (r1 - r0, c1 - c0)).view(1, r1 - r0, c1 - c0, C)
    return out


@pytest.mark.parametrize('shift', [False, True])
def test_padding_aware_windows_are_each_images_clipped_windows(shift):
    """Two images (19 x 21 and 7 x 30 tokens, the second too thin to shift) in a 24 x 32 map."""
    attn = InLineAttention(16, 2, kernel_func='exp').eval()
    H, W, regions = 24, 32, [(19, 21), (7, 30)]
    x = torch.randn(2, H * W, 16)
    with torch.no_grad():
        out = windowed(attn, x, (H, W), 8, shift, torch.tensor(regions)).view(2, H, W, 16)
        for b, (h, w) in enumerate(regions):
            ref = clipped_windows(attn, x.view(2, H, W, 16)[b:b + 1, :h, :w], 8, shift)
            torch.testing.assert_close(out[b:b + 1, :h, :w], ref, rtol=1e-4, atol=1e-5)
            assert out[b, h:].abs().max() == 0 and out[b, :, w:].abs().max() == 0


def test_runs_at_detection_resolution_shape():
    """800 x 1333 (padded to 1344 as mmdet does) with windows of 56: the stage maps the benchmark times,
    on a thin trunk so the test stays fast."""
    model = small_backbone('tiny', padding_aware=True, inline_window_size=56)
    x = torch.randn(1, 3, 800, 1344)
    with torch.no_grad():
        outs = model(x, image_shapes=[(800, 1333)])
    assert [o.shape[-2:] for o in outs] == [(200, 336), (100, 168), (50, 84), (25, 42)]
    assert all(torch.isfinite(o).all() for o in outs)


def test_inline_window_size_must_be_none_or_a_positive_int():
    for bad in (0, -2, True, 2.0, '8'):
        with pytest.raises(ValueError) as error:
            small_backbone('tiny', inline_window_size=bad)
        assert str(error.value) == f'inline_window_size must be None or a positive int, got {bad!r}'
    model = small_backbone('tiny', inline_window_size=1)                   # windows of one token: allowed
    assert {b.attn.window_size for s in model.layers for b in s.blocks if isinstance(b.attn, InLineAttention)} == {1}
    with pytest.raises(ValueError) as error:
        small_backbone('tiny', attn_type='LIIS', inline_window_size=8)
    assert str(error.value) == ("layout 'LIIS' has plain linear attention blocks (letter L, an ablation), which "
                                'attend globally: inline_window_size must be None')


def test_the_torchscript_onnx_exporter_is_refused_with_the_exporter_that_works():
    """Windows of InLine attention trace (torch.jit.trace, as FLOP counting does), but the TorchScript ONNX
    exporter cannot give the dynamic depthwise convolution a kernel shape: a whole message naming the fix."""
    import io
    import re

    class Windowed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = InLineAttention(32, 2, window_size=4, shift=True)

        def forward(self, x):
            return self.attn(x, TokenMap.of(x, (8, 8)))

    model, x = Windowed().eval(), torch.randn(1, 64, 32)
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.trace(model, (x,))(x), model(x))
    message = ('InLine attention in windows (inline_window_size) cannot be exported by the TorchScript ONNX exporter '
               '(dynamo=False): the window count is not a constant in its graph, so the dynamic depthwise convolution '
               'has no known kernel shape. Use the default exporter (dynamo=True)')
    with pytest.raises(NotImplementedError, match='^' + re.escape(message) + '$'):
        torch.onnx.export(model, (x,), io.BytesIO(), dynamo=False)
