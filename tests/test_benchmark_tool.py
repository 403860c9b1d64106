"""tools/benchmark_highres.py runs end to end at tiny sizes and writes its table, CSV, JSON and plot.

Timings are not asserted (they are noise on a shared machine); what is checked is that every derived
column is the stated function of the measured ones, and that FLOPs and params are the models' own.
"""
import csv
import json
import math
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch

from inline_backbones import InLineSwinTransformer
from inline_backbones.analysis import flop_analyzer

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
MODELS = ('inline-swin-t', 'swin-t', 'swin-t-global')
SIZES = ('64x64', '96x128')


@pytest.mark.slow
def test_benchmark_tool_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'benchmark_highres.py'), '--sizes', *SIZES,
         '--models', *MODELS, '--warmup', '0', '--repeats', '2', '--out-dir', str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, out.stderr[-3000:]
    assert 'inline-swin-t: latency ~ pixels^' in out.stdout
    with open(tmp_path / 'results.csv') as f:
        csv_rows = list(csv.DictReader(f))
    assert [(r['model'], r['size']) for r in csv_rows] == [(m, s) for s in SIZES for m in MODELS]
    data = json.loads((tmp_path / 'results.json').read_text())
    assert data['meta']['threads'] == torch.get_num_threads() and data['meta']['dtype'] == 'fp32'
    rows = data['results']
    assert len(rows) == 6
    for row, csv_row in zip(rows, csv_rows):
        assert float(csv_row['latency_ms']) == row['latency_ms'] and float(csv_row['gflops']) == row['gflops']
    isclose = math.isclose
    latency = {(r['model'], r['size']): r['latency_ms'] for r in rows}
    for r in rows:
        assert 0 < r['min_ms'] <= r['latency_ms'] <= r['max_ms']
        assert isclose(r['images_per_s'], r['batch'] * 1e3 / r['latency_ms'], rel_tol=1e-9)
        assert isclose(r['achieved_gflops_per_s'], 2 * r['gflops'] * r['batch'] / (r['latency_ms'] / 1e3), rel_tol=1e-9)
        assert isclose(r['gemm_fraction'], r['achieved_gflops_per_s'] / r['gemm_gflops_per_s'], rel_tol=1e-9)
        assert isclose(r['ratio_to_reference'], r['latency_ms'] / latency[('swin-t', r['size'])], rel_tol=1e-9)
        assert r['peak_memory_mb'] >= 0
    # FLOPs and params are the models' own: ours counted here the same way, and the others in order.
    ours = InLineSwinTransformer('tiny', drop_path_rate=0.).eval()
    for size in SIZES:
        H, W = (int(v) for v in size.split('x'))
        with torch.no_grad():
            macs = flop_analyzer(ours, (torch.randn(1, 3, H, W),)).total()
        row = {r['model']: r for r in rows if r['size'] == size}
        assert row['inline-swin-t']['gflops'] == macs / 1e9
        assert row['swin-t-global']['gflops'] > row['swin-t']['gflops']
    assert rows[0]['params_m'] == sum(p.numel() for p in ours.parameters()) / 1e6
    swin = {r['size']: r['gflops'] for r in rows if r['model'] == 'swin-t'}
    assert swin['96x128'] > swin['64x64']
    assert (tmp_path / 'latency_memory.png').stat().st_size > 10_000
