"""mmengine's FLOP analysis (with our handles) counts InLine attention exactly as a hand count."""
import pytest
import torch
from torch import nn

from inline_backbones import InLineAttention, WindowAttention
from inline_backbones.analysis.flops import flop_analyzer
from inline_backbones.models.tokens.token_map import TokenMap


class OnMap(nn.Module):
    """A mixer on the tokens of an ``hw`` map (jit tracing takes tensors only, so the map is built inside)."""

    def __init__(self, mixer, hw):
        super().__init__()
        self.mixer, self.hw = mixer, hw

    def forward(self, x):
        return self.mixer(x, TokenMap.of(x, self.hw))


@pytest.mark.parametrize('hw, C, h', [((16, 16), 96, 3), ((7, 13), 64, 4), ((32, 20), 128, 8)])
def test_inline_attention_flops_match_hand_count(hw, C, h):
    N, d = hw[0] * hw[1], C // h
    analyzer = flop_analyzer(OnMap(InLineAttention(C, h), hw), (torch.randn(2, N, C),))
    per_image = {     # the released order of operations (FLOP counting never takes the folded form)
        'q, k, v and proj projections': 4 * N * C * C,
        'means of k and v from the mean token': 2 * C * C,
        'k^T v (per head d x d)': h * N * d * d,
        'q M (per head)': h * N * d * d,
        'dynamic depthwise 3x3': N * C * 9,
        'kernel generator (grouped 1x1 convs)': C * d + 9 * C * d,
    }
    assert analyzer.total() == 2 * sum(per_image.values())
    ops = analyzer.by_operator()
    # traced, the accumulation of q M is out of place (graph_mode.py), so both are aten::baddbmm
    assert ops['baddbmm'] == 2 * (per_image['k^T v (per head d x d)'] + per_image['q M (per head)'])
    assert ops['conv'] == 2 * (per_image['dynamic depthwise 3x3'] + per_image['kernel generator (grouped 1x1 convs)'])


def test_window_attention_counts_attention_matmuls():
    C, h, ws = 64, 4, 7
    analyzer = flop_analyzer(OnMap(WindowAttention(C, h, ws), (14, 21)), (torch.randn(1, 14 * 21, C),))
    windows, L = 6, ws * ws
    assert analyzer.by_operator()['scaled_dot_product_attention'] == windows * h * L * L * 2 * (C // h)
    assert analyzer.by_operator()['linear'] == 14 * 21 * C * 4 * C


def test_inference_path_counts_the_same_flops():
    """Under no_grad (the benchmark's count) the linears are traced as F.linear, so counted the same."""
    attn, x = OnMap(InLineAttention(64, 4), (8, 8)), torch.randn(1, 8 * 8, 64)
    with_grad = flop_analyzer(attn, (x,)).total()
    with torch.no_grad():
        assert flop_analyzer(attn, (x,)).total() == with_grad
