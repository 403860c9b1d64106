"""The side-by-side attention comparison (inline_backbones.analysis: focused, softmax_rows, rank, compare,
compare_run) against naive N x N computations on small maps, and on the released-format fixtures."""
import json
import os
import os.path as osp
import subprocess
import sys

import mmcv
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from flatten_fixtures import released_backbone as flatten_backbone
from released_fixtures import fixture_input
from released_fixtures import released_backbone as inline_backbone

from inline_backbones import InLineAttention
from inline_backbones.analysis import statistics as st
from inline_backbones.analysis.capture import AttentionInput
from inline_backbones.analysis.compare import CompareSettings, compare_flatten_layer, compare_inline_layer
from inline_backbones.analysis.compare_run import compare_image, summarize
from inline_backbones.analysis.focused import flatten_head_qkv, flatten_local_output, flatten_rows
from inline_backbones.analysis.rank import conv_matrix, dense_matrix, numerical_rank, rank_statistics, singular_values
from inline_backbones.analysis.rows import inline_rows, linear_rows
from inline_backbones.analysis.softmax_rows import softmax_rows
from inline_backbones.data.shapes import render_image
from inline_backbones.models.mixers.flatten_attention import FocusedLinearAttention
from inline_backbones.models.tokens.token_map import TokenMap

pytestmark = pytest.mark.usefixtures('no_grad')     # every test runs under torch.no_grad()
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
HW = (5, 6)
N = HW[0] * HW[1]


def flatten_layer(heads=2, d=4, window=4, seed=0):
    """A global focused linear attention layer in float64 with every parameter random (seeded)."""
    torch.manual_seed(seed)
    attn = FocusedLinearAttention(heads * d, heads, window_size=window, global_attention=True).double()
    for p in attn.parameters():
        p.normal_(0, 0.5)
    return attn, torch.randn(1, N, heads * d, dtype=torch.float64)


def naive_flatten(attn, x):
    """FLatten's N x N weights (h, N, N) and output, from its definition written out (bicubic resize of the encoding
    by F.interpolate, the focusing function per token over all C channels, a 5x5 conv by loops)."""
    C, h = x.shape[-1], attn.num_heads
    d = C // h
    q, k, v = attn.qkv(x[0]).split(C, dim=-1)
    side = attn.window_size
    table = attn.positional_encoding.reshape(1, side, side, C).permute(0, 3, 1, 2)
    k = k + F.interpolate(table, size=HW, mode='bicubic', align_corners=False).flatten(2)[0].T
    scale = F.softplus(attn.scale.view(C))

    def focus(t):
        t = (torch.relu(t) + 1e-6) / scale
        return t.norm(dim=-1, keepdim=True) * t ** 3 / (t ** 3).norm(dim=-1, keepdim=True)

    q, k = focus(q), focus(k)
    weights = torch.zeros(h, N, N, dtype=x.dtype)
    for head in range(h):
        qh, kh = q[:, head * d:(head + 1) * d], k[:, head * d:(head + 1) * d]
        for i in range(N):
            weights[head, i] = (qh[i] @ kh.T) / (N * (qh[i] @ kh.mean(0) + 1e-6))
    vh = v.view(N, h, d).transpose(0, 1)                                      # (h, N, d)
    out = weights @ vh
    maps = F.pad(vh.transpose(1, 2).reshape(h, d, *HW), (2, 2, 2, 2))
    w, b = attn.dwc.weight[:, 0], attn.dwc.bias
    for c in range(d):
        for y in range(HW[0]):
            for xx in range(HW[1]):
                out[:, y * HW[1] + xx, c] += (maps[:, c, y:y + 5, xx:xx + 5] * w[c]).sum((-1, -2)) + b[c]
    return weights, attn.proj(out.transpose(0, 1).reshape(N, C))


