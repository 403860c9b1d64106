"""Attention statistics of inline_backbones.analysis against naive N x N computations on small maps."""
import pytest
import torch
from reference_attention import naive_inline_attention

from inline_backbones import InLineAttention
from inline_backbones.analysis import AnalysisSettings, analyze_layer, inline_rows, linear_rows
from inline_backbones.analysis import statistics as st
from inline_backbones.analysis.capture import AttentionInput
from inline_backbones.models.mixers.linear_attention import EPS
from inline_backbones.models.tokens.token_map import TokenMap

pytestmark = pytest.mark.usefixtures('no_grad')     # every test runs under torch.no_grad()
HW = (5, 7)
N = HW[0] * HW[1]


def setup_layer(kernel_func='identity', heads=2, local_residual=True):
    attn = InLineAttention(8 * heads, heads, kernel_func=kernel_func, local_residual=local_residual).double()
    x = torch.randn(1, N, 8 * heads, dtype=torch.float64) * 2
    return attn, x


def naive_weights(attn, x, linear_kernel='relu'):
    """Full InLine (reference_attention.py) and linear-attention weight matrices (h, N, N) of one image."""
    _, inline = naive_inline_attention(attn, x, HW, return_weights=True)
    q, k, _ = attn.qkv(x[0]).view(N, 3, attn.num_heads, attn.head_dims).permute(1, 2, 0, 3)
    phi = {'relu': torch.relu, 'exp': lambda t: torch.exp(0.2 * t)}[linear_kernel]
    scores = phi(q) @ phi(k).transpose(-1, -2)
    return inline[0], scores / (scores.sum(-1, keepdim=True) + N * EPS)


def naive_negative(A, v):
    """Negative-weight statistics of rows A (S, N) with values v (N, d), written out per row."""
    shares = []
    for row in A:
        o_neg, o_pos = torch.zeros_like(v[0]), torch.zeros_like(v[0])
        for j in range(len(row)):
            if row[j] < 0:
                o_neg += row[j] * v[j]
            else:
                o_pos += row[j] * v[j]
        n_neg, n_pos = o_neg.norm(), o_pos.norm()
        shares.append(float(n_neg / (n_neg + n_pos)) if n_neg + n_pos > 0 else 0.0)
    return dict(negative_share=float((A < 0).double().mean()), min_scaled_weight=float(A.shape[1] * A.min()),
                negative_output_share=sum(shares) / len(shares),
                negative_mass_share=float(-A[A < 0].sum() / A.abs().sum()))


