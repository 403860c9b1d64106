"""tools/benchmark_highres.py runs end to end at tiny sizes and writes its table, CSV, JSON and plot."""
import csv
import json
import os
import os.path as osp
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def test_benchmark_tool_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'benchmark_highres.py'), '--sizes', '64x64', '96x128',
         '--models', 'inline-swin-t', 'swin-t', 'swin-t-global', '--warmup', '0', '--repeats', '2',
         '--out-dir', str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, out.stderr[-3000:]
    assert 'inline-swin-t: latency ~ pixels^' in out.stdout
    with open(tmp_path / 'results.csv') as f:
        rows = list(csv.DictReader(f))
    assert [(r['model'], r['size']) for r in rows] == [
        (m, s) for s in ('64x64', '96x128') for m in ('inline-swin-t', 'swin-t', 'swin-t-global')]
    for r in rows:
        assert float(r['latency_ms']) > 0 and float(r['gflops']) > 0 and 0 < float(r['gemm_fraction']) < 1.5
        assert float(r['peak_memory_mb']) >= 0
    swin = {r['size']: float(r['gflops']) for r in rows if r['model'] == 'swin-t'}
    assert float(rows[0]['ratio_to_reference']) > 0 and swin['96x128'] > swin['64x64']
    data = json.loads((tmp_path / 'results.json').read_text())
    assert data['meta']['threads'] >= 1 and len(data['results']) == 6
    assert (tmp_path / 'latency_memory.png').stat().st_size > 10_000
