"""tools/benchmark_gpu.py runs end to end on a CPU at tiny sizes (the GPU figures in docs/benchmarks.md come
from the same code on a GPU). Timings are not asserted; the table's structure and derived columns are."""
import json
import os.path as osp
import sys

import pytest

sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'tools'))
import benchmark_gpu  # noqa: E402


def test_interleaved_rows_and_ratios(tmp_path):
    rows = benchmark_gpu.main(['--device', 'cpu', '--dtype', 'fp32', '--sizes', '64', '--batches', '2', '--rounds',
                               '2', '--warmup', '0', '--models', 'inline-swin-t', 'inline-swin-t@reference',
                               '--out-dir', str(tmp_path)])
    assert [r['model'] for r in rows] == ['inline-swin-t', 'inline-swin-t@reference']
    assert all(r['reference'] == 'inline-swin-t' for r in rows)   # no swin-* model: the first one
    for r in rows:
        assert r['min_ms'] <= r['median_ms'] <= r['max_ms']
        assert r['ratio'] == pytest.approx(r['median_ms'] / rows[0]['median_ms'])
        assert r['launches'] is None and r['peak_mb'] is None   # CUDA-only measurements
    saved = json.loads((tmp_path / 'results.json').read_text())
    assert saved['results'] == rows and saved['meta']['args']['sizes'] == [64]
    table = (tmp_path / 'results.md').read_text().splitlines()
    assert table[-1].startswith('| 64^2 | 2 | fp32 | infer | inline-swin-t@reference |')


def test_padding_aware_and_training_rows(tmp_path):
    rows = benchmark_gpu.main(['--device', 'cpu', '--dtype', 'fp32', '--sizes', '64', '--batches', '3', '--rounds',
                               '1', '--warmup', '0', '--padding-aware', '--train', '--models', 'inline-pvt-t',
                               '--out-dir', str(tmp_path)])
    assert [r['model'] for r in rows] == ['inline-pvt-t', 'inline-pvt-t (padding-aware)']
    assert all(r['train'] for r in rows)


def test_padded_shapes_are_distinct_and_inside_the_batch():
    shapes = benchmark_gpu.padded_shapes(1120, 8)
    assert shapes[0] == (1120, 1120) and len(set(shapes)) == 8
    assert all(32 <= h <= 1120 and 32 <= w <= 1120 and h % 32 == 0 and w % 32 == 0 for h, w in shapes)


def test_cuda_graphs_refuse_training(capsys):
    with pytest.raises(SystemExit):
        benchmark_gpu.main(['--device', 'cpu', '--cuda-graphs', '--train'])
    assert '--cuda-graphs captures plain-mode inference' in capsys.readouterr().err


def test_from_json_prints_the_saved_table(tmp_path, capsys):
    rows = benchmark_gpu.main(['--device', 'cpu', '--dtype', 'fp32', '--sizes', '64', '--batches', '1', '--rounds',
                               '1', '--warmup', '0', '--models', 'inline-swin-t', '--out-dir', str(tmp_path)])
    capsys.readouterr()
    assert benchmark_gpu.main(['--from-json', str(tmp_path / 'results.json')]) == rows
    assert capsys.readouterr().out.splitlines()[2:] == (tmp_path / 'results.md').read_text().splitlines()[2:]
