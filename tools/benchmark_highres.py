"""High-resolution inference benchmark: InLine-Swin against Swin (window 7) and global-softmax Swin.

    python tools/benchmark_highres.py [--sizes 512x512 800x1333 1024x1024 1536x1536 2048x2048]
        [--models inline-swin-t swin-t swin-t-global ...] [--task backbone|mask-rcnn|upernet]
        [--device auto|cpu|cuda] [--dtype fp32|bf16|fp16] [--batch-size 1] [--channels-last]
        [--compile] [--warmup 1] [--repeats 5] [--max-seconds 60] [--out-dir outputs/benchmark]

For every size, the models are timed interleaved (one forward of each model per round, ``--repeats``
rounds after ``--warmup``), so their ratios hold on a noisy machine. Reported per model and size:
median latency and its spread (min-max), images/s, peak memory of the forward (CUDA:
``max_memory_allocated``; CPU: growth of the peak RSS in a fresh subprocess), params and FLOPs
(mmengine's analysis with attention matmuls and the dynamic depthwise conv counted; one FLOP = one
multiply-add) and the achieved FLOP/s as a fraction of a GEMM (4096^3, same dtype and device) timed in
the same run. A model whose predicted time at a size exceeds ``--max-seconds`` is skipped and said so.

Models (``--task backbone``): ``inline-swin-{t,s,b}`` (InLine blocks attend globally), mmdet's
``swin-{t,s,b}`` (window 7), and ``swin-t-global``: Swin-T's hierarchy with global softmax attention in
every block (``scaled_dot_product_attention`` over the whole map, without relative position bias, which
would need an N x N table). Backbone mode suffixes: ``inline-swin-t-pa`` (``padding_aware=True``; the
random input fills the image, so only the padding to window multiples is masked), ``inline-swin-t-w56``
(InLine in windows of 56, the authors' code), ``inline-swin-t-pa-w56`` (both); for the cost of
padding-aware mode on a padded batch see ``tools/measure_padding.py``.
``--task mask-rcnn|upernet`` times whole models from the configs instead
(InLine-Swin from this repo, Swin from mmdet/mmseg).

Writes ``results.csv``, ``results.json`` and ``latency_memory.png`` (log-log, one line per model) to
``--out-dir`` and prints a table.
"""
import argparse
import json
import os
import os.path as osp
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from inline_backbones import InLineSwinTransformer
from inline_backbones.analysis import flop_analyzer

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SIZES = ['512x512', '800x1333', '1024x1024', '1536x1536', '2048x2048']
ARCH = {'t': 'tiny', 's': 'small', 'b': 'base'}
DTYPES = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}
TASK_CONFIGS = {
    'mask-rcnn': {
        **{f'inline-swin-{s}': f'{ROOT}/mmdet_configs/mask-rcnn_inline-swin-{s}_fpn_ms-crop-1x_coco.py' for s in 'tsb'},
        'swin-t': 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py',
        'swin-s': 'mmdet::swin/mask-rcnn_swin-s-p4-w7_fpn_amp-ms-crop-3x_coco.py',
    },
    'upernet': {
        **{f'inline-swin-{s}': f'{ROOT}/mmseg_configs/inline-swin-{a}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
           for s, a in ARCH.items()},
        **{f'swin-{s}': f'mmseg::swin/swin-{a}-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
           for s, a in ARCH.items()},
    },
}
# Growth of time with pixels used to predict whether the next size fits in --max-seconds.
GROWTH = {'swin-t-global': 2.0}


class GlobalSoftmaxAttention(nn.Module):
    """Softmax attention over every token of the map (the global-window Swin baseline)."""

    def __init__(self, embed_dims, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def forward(self, x, hw_shape):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))


def build_backbone(name):
    if name == 'swin-t-global':
        model = InLineSwinTransformer('tiny', attn_type='IIII', drop_path_rate=0.)
        for stage in model.layers:
            for block in stage.blocks:
                block.attn = GlobalSoftmaxAttention(block.attn.embed_dims, block.attn.num_heads)
        return model
    inline = re.fullmatch(r'inline-swin-([tsb])(-pa)?(?:-w(\d+))?', name)
    if inline:
        size, padding_aware, window = inline.groups()
        return InLineSwinTransformer(ARCH[size], drop_path_rate=0., padding_aware=bool(padding_aware),
                                     inline_window_size=int(window) if window else None)
    if name.startswith('swin-') and name[-1] in ARCH:
        from mmdet.models.backbones import SwinTransformer

        arch = InLineSwinTransformer.arch_zoo[ARCH[name[-1]]]
        return SwinTransformer(embed_dims=arch['embed_dims'], depths=arch['depths'], num_heads=arch['num_heads'],
                               window_size=7, drop_path_rate=0.)
    raise SystemExit(f'unknown model {name!r}')