def naive_locality(A, index, size):
    H, W = HW
    mass, count = 0.0, 0
    for row, i in zip(A, index.tolist(), strict=True):
        y, x = divmod(i, W)
        for yy in range(y - size // 2, y + size // 2 + 1):
            for xx in range(x - size // 2, x + size // 2 + 1):
                if 0 <= yy < H and 0 <= xx < W:
                    mass += float(row[yy * W + xx])
                    count += 1
    return mass / len(index), count / N / len(index)


@pytest.mark.parametrize('kernel_func', ['identity', 'relu', 'exp'])
def test_rows_equal_naive_matrices(kernel_func):
    attn, x = setup_layer(kernel_func)
    inline_A, linear_A = naive_weights(attn, x)
    q, k, v = attn.head_qkv(x[0])
    index = torch.tensor([0, 3, 17, 34])
    for head in range(attn.num_heads):
        rows = inline_rows(q[head], k[head], kernel_func)
        torch.testing.assert_close(rows.rows(index), inline_A[head, index], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(rows.output(v[head]), inline_A[head] @ v[head], rtol=1e-12, atol=1e-12)
        lin = linear_rows(q[head], k[head], 'relu')
        torch.testing.assert_close(lin.rows(index), linear_A[head, index], rtol=1e-12, atol=1e-12)
        chunks = list(rows.chunks(index, 3))
        assert [len(a) for _, a in chunks] == [3, 1]
        torch.testing.assert_close(torch.cat([a for _, a in chunks]), inline_A[head, index])


def test_attention_and_residual_outputs_rebuild_the_module_output():
    attn, x = setup_layer('identity', heads=2)
    q, k, v = attn.head_qkv(x[0])
    local = attn.residual_output(x[0], v, HW)
    attn_out = torch.stack([inline_rows(q[h], k[h]).output(v[h]) for h in range(2)])
    both = (attn_out + local).transpose(0, 1).reshape(N, -1)
    torch.testing.assert_close(attn.proj(both)[None], attn(x, TokenMap.of(x, HW)), rtol=1e-10, atol=1e-10)
    no_res, _ = setup_layer('identity', heads=2, local_residual=False)
    assert no_res.residual_output(x[0], v, HW) is None


def test_negative_weights_and_locality_equal_naive():
    attn, x = setup_layer('identity')
    inline_A, linear_A = naive_weights(attn, x)
    q, k, v = attn.head_qkv(x[0])
    index = torch.tensor([0, 1, 6, 8, 20, 34])               # corners, borders and inside
    rows = inline_rows(q[0], k[0])
    got, = st.row_statistics(rows, index, 4, st.NegativeWeights(v[0]))
    want = naive_negative(inline_A[0, index], v[0])
    assert want['negative_share'] > 0 and want['min_scaled_weight'] < 0       # the case under test
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    for kind, A in (('inline', inline_A), ('linear', linear_A)):
        rows = inline_rows(q[0], k[0]) if kind == 'inline' else linear_rows(q[0], k[0])
        got, = st.row_statistics(rows, index, 4, st.Locality(index, HW))
        for size in (3, 7):
            mass, uniform = naive_locality(A[0, index], index, size)
            assert got[f'mass_{size}x{size}'] == pytest.approx(mass, rel=1e-9)
            assert got[f'uniform_{size}x{size}'] == pytest.approx(uniform, rel=1e-12)
            assert got[f'ratio_{size}x{size}'] == pytest.approx(mass / uniform, rel=1e-9)
    assert st.row_statistics(linear_rows(q[0], k[0]), index, 64, st.NegativeWeights(v[0]))[0]['negative_share'] == 0


def test_pairs_and_total_variation_equal_naive():
    attn, x = setup_layer('identity')
    inline_A, linear_A = naive_weights(attn, x)
    q, k, _ = attn.head_qkv(x[0])
    index = torch.tensor([2, 5, 9, 11, 30])
    pairs = st.query_pairs(q[0], index, 7, torch.Generator().manual_seed(0))
    assert pairs.shape == (5 + 7, 2) and (pairs[:, 0] != pairs[:, 1]).all()
    assert set(pairs.flatten().tolist()) <= set(index.tolist())
    cos_all = torch.nn.functional.cosine_similarity(q[0][index, None], q[0][None, index], dim=-1)
    cos_all.fill_diagonal_(-2)
    assert pairs[:5, 1].tolist() == index[cos_all.argmax(1)].tolist()         # nearest neighbours
    for rows, A in ((inline_rows(q[0], k[0]), inline_A[0]), (linear_rows(q[0], k[0]), linear_A[0])):
        cosine, tv = st.pair_distances(rows, q[0], pairs, chunk=5)
        for (a, b), c, t in zip(pairs.tolist(), cosine, tv, strict=True):
            assert float(t) == pytest.approx(0.5 * float((A[a] - A[b]).abs().sum()), rel=1e-9)
            assert float(c) == pytest.approx(float(q[0][a] @ q[0][b] / q[0][a].norm() / q[0][b].norm()), rel=1e-9)


def test_collinear_queries_confuse_linear_attention_but_not_inline():
    """Constructed case: queries q and 3q (and relu-equal q, q') get identical linear rows, distinct InLine rows."""
    torch.manual_seed(1)
    d = 8
    k = torch.randn(N, d, dtype=torch.float64)
    base = torch.randn(d, dtype=torch.float64).abs() + 0.1
    other = base.clone()                                       # same positive part, so relu(base) == relu(other),
    base[:4] = -torch.tensor([2.0, 0.1, 2.0, 0.1])              # but a different negative part
    other[:4] = -torch.tensor([0.1, 2.0, 0.1, 2.0])
    q = torch.stack([base, 3 * base, other] + list(torch.randn(N - 3, d, dtype=torch.float64)))
    pairs = torch.tensor([[0, 1], [0, 2]])
    cos_lin, tv_lin = st.pair_distances(linear_rows(q, k, 'relu'), q, pairs)
    cos_in, tv_in = st.pair_distances(inline_rows(q, k, 'identity'), q, pairs)
    full_linear = (torch.relu(q) @ torch.relu(k).T) / (torch.relu(q) @ torch.relu(k).sum(0) + N * EPS)[:, None]
    assert float((full_linear[0] - full_linear[1]).abs().sum()) < 1e-6           # naive: identical rows
    assert tv_lin.max() < 1e-6 and tv_in.min() > 1e-2
    assert cos_lin[0] == pytest.approx(1.0) and cos_lin[1] < st.DISTINCT_COSINE
    assert st.confusion(cos_lin, tv_lin)['confused_share'] == 1.0      # the distinct pair (0, 2) is confused
    assert st.confusion(cos_in, tv_in)['confused_share'] == 0.0


def test_confusion_summary_equals_naive():
    cosine = torch.tensor([0.2, 0.995, 0.95, -0.5, 0.7, 0.999], dtype=torch.float64)
    tv = torch.tensor([1e-4, 1e-5, 0.3, 0.2, 2e-3, 0.5], dtype=torch.float64)
    got = st.confusion(cosine, tv)
    assert got['distinct_pairs'] == 4 and got['confused_share'] == pytest.approx(1 / 4)
    assert got['tv_median'] == pytest.approx(float(tv.median() + tv.sort().values[3]) / 2)
    by_bin = {tuple(b['cosine']): (b['pairs'], b['median_tv']) for b in got['tv_by_cosine']}
    assert by_bin[(-1.0, 0.0)] == (1, pytest.approx(0.2)) and by_bin[(0.99, 1.0)][0] == 2
    assert by_bin[(0.5, 0.9)] == (1, pytest.approx(2e-3))


def test_analyze_layer_with_every_query_sampled_equals_naive():
    attn, x = setup_layer('relu', heads=2)
    inline_A, linear_A = naive_weights(attn, x)
    q, k, v = attn.head_qkv(x[0])
    settings = AnalysisSettings(num_queries=10 ** 6, num_pairs=20, seed=3, chunk=8)
    points = [0, 17]
    result, pairs, maps = analyze_layer(AttentionInput('layers.0.blocks.0.attn', attn, x[0], HW), settings, points)
    assert result['num_queries'] == N and result['num_pairs'] == N + 20 and len(pairs) == 2
    everyone = torch.arange(N)
    local = attn.residual_output(x[0], v, HW)
    for head, stats in enumerate(result['heads']):
        assert stats['negative'] == pytest.approx(naive_negative(inline_A[head], v[head]), rel=1e-9, abs=1e-12)
        mass, uniform = naive_locality(linear_A[head], everyone, 3)
        assert stats['locality_linear']['ratio_3x3'] == pytest.approx(mass / uniform, rel=1e-9)
        ratio = local[head].norm() / (inline_A[head] @ v[head]).norm()
        assert stats['residual_to_attention_norm'] == pytest.approx(float(ratio), rel=1e-9)
        assert stats['injectivity_inline']['distinct_pairs'] <= N + 20
    torch.testing.assert_close(maps['inline'].view(2, N), N * inline_A[:, points].mean(0))
    torch.testing.assert_close(maps['linear'].view(2, N), N * linear_A[:, points].mean(0))
    again, _, _ = analyze_layer(AttentionInput('l', attn, x[0], HW), settings)
    assert again['heads'] == result['heads']                                   # seeded: reproducible


def test_capture_records_global_layers_and_rejects_windowed_inline():
    from inline_backbones import InLineSwinTransformer
    from inline_backbones.analysis.capture import capture_inline_inputs
    arch = dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4])
    model = InLineSwinTransformer(arch=arch, attn_type='IIIS').eval()
    records = capture_inline_inputs(model, torch.randn(1, 3, 64, 96))
    assert [(r.name, r.hw_shape, tuple(r.tokens.shape)) for r in records[::2]] == [
        ('layers.0.blocks.0.attn', (16, 24), (384, 16)), ('layers.1.blocks.0.attn', (8, 12), (96, 32)),
        ('layers.2.blocks.0.attn', (4, 6), (24, 64))]
    with pytest.raises(ValueError, match='inline_window_size=4'):
        capture_inline_inputs(InLineSwinTransformer(arch=arch, attn_type='IIIS', inline_window_size=4),
                              torch.randn(1, 3, 64, 96))
    with pytest.raises(ValueError, match='no InLine attention layer'):
        capture_inline_inputs(InLineSwinTransformer(arch=arch, attn_type='SSSS'), torch.randn(1, 3, 64, 96))