def test_flatten_rows_equal_the_n_by_n_definition_and_rebuild_the_layer():
    attn, x = flatten_layer()
    weights, naive_out = naive_flatten(attn, x)
    torch.testing.assert_close(attn(x, TokenMap.of(x, HW))[0], naive_out, rtol=1e-10, atol=1e-10)
    q, focused_q, focused_k, v = flatten_head_qkv(attn, x[0], HW)
    torch.testing.assert_close(q, attn.qkv(x[0])[:, :8].view(N, 2, 4).transpose(0, 1))
    index = torch.tensor([0, 7, 29])
    outputs = []
    for head in range(2):
        rows = flatten_rows(focused_q[head], focused_k[head])
        torch.testing.assert_close(rows.rows(index), weights[head, index], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(dense_matrix(rows), weights[head], rtol=1e-10, atol=1e-12)
        outputs.append(rows.output(v[head]))
    both = torch.stack(outputs) + flatten_local_output(attn, v, HW)
    torch.testing.assert_close(attn.proj(both.transpose(0, 1).reshape(N, -1)), naive_out, rtol=1e-10, atol=1e-10)
    windowed = FocusedLinearAttention(8, 2, window_size=4).double()
    with pytest.raises(ValueError, match='flatten_global=True'):
        flatten_head_qkv(windowed, x[0], HW)


def test_softmax_rows_equal_the_dense_softmax():
    torch.manual_seed(0)
    q, k, v = (torch.randn(N, 4, dtype=torch.float64) for _ in range(3))
    dense = torch.softmax(q @ k.T / 2.0, dim=-1)                               # s = 4 ** -0.5
    rows = softmax_rows(q, k)
    index = torch.tensor([3, 0, 17])
    torch.testing.assert_close(rows.rows(index), dense[index])
    torch.testing.assert_close(rows.output(v, chunk=7), dense @ v)
    torch.testing.assert_close(rows.difference(index, index.flip(0)), dense[index] - dense[index.flip(0)])
    torch.testing.assert_close(torch.cat([a for _, a in rows.chunks(index, 2)]), dense[index])


def test_uniformity_equals_naive():
    torch.manual_seed(0)
    q, k = torch.randn(N, 4, dtype=torch.float64), torch.randn(N, 4, dtype=torch.float64)
    index = torch.arange(0, N, 3)
    for rows in (inline_rows(q, k), linear_rows(q, k), softmax_rows(q, k)):
        got, = st.row_statistics(rows, index, 4, st.Uniformity())
        tv = [0.5 * sum(abs(float(a) - 1 / N) for a in row) for row in dense_matrix(rows)[index]]
        assert got['tv_uniform_mean'] == pytest.approx(sum(tv) / len(tv), rel=1e-10)
        median = float(torch.tensor(tv, dtype=torch.float64).median())
        assert got['tv_uniform_median'] == pytest.approx(median, rel=1e-10)
    uniform = linear_rows(torch.ones(N, 4, dtype=torch.float64), torch.ones(N, 4, dtype=torch.float64))
    assert st.row_statistics(uniform, index, 4, st.Uniformity())[0]['tv_uniform_mean'] < 1e-6


def test_conv_matrix_equals_the_convolution_written_out():
    torch.manual_seed(0)
    for size in (3, 5):
        kernel = torch.randn(size, size, dtype=torch.float64)
        M = conv_matrix(kernel, HW)
        naive = torch.zeros(N, N, dtype=torch.float64)
        r = size // 2
        for y in range(HW[0]):
            for x in range(HW[1]):
                for a in range(size):
                    for b in range(size):
                        yy, xx = y + a - r, x + b - r
                        if 0 <= yy < HW[0] and 0 <= xx < HW[1]:
                            naive[y * HW[1] + x, yy * HW[1] + xx] = kernel[a, b]
        torch.testing.assert_close(M, naive)
        v = torch.randn(N, dtype=torch.float64)
        torch.testing.assert_close(M @ v, F.conv2d(v.view(1, 1, *HW), kernel[None, None], padding=r).flatten())


@pytest.mark.parametrize('rtol', [1e-6, 1e-3])
def test_ranks_equal_matrix_rank_of_the_dense_matrices(rtol):
    torch.manual_seed(0)
    d = 3
    q, k = torch.randn(N, d, dtype=torch.float64), torch.randn(N, d, dtype=torch.float64)
    kernels = torch.randn(2, 3, 3, dtype=torch.float64)
    for rows, bound in ((inline_rows(q, k), d + 1), (linear_rows(q, k), d), (softmax_rows(q, k), N)):
        A = dense_matrix(rows)
        assert numerical_rank(singular_values(A), rtol) == int(torch.linalg.matrix_rank(A, rtol=rtol)) <= bound
        stats = rank_statistics(A, HW, kernels, (rtol,))
        ranks = [int(torch.linalg.matrix_rank(A + conv_matrix(c, HW), rtol=rtol)) for c in kernels]
        assert stats[f'rank_A@{rtol:g}'] == int(torch.linalg.matrix_rank(A, rtol=rtol))
        assert stats[f'rank_A_plus_local@{rtol:g}'] == sum(ranks) / 2
        assert stats[f'min_rank_A_plus_local@{rtol:g}'] == min(ranks)
    assert rank_statistics(dense_matrix(linear_rows(q, k)), HW, None, (rtol,)) == {f'rank_A@{rtol:g}': d}
    assert numerical_rank(torch.zeros(3, dtype=torch.float64), rtol) == 0


def test_layer_comparison_with_every_query_sampled_equals_naive():
    """Every row sampled: the statistics of the flatten and softmax kinds equal the dense matrices'."""
    attn, x = flatten_layer(heads=2)
    weights, _ = naive_flatten(attn, x)
    settings = CompareSettings(num_queries=10 ** 6, num_pairs=10, seed=1, chunk=7, rank_max_tokens=N,
                               rank_channels=2)
    heads = compare_flatten_layer(AttentionInput('layers.0.blocks.0.attn', attn, x[0], HW), settings)['flatten']
    q, _, _, v = flatten_head_qkv(attn, x[0], HW)
    local = flatten_local_output(attn, v, HW)
    for head, stats in enumerate(heads):
        A = weights[head]
        assert stats['negative']['negative_share'] == 0 and stats['negative']['negative_output_share'] == 0
        assert stats['uniformity']['tv_uniform_mean'] == pytest.approx(
            float(0.5 * (A - 1 / N).abs().sum(1).mean()), rel=1e-9)
        assert stats['local_to_attention_norm'] == pytest.approx(float(local[head].norm() / (A @ v[head]).norm()),
                                                                 rel=1e-9)
        assert stats['rank']['rank_A@1e-06'] == int(torch.linalg.matrix_rank(A, rtol=1e-6)) <= 4
        operator = A + conv_matrix(attn.dwc.weight[0, 0], HW)
        assert stats['rank']['min_rank_A_plus_local@1e-06'] <= int(torch.linalg.matrix_rank(operator, rtol=1e-6))
        assert stats['injectivity']['distinct_pairs'] <= N + 10
    inline = InLineAttention(8, 2).double()
    out = compare_inline_layer(AttentionInput('l', inline, x[0] * 2, HW), settings)
    assert list(out) == ['inline', 'linear-relu', 'linear-exp', 'softmax']
    q, k, v = inline.head_qkv(x[0] * 2)
    for head in range(2):
        dense = torch.softmax(q[head] @ k[head].T / 2.0, dim=-1)
        got = out['softmax'][head]
        mass = sum(float(dense[i, j]) for i in range(N) for j in range(N)
                   if abs(i // HW[1] - j // HW[1]) <= 1 and abs(i % HW[1] - j % HW[1]) <= 1) / N
        assert got['locality']['mass_3x3'] == pytest.approx(mass, rel=1e-9)
        assert got['negative']['negative_share'] == 0 and 'local_to_attention_norm' not in got
        assert out['inline'][head]['rank']['rank_A@1e-06'] <= 5 and got['rank']['rank_A@1e-06'] <= N
    again = compare_inline_layer(AttentionInput('l', inline, x[0] * 2, HW), settings)
    assert again == out                                                                # seeded: reproducible


def test_fixtures_compare_at_the_same_positions():
    """The released-format fixtures (InLine-Swin IIIS, FLatten-Swin FFSS, embed 4) at 224: FLatten's global blocks
    are its released windows there (56 and 28: the maps), and both models are compared at stages 0-1."""
    x = fixture_input([[32, 53, 224, 224]])
    windowed, global_ = flatten_backbone('mini-flatten-FFSS'), flatten_backbone('mini-flatten-FFSS',
                                                                                flatten_global=True)
    for a, b in zip(windowed(x), global_(x), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    settings = CompareSettings(num_queries=24, num_pairs=8, rank_max_tokens=200, rank_channels=2)
    results = compare_image({'inline': inline_backbone('IIIS'), 'flatten': global_}, x, settings)
    kinds = {(r['stage'], r['block'], r['kind']) for r in results}
    for stage in (0, 1):
        for block in (0, 1):
            assert {k for s, b, k in kinds if (s, b) == (stage, block)} == {
                'inline', 'flatten', 'linear-relu', 'linear-exp', 'softmax'}
    assert not any(k == 'flatten' for s, _, k in kinds if s > 1)               # FFSS: FLatten in stages 0-1 only
    summary = summarize([dict(r, image='fixture', size=[224, 224]) for r in results])
    for row in summary:
        if row['kind'] != 'inline':
            assert row['negative.negative_share'] == 0
        if row['stage'] == 2:                                                   # 14 x 14 = 196 tokens: ranked
            bound = row['head_dims'] + (row['kind'] == 'inline')
            assert row['rank.rank_A@1e-06'] <= (196 if row['kind'] == 'softmax' else bound)
            if row['kind'] == 'inline':                                         # the 3x3 residual raises it
                assert row['rank.rank_A_plus_local@1e-06'] > bound
        else:
            assert not any(key.startswith('rank.') for key in row)              # 3136 and 784 tokens > 200
    assert any(row['negative.negative_share'] > 0 for row in summary if row['kind'] == 'inline')


@pytest.mark.slow
def test_compare_tool_writes_tables_figures_and_json(tmp_path):
    image = str(tmp_path / 'shapes.png')
    mmcv.imwrite(render_image(np.random.default_rng(5), 128)[0], image)
    out = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'analysis_tools', 'compare_attention.py'), image, '--sizes', '32',
         '64', '--num-queries', '16', '--num-pairs', '8', '--seed', '3', '--rank-max-tokens', '64',
         '--out-dir', str(tmp_path / 'out')],
        capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, out.stderr[-3000:]
    assert 'random weights (seed 3)' in out.stderr and '### Rank' in out.stdout
    data = json.loads((tmp_path / 'out' / 'compare_stats.json').read_text())
    assert data['settings']['seed'] == 3 and data['settings']['sizes'] == [[32, 32], [64, 64]]
    assert {r['kind'] for r in data['summary']} == {'inline', 'flatten', 'linear-relu', 'linear-exp', 'softmax'}
    for name in ('negative', 'injectivity', 'locality', 'rank'):
        assert (tmp_path / 'out' / f'compare_{name}.png').stat().st_size > 5_000
    assert (tmp_path / 'out' / 'compare_stats.csv').read_text().count('\n') > 10


def test_collinear_queries_confuse_flatten_as_they_confuse_linear_attention():
    """FLatten divides by the row sum like linear attention, and its focusing function is homogeneous of degree one on
    the positive part: queries q and 3q (and any two with the same positive part) get the same row up to its 1e-6
    offsets; InLine's rows of the same raw queries differ."""
    attn, x = flatten_layer(heads=1, d=8)
    tokens = x[0].clone()
    w_q, b_q = attn.qkv.weight[:8], attn.qkv.bias[:8]
    target = torch.linalg.lstsq(w_q, (3 * (tokens[0] @ w_q.T + b_q) - b_q)[:, None]).solution[:, 0]
    tokens[1] = target                                                         # q_1 = 3 q_0
    q, focused_q, focused_k, _ = flatten_head_qkv(attn, tokens, HW)
    torch.testing.assert_close(q[0, 1], 3 * q[0, 0])
    pairs = torch.tensor([[0, 1]])
    _, tv = st.pair_distances(flatten_rows(focused_q[0], focused_k[0]), q[0], pairs)
    _, tv_inline = st.pair_distances(inline_rows(q[0], focused_k[0]), q[0], pairs)
    assert tv.item() < 1e-4 and tv_inline.item() > 1e-2


def test_fan_in_weights_are_seeded_and_scaled():
    from inline_backbones.analysis.inputs import fan_in_weights
    layer = torch.nn.Linear(400, 300)
    bias = layer.bias.clone()
    fan_in_weights(layer, seed=2, jitter=0.0)
    assert layer.weight.std().item() == pytest.approx(400 ** -0.5, rel=0.02) and torch.equal(layer.bias, bias)
    again = fan_in_weights(torch.nn.Linear(400, 300), seed=2, jitter=0.0)
    assert torch.equal(layer.weight, again.weight)
    assert fan_in_weights(torch.nn.Linear(4, 3), seed=0).bias.abs().min() > 0            # the jitter