def build_task_model(task, name):
    """A whole detector/segmentor in ``tensor`` mode, as a callable on an image batch."""
    from functools import partial

    from get_flops import build

    if name not in TASK_CONFIGS[task]:
        raise SystemExit(f'no {task} config for {name!r}; choose from {sorted(TASK_CONFIGS[task])}')
    _, model, sample_cls = build(TASK_CONFIGS[task][name])

    def forward(x):
        H, W = x.shape[-2:]
        meta = dict(img_shape=(H, W), ori_shape=(H, W), pad_shape=(H, W), batch_input_shape=(H, W),
                    scale_factor=(1.0, 1.0))
        return model._forward_orig(x, data_samples=[sample_cls(metainfo=meta) for _ in range(len(x))],
                                   mode='tensor')

    model._forward_orig = model.forward
    model.forward = forward
    return model


def build_model(args, name, device):
    model = build_backbone(name) if args.task == 'backbone' else build_task_model(args.task, name)
    model = model.to(device)
    model.eval()  # on its own line: mmdet's SwinTransformer.train() returns None
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def make_input(args, size, device):
    H, W = size
    x = torch.randn(args.batch_size, 3, H, W, device=device)
    return x.contiguous(memory_format=torch.channels_last) if args.channels_last else x


class BenchModel:
    """One model, compiled if asked, run under no_grad and autocast."""

    def __init__(self, args, name, device):
        self.args, self.name, self.device = args, name, device
        self.model = build_model(args, name, device)
        self.fn = torch.compile(self.model) if args.compile else self.model
        self.params = sum(p.numel() for p in self.model.parameters())

    def __call__(self, x):
        dtype = DTYPES[self.args.dtype]
        with torch.no_grad(), torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None):
            return self.fn(x)


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize()


def timed(fn, x, device):
    sync(device)
    start = time.perf_counter()
    fn(x)
    sync(device)
    return time.perf_counter() - start


def gemm_runner(args, device):
    """A square GEMM in the benchmark's dtype: the FLOP/s yardstick."""
    n = 8192 if device.type == 'cuda' else 2048
    dtype = DTYPES[args.dtype] or torch.float32
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    return (lambda _: a @ b), 2 * n ** 3


def peak_memory_mb(args, name, size, device):
    """Peak memory of one forward beyond the built model and its input."""
    if device.type == 'cuda':
        runner = BenchModel(args, name, device)
        x = make_input(args, size, device)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        runner(x)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    cmd = [sys.executable, osp.abspath(__file__), '--memory-probe', name, '--sizes', f'{size[0]}x{size[1]}',
           '--task', args.task, '--dtype', args.dtype, '--batch-size', str(args.batch_size), '--device', 'cpu']
    cmd += ['--channels-last'] if args.channels_last else []
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    if out.returncode:
        return float('nan')
    return float(out.stdout.strip().splitlines()[-1])


def _proc_status_kb(field):
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ':'))


def memory_probe(args):
    """Subprocess body for CPU memory: peak RSS during one forward minus the RSS just before it.

    Linux lets a process reset its peak RSS (``VmHWM``) to the current RSS by writing 5 to
    ``/proc/self/clear_refs``, so earlier peaks (imports, model building) do not hide the forward's.
    """
    device = torch.device('cpu')
    size = parse_size(args.sizes[0])
    runner = BenchModel(args, args.memory_probe, device)
    x = make_input(args, size, device)
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    before = _proc_status_kb('VmRSS')
    runner(x)
    print((_proc_status_kb('VmHWM') - before) / 1024)


def count_flops(runner, size, device):
    x = torch.randn(1, 3, *size, device=device)
    with torch.no_grad():
        return flop_analyzer(runner.model, (x,)).total()


def parse_size(text):
    h, w = text.lower().split('x')
    return int(h), int(w)


