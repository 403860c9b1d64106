"""tools/benchmark_highres.py runs end to end at tiny sizes and writes its table, CSV, JSON and plot."""
import csv
import inspect
import json
import math
import os
import os.path as osp
import subprocess
import sys

import pytest

from inline_backbones import InLineSwinTransformer

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _run(*args):
    return subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'benchmark_highres.py'), *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})


def _rows(out_dir):
    with open(out_dir / 'results.csv') as f:
        return list(csv.DictReader(f))


def test_benchmark_tool_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'benchmark_highres.py'), '--sizes', '64x64', '96x128',
         '--models', 'inline-swin-t', 'swin-t', 'swin-t-global', '--warmup', '0', '--repeats', '2',
         '--out-dir', str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, out.stderr[-3000:]
    assert 'inline-swin-t fp32: latency ~ pixels^' in out.stdout
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


def test_dtype_modes_are_timed_together_with_same_dtype_gemms(tmp_path):
    out = _run('--sizes', '64x64', '--models', 'inline-swin-t', 'swin-t', '--dtype', 'fp32', 'bf16', 'bf16-pure',
               '--warmup', '0', '--repeats', '1', '--no-memory', '--out-dir', str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {(r['model'], r['dtype']): r for r in _rows(tmp_path)}
    assert set(rows) == {(m, d) for m in ('inline-swin-t', 'swin-t') for d in ('fp32', 'bf16', 'bf16-pure')}
    inline = {d: rows['inline-swin-t', d] for d in ('fp32', 'bf16', 'bf16-pure')}
    assert float(inline['fp32']['speedup_over_fp32']) == 1.0
    for r in inline.values():
        assert float(r['latency_ms']) > 0 and float(r['speedup_over_fp32']) > 0
    # Each mode's %GEMM is against a GEMM of its own dtype, timed in the same rounds.
    assert inline['bf16']['gemm_gflops_per_s'] == inline['bf16-pure']['gemm_gflops_per_s']
    assert inline['bf16']['gemm_gflops_per_s'] != inline['fp32']['gemm_gflops_per_s']
    # mmdet's Swin keeps fp32 attention masks, so pure bf16 fails there: reported, not fatal.
    swin_pure = rows['swin-t', 'bf16-pure']
    assert swin_pure['note'].startswith('skipped') or float(swin_pure['latency_ms']) > 0
    assert math.isclose(float(inline['bf16']['ratio_to_reference']),
                        float(inline['bf16']['latency_ms']) / float(rows['swin-t', 'bf16']['latency_ms']))


def test_fp16_is_refused_on_a_cpu_without_native_fp16():
    with open('/proc/cpuinfo') as f:
        flags = next(line for line in f if line.startswith('flags')).split()
    if 'avx512_fp16' in flags or 'amx_fp16' in flags:
        pytest.skip('this CPU has native fp16')
    out = _run('--sizes', '64x64', '--models', 'inline-swin-t', '--dtype', 'fp16-pure', '--device', 'cpu')
    assert out.returncode != 0 and 'avx512_fp16' in out.stderr


@pytest.mark.skipif('inline_window_size' not in inspect.signature(InLineSwinTransformer).parameters,
                    reason='needs the windowed InLine option (inline_window_size)')
def test_window_sweep_writes_its_table_and_plot(tmp_path):
    out = _run('--window-sizes', '7', '14', '--batch-size', '1', '--warmup', '0', '--repeats', '1', '--no-memory',
               '--out-dir', str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert [(r['model'], r['size']) for r in _rows(tmp_path)] == [
        (m, '224x224') for m in ('swin-t-w7', 'inline-swin-t-w7', 'swin-t-w14', 'inline-swin-t-w14')]
    assert 'speed-up' in out.stdout and (tmp_path / 'window_sizes.png').stat().st_size > 10_000
