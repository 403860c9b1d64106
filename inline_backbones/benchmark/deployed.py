"""Whole-model latency and peak memory of a segmentor or detector: eager PyTorch against its exported file in
onnxruntime and OpenVINO (fp32; bf16 where the CPU has it), each runtime alone.

Each model (a config) is exported whole once (:func:`..deployment.whole.export_whole`, random weights: the latency
does not depend on them). Every measurement is a child process (``python -m inline_backbones.benchmark.deployed
child ...``) that loads one runtime, runs one warm-up and one timed forward at one size, and reports its latency
and its own peak resident memory (``ru_maxrss``): nothing else runs beside it, and the memory is that runtime's
alone (the file children import no torch). Rounds interleave the runs (round r runs every model, size and runtime
once, in the same order); the table gives the median over rounds. The eager child also times the backbone alone
(its share of the whole forward). Threads: each runtime's default (one per core), spinning off
(:mod:`inline_runtime.backends`). Inputs: random pixels of the size, given to the file as it is (the
high-resolution case: no test resize).
"""
import argparse
import json
import os
import os.path as osp
import resource
import statistics
import subprocess
import sys
import time

SIZES = ['1024x1024', '2048x2048', '4096x4096']     # 1, 4 and 16 megapixels


def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def file_inputs(names, h, w):
    """Inputs by the file's input names for an image of h x w (detectors: padded up to a multiple of 32, scale 1)."""
    import numpy as np

    padded = (h, w) if 'img_shape' not in names else (-(-h // 32) * 32, -(-w // 32) * 32)
    values = dict(image=(np.random.default_rng(0).random((1, 3, *padded)) * 255).astype(np.float32),
                  image_shape=np.array([[h, w]], np.int64), img_shape=np.array([h, w], np.int64),
                  scale_factor=np.ones(2, np.float32))
    return [values[name] for name in names]


def child_file(path, runtime, precision, h, w):
    """One warm-up and one timed run of the file in ``runtime``: (seconds, peak MB)."""
    from inline_runtime.backends import Backend

    backend = Backend(path, runtime, precision)
    inputs = file_inputs(backend.input_names, h, w)
    backend(*inputs)
    start = time.perf_counter()
    backend(*inputs)
    return dict(seconds=time.perf_counter() - start, peak_mb=_peak_mb())


def child_eager(config, h, w):
    """Eager PyTorch fp32: the whole graph's module and the backbone alone, one warm-up and one timed run each."""
    import torch

    from ..deployment.whole import load_task_model, task_module

    cfg, task, model, meta = load_task_model(config)
    module, meta = task_module(task).prepare(model, cfg, meta)
    inputs = [torch.from_numpy(a) for a in file_inputs(meta['input_names'], h, w)]
    timings = {}
    with torch.no_grad():
        for name, run in [('seconds', lambda: module(*inputs)),
                          ('backbone_seconds', lambda: model.backbone(inputs[0]))]:
            run()
            start = time.perf_counter()
            run()
            timings[name] = time.perf_counter() - start
    return dict(timings, peak_mb=_peak_mb())


def run_child(args):
    command = [sys.executable, '-m', 'inline_backbones.benchmark.deployed', 'child', *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        return dict(error=done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f'status {done.returncode}')
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(configs, sizes, runtimes, out_dir, rounds=3, max_side=4096):
    """Export each config, then ``rounds`` interleaved rounds of every (config, size, runtime); rows with medians."""
    from ..deployment.whole import export_whole, load_task_model

    files = {}
    for config in configs:
        path = osp.join(out_dir, osp.splitext(osp.basename(config.split('::')[-1]))[0] + '.onnx')
        if not osp.exists(path):
            cfg, task, model, meta = load_task_model(config)
            export_whole(cfg, task, model, meta, path, max_side=max_side)
        files[config] = path
    plan = [(config, size, runtime) for config in configs for size in sizes for runtime in runtimes]
    samples = {key: [] for key in plan}
    for r in range(rounds):
        for config, size, runtime in plan:
            h, w = map(int, size.split('x'))
            if runtime == 'eager':
                result = run_child(['eager', config, h, w])
            else:
                rt, _, precision = runtime.partition(':')
                result = run_child(['file', files[config], rt, precision or 'fp32', h, w])
            samples[(config, size, runtime)].append(result)
            print(f'round {r + 1}/{rounds} {osp.basename(config)} {size} {runtime}: {result}', flush=True)
    rows = []
    for (config, size, runtime), results in samples.items():
        ok = [s for s in results if 'error' in s] == []
        h, w = map(int, size.split('x'))
        row = dict(model=osp.basename(config.split('::')[-1]), megapixels=round(h * w / 2 ** 20, 2), size=size,
                   runtime=runtime)
        if ok:
            row.update(latency_s=statistics.median(s['seconds'] for s in results),
                       peak_mb=max(s['peak_mb'] for s in results))
            if runtime == 'eager':
                row['backbone_share'] = statistics.median(s['backbone_seconds'] / s['seconds'] for s in results)
        else:
            row['error'] = next(s['error'] for s in results if 'error' in s)
        rows.append(row)
    return rows


def write(rows, out_dir, meta):
    with open(osp.join(out_dir, 'results.json'), 'w') as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    lines = ['| model | pixels | runtime | latency (s) | peak memory (MB) | backbone share (eager) |',
             '|---|---|---|---|---|---|']
    for r in rows:
        share = f'{r["backbone_share"]:.0%}' if 'backbone_share' in r else ''
        value = f'{r["latency_s"]:.2f}' if 'latency_s' in r else f'failed: {r["error"][:80]}'
        lines.append(f'| {r["model"]} | {r["size"]} | {r["runtime"]} | {value} | {r.get("peak_mb", 0):.0f} | {share} |')
    with open(osp.join(out_dir, 'results.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    plot(rows, osp.join(out_dir, 'latency.png'))
    return '\n'.join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (model, runtime) in sorted({(r['model'], r['runtime']) for r in rows}):
        points = sorted((r['megapixels'], r['latency_s']) for r in rows
                        if r['model'] == model and r['runtime'] == runtime and 'latency_s' in r)
        if points:
            ax.plot(*zip(*points, strict=True), marker='o', label=f'{model.split("_")[0]} {runtime}')
    ax.set_xlabel('megapixels (2^20 pixels)')
    ax.set_ylabel('latency, batch 1 (s)')
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == 'child':
        kind, *rest = argv[1:]
        if kind == 'eager':
            result = child_eager(rest[0], int(rest[1]), int(rest[2]))
        else:
            result = child_file(rest[0], rest[1], rest[2], int(rest[3]), int(rest[4]))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('configs', nargs='+', help='mmseg/mmdet configs, or mmseg::/mmdet:: names (e.g. InLine-Swin-T '
                                                   'and Swin-T UperNet)')
    parser.add_argument('--sizes', nargs='+', default=SIZES, metavar='HxW', help='input sizes (default: 1, 4, 16 MP)')
    parser.add_argument('--runtimes', nargs='+', default=['eager', 'onnxruntime:fp32', 'openvino:fp32',
                                                          'openvino:bf16'])
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--out-dir', default='outputs/benchmark_deployed')
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    import torch

    from .report import run_meta

    meta = run_meta(args, torch.device('cpu'))
    rows = measure(args.configs, args.sizes, args.runtimes, args.out_dir, args.rounds)
    print(write(rows, args.out_dir, meta))
    return 0


if __name__ == '__main__':
    sys.exit(main())