def benchmark(args):
    from rich.progress import Progress

    device = torch.device(args.device)
    sizes = [parse_size(s) for s in args.sizes]
    runners = {}
    for name in args.models:
        runners[name] = BenchModel(args, name, device)
    gemm, gemm_flops = gemm_runner(args, device)
    results, last = [], {}
    total = len(sizes) * (args.warmup + args.repeats) * (len(args.models) + 1)
    with Progress(transient=True) as progress:
        bar = progress.add_task('benchmark', total=total)
        for size in sizes:
            x = make_input(args, size, device)
            pixels = size[0] * size[1]
            active, skipped = [], {}
            for name in args.models:
                if name in last:
                    prev_pixels, prev_seconds = last[name]
                    predicted = prev_seconds * (pixels / prev_pixels) ** GROWTH.get(name, 1.2)
                    if predicted > args.max_seconds:
                        skipped[name] = f'skipped: predicted {predicted:.0f} s per run > --max-seconds {args.max_seconds:g}'
                        continue
                active.append(name)
            times = {name: [] for name in active + ['gemm']}
            for round_ in range(args.warmup + args.repeats):
                progress.update(bar, description=f'{size[0]}x{size[1]} round {round_ + 1}')
                for name in active + ['gemm']:
                    if name in skipped:
                        progress.advance(bar)
                        continue
                    try:
                        seconds = timed(gemm if name == 'gemm' else runners[name], x, device)
                    except (RuntimeError, MemoryError) as err:  # out of memory
                        skipped[name] = f'skipped: {str(err).splitlines()[0][:80]}'
                        continue
                    finally:
                        progress.advance(bar)
                    if round_ >= args.warmup:
                        times[name].append(seconds)
            gemm_rate = gemm_flops / statistics.median(times['gemm'])
            for name in args.models:
                row = dict(model=name, size=f'{size[0]}x{size[1]}', pixels=pixels, batch=args.batch_size,
                           dtype=args.dtype, device=str(device), params_m=runners[name].params / 1e6)
                if name in skipped:
                    row['note'] = skipped[name]
                    results.append(row)
                    continue
                median = statistics.median(times[name])
                last[name] = (pixels, median)
                progress.update(bar, description=f'{size[0]}x{size[1]} FLOPs/memory of {name}')
                macs = count_flops(runners[name], size, device) * args.batch_size
                row.update(latency_ms=1e3 * median, min_ms=1e3 * min(times[name]), max_ms=1e3 * max(times[name]),
                           images_per_s=args.batch_size / median, gflops=macs / 1e9 / args.batch_size,
                           achieved_gflops_per_s=2 * macs / median / 1e9,
                           gemm_fraction=2 * macs / median / gemm_rate, gemm_gflops_per_s=gemm_rate / 1e9,
                           peak_memory_mb=peak_memory_mb(args, name, size, device) if args.memory else float('nan'),
                           note='')
                results.append(row)
    return results


def run_meta(args):
    if args.device == 'cuda':
        processor = torch.cuda.get_device_name()
    else:
        with open('/proc/cpuinfo') as f:
            processor = next((line.split(':', 1)[1].strip() for line in f if line.startswith('model name')), 'cpu')
    return dict(command=' '.join(sys.argv), torch=torch.__version__, threads=torch.get_num_threads(),
                processor=processor, task=args.task, dtype=args.dtype, batch_size=args.batch_size,
                device=args.device, channels_last=args.channels_last, compile=args.compile)


def report(args, results, meta):
    os.makedirs(args.out_dir, exist_ok=True)
    ref = {r['size']: r.get('latency_ms') for r in results if r['model'] == args.reference}
    header = (f'{"size":>10} {"model":>14} {"latency ms":>11} {"min-max ms":>15} {"img/s":>7} {"mem MB":>8} '
              f'{"GFLOPs":>8} {"GFLOP/s":>8} {"%GEMM":>6} {"x " + args.reference:>10}')
    print(header)
    for r in results:
        if 'latency_ms' not in r:
            print(f'{r["size"]:>10} {r["model"]:>14}   {r["note"]}')
            continue
        ratio = r['latency_ms'] / ref[r['size']] if ref.get(r['size']) else float('nan')
        r['ratio_to_reference'] = ratio
        print(f'{r["size"]:>10} {r["model"]:>14} {r["latency_ms"]:>11.1f} '
              f'{r["min_ms"]:>7.0f}-{r["max_ms"]:<7.0f} {r["images_per_s"]:>7.2f} {r["peak_memory_mb"]:>8.0f} '
              f'{r["gflops"]:>8.1f} {r["achieved_gflops_per_s"]:>8.1f} {100 * r["gemm_fraction"]:>5.0f}% {ratio:>10.2f}')
    for name in args.models:
        rows = [r for r in results if r['model'] == name and 'latency_ms' in r]
        if len(rows) >= 2:
            slope = np.polyfit(np.log([r['pixels'] for r in rows]), np.log([r['latency_ms'] for r in rows]), 1)[0]
            print(f'{name}: latency ~ pixels^{slope:.2f} over {rows[0]["size"]}..{rows[-1]["size"]}')
    with open(osp.join(args.out_dir, 'results.json'), 'w') as f:
        json.dump(dict(meta=meta, results=results), f, indent=1)
    keys = ['model', 'size', 'pixels', 'batch', 'dtype', 'device', 'latency_ms', 'min_ms', 'max_ms', 'images_per_s',
            'peak_memory_mb', 'params_m', 'gflops', 'achieved_gflops_per_s', 'gemm_gflops_per_s', 'gemm_fraction',
            'ratio_to_reference', 'note']
    with open(osp.join(args.out_dir, 'results.csv'), 'w') as f:
        f.write(','.join(keys) + '\n')
        for r in results:
            f.write(','.join(str(r.get(k, '')) for k in keys) + '\n')
    plot(args, results, meta)
    print(f'wrote {args.out_dir}/results.csv, results.json, latency_memory.png')


def plot(args, results, meta):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    panels = [('latency_ms', 1e-3, 'latency (s)')]
    if any(r.get('peak_memory_mb', float('nan')) > 0 for r in results):
        panels.append(('peak_memory_mb', 1, 'peak memory of the forward (MB)'))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    axes = axes[0]
    for ax, (key, scale, label) in zip(axes, panels):
        for name in args.models:
            rows = sorted((r for r in results if r['model'] == name and r.get(key, 0) > 0), key=lambda r: r['pixels'])
            ax.plot([r['pixels'] / 1e6 for r in rows], [r[key] * scale for r in rows], 'o-', label=name)
        ax.set_xscale('log')
        ax.set_yscale('log')
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel('megapixels per image')
        ax.set_ylabel(label)
        ax.grid(True, which='both', alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{meta['task']}, {meta['dtype']}, batch {meta['batch_size']}, {meta['device']} "
                 f"({meta['processor']}, {meta['threads']} threads)", fontsize=10)
    fig.tight_layout()
    fig.savefig(osp.join(args.out_dir, 'latency_memory.png'), dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', nargs='+', default=SIZES, help='HxW sizes')
    parser.add_argument('--models', nargs='+',
                        default=['inline-swin-t', 'inline-swin-s', 'inline-swin-b', 'swin-t', 'swin-s', 'swin-b',
                                 'swin-t-global'])
    parser.add_argument('--task', choices=['backbone', 'mask-rcnn', 'upernet'], default='backbone')
    parser.add_argument('--device', default='auto')
    parser.add_argument('--dtype', choices=sorted(DTYPES), default='fp32', help='autocast dtype')
    parser.add_argument('--batch-size', type=int, default=1)
    parser.add_argument('--channels-last', action='store_true')
    parser.add_argument('--compile', action='store_true', help='torch.compile every model')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--max-seconds', type=float, default=60., help='skip runs predicted to take longer')
    parser.add_argument('--no-memory', dest='memory', action='store_false', help='skip peak-memory probes')
    parser.add_argument('--reference', default='swin-t', help='model that the ratio column divides by')
    parser.add_argument('--out-dir', default='outputs/benchmark')
    parser.add_argument('--from-json', help='re-print the table and re-draw the plot of a saved results.json')
    parser.add_argument('--memory-probe', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device == 'auto':
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if args.memory_probe:
        memory_probe(args)
        return
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        args.models = list(dict.fromkeys(r['model'] for r in saved['results']))
        report(args, saved['results'], saved['meta'])
        return
    report(args, benchmark(args), run_meta(args))


if __name__ == '__main__':
    main()
