"""High-resolution inference benchmark: InLine-Swin against Swin (window 7) and global-softmax Swin.

    python tools/benchmark_highres.py [--sizes 512x512 800x1333 1024x1024 1536x1536 2048x2048]
        [--models inline-swin-t swin-t swin-t-global ...] [--task backbone|mask-rcnn|upernet]
        [--device auto|cpu|cuda] [--dtype fp32 bf16 bf16-pure fp16 fp16-pure] [--batch-size 1]
        [--channels-last] [--compile] [--warmup 1] [--repeats 5] [--max-seconds 60]
        [--window-sizes 7 14 28 56] [--out-dir outputs/benchmark]

For every size, the models are timed interleaved (one forward of each model in each ``--dtype`` mode
per round, ``--repeats`` rounds after ``--warmup``), so their ratios hold on a noisy machine. Reported
per model, mode and size: median latency and its spread (min-max), images/s, peak memory of the forward
(CUDA: ``max_memory_allocated``; CPU: growth of the peak RSS in a fresh subprocess), params and FLOPs
(mmengine's analysis with attention matmuls and the dynamic depthwise conv counted; one FLOP = one
multiply-add), the achieved FLOP/s as a fraction of a square GEMM of the same dtype (2048^3 on CPU,
8192^3 on CUDA) timed in the same rounds, the ratio to ``--reference`` in the same mode and, when
``fp32`` is among the modes, the ratio to the same model in fp32. A model whose predicted time at a size
exceeds ``--max-seconds`` is skipped and said so.

Modes (``--dtype``, one or more): ``fp32``; ``bf16`` / ``fp16``: autocast (fp32 weights, matmuls and
convs in the low dtype); ``bf16-pure`` / ``fp16-pure``: model and input cast to the dtype (mmdet's Swin
cannot run so: its attention masks stay fp32, and is reported as skipped). fp16 on a CPU is refused
unless it has ``avx512_fp16`` or ``amx_fp16`` (without them torch emulates fp16 hundreds of times
slower than fp32).

Window sweep (``--window-sizes 7 14 28 56``, the paper's Fig. 3): for each size ``w``, ``swin-t-w{w}``
(timm's Swin-T with softmax windows of ``w``, clamped to each stage's map as in Swin's code) against
``inline-swin-t-w{w}`` (InLine-Swin-T whose InLine blocks use windows of ``w`` and whose softmax blocks
use ``max(7, w // 8)``, as the authors' code), by default at 224x224. Writes ``window_sizes.png``
(images/s and speed-up per window size, beside the paper's GPU ratios) and a table.

Models (``--task backbone``): ``inline-swin-{t,s,b}`` (InLine blocks attend globally), mmdet's
``swin-{t,s,b}`` (window 7), and ``swin-t-global``: Swin-T's hierarchy with global softmax attention in
every block (``scaled_dot_product_attention`` over the whole map, without relative position bias, which
would need an N x N table). Backbone mode suffixes: ``inline-swin-t-pa`` (``padding_aware=True``; the
random input fills the image, so only the padding to window multiples is masked), ``inline-swin-t-w56``
(InLine in windows of 56, the authors' code), ``inline-swin-t-pa-w56`` (both); for the cost of
padding-aware mode on a padded batch see ``tools/measure_padding.py``.
PVT: ``inline-pvt-{t,s,m,l}`` (InLine-PVT, global InLine attention in every stage) against mmdet's PVT v1
``pvt-{t,s,m,l}`` (``PyramidVisionTransformer``: softmax attention over keys reduced 8x8, 4x4, 2x2 and 1x1 by
strided convs, i.e. quadratic in the tokens with factors 1/64, 1/16, 1/4, 1; ``--reference pvt-t``).
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

from inline_backbones import InLinePVT, InLineSwinTransformer
from inline_backbones.analysis import flop_analyzer

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SIZES = ['512x512', '800x1333', '1024x1024', '1536x1536', '2048x2048']
ARCH = {'t': 'tiny', 's': 'small', 'b': 'base'}
PVT_ARCH = {'t': 'tiny', 's': 'small', 'm': 'medium', 'l': 'large'}
# --dtype modes: name -> (dtype, pure). pure: weights and input cast; otherwise autocast to dtype.
MODES = {'fp32': (torch.float32, False), 'bf16': (torch.bfloat16, False), 'bf16-pure': (torch.bfloat16, True),
         'fp16': (torch.float16, False), 'fp16-pure': (torch.float16, True)}
DTYPE_NAMES = {torch.float32: 'fp32', torch.bfloat16: 'bf16', torch.float16: 'fp16'}
# The paper's Fig. 3 (GPU): FPS of InLine-Swin-T over Swin-T per window size.
PAPER_WINDOW_SPEEDUP = {28: 1.9, 56: 3.7}
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
    """Softmax attention over every token of the map (the global-window Swin baseline); a token mixer
    (``mixer(x, tokens)``, see inline_backbones/models/mixers/__init__.py) that needs nothing from the map."""

    def __init__(self, embed_dims, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def forward(self, x, tokens):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))


def build_backbone(name, size):
    """A backbone by benchmark name: ``inline-swin-{t,s,b}[-pa][-w{w}]`` (``-pa`` padding-aware, ``-w{w}``
    InLine windows of ``w`` with softmax windows of ``max(7, w // 8)`` as in the authors' code),
    ``swin-{t,s,b}`` (mmdet's Swin, window 7), ``swin-t-w{w}`` (timm's Swin-T with windows of ``w``
    clamped to each stage's map at ``size``), ``swin-t-global`` (global softmax in every block),
    ``inline-pvt-{t,s,m,l}`` (InLine-PVT, layout IIII) or ``pvt-{t,s,m,l}`` (mmdet's PVT v1)."""
    if name == 'swin-t-global':
        model = InLineSwinTransformer('tiny', attn_type='IIII', drop_path_rate=0.)
        for stage in model.layers:
            for block in stage.blocks:
                block.attn = GlobalSoftmaxAttention(block.attn.embed_dims, block.attn.num_heads)
        return model
    inline = re.fullmatch(r'inline-swin-([tsb])(-pa)?(?:-w(\d+))?', name)
    if inline:
        letter, padding_aware, window = inline.groups()
        window = int(window) if window else None
        return InLineSwinTransformer(ARCH[letter], drop_path_rate=0., padding_aware=bool(padding_aware),
                                     inline_window_size=window, window_size=max(7, (window or 0) // 8))
    timm_swin = re.fullmatch(r'swin-t-w(\d+)', name)
    if timm_swin:
        from timm.models.swin_transformer import SwinTransformer

        model = SwinTransformer(img_size=size, window_size=int(timm_swin.group(1)), embed_dim=96,
                                depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), num_classes=0, drop_path_rate=0.)
        model.forward = model.forward_features  # the trunk only, like the other backbones
        return model
    if name.startswith('swin-') and name[-1] in ARCH:
        from mmdet.models.backbones import SwinTransformer

        arch = InLineSwinTransformer.arch_zoo[ARCH[name[-1]]]
        return SwinTransformer(embed_dims=arch['embed_dims'], depths=arch['depths'], num_heads=arch['num_heads'],
                               window_size=7, drop_path_rate=0.)
    pvt = re.fullmatch(r'(inline-)?pvt-([tsml])', name)
    if pvt and pvt.group(1):
        return InLinePVT(PVT_ARCH[pvt.group(2)], drop_path_rate=0.)
    if pvt:
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules

        register_all_modules(init_default_scope=False)
        depths = InLinePVT.arch_zoo[f'pvt-v1-{PVT_ARCH[pvt.group(2)]}']['depths']
        return MODELS.build(dict(type='mmdet.PyramidVisionTransformer', num_layers=depths, drop_path_rate=0.))
    raise SystemExit(f'unknown model {name!r}')


def build_task_model(task, name):
    """A whole detector/segmentor in ``tensor`` mode, as a callable on an image batch."""

    from inline_backbones.task_tools import build_task_model as build

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


def build_model(args, name, device, mode, size):
    dtype, pure = MODES[mode]
    model = build_backbone(name, size) if args.task == 'backbone' else build_task_model(args.task, name)
    model = model.to(device, dtype if pure else torch.float32)
    model.eval()  # on its own line: mmdet's SwinTransformer.train() returns None
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def make_input(args, size, device):
    H, W = size
    x = torch.randn(args.batch_size, 3, H, W, device=device)
    return x.contiguous(memory_format=torch.channels_last) if args.channels_last else x


class BenchModel:
    """One model in one ``--dtype`` mode, compiled if asked, run under no_grad (and autocast)."""

    def __init__(self, args, name, device, mode, size):
        self.args, self.name, self.device, self.mode = args, name, device, mode
        self.dtype, self.pure = MODES[mode]
        self.model = build_model(args, name, device, mode, size)
        self.fn = torch.compile(self.model) if args.compile else self.model
        self.params = sum(p.numel() for p in self.model.parameters())

    def __call__(self, x):
        """``x`` already in this mode's input dtype (see :func:`input_dtype`)."""
        autocast = not self.pure and self.dtype != torch.float32
        with torch.no_grad(), torch.autocast(self.device.type, dtype=self.dtype, enabled=autocast):
            return self.fn(x)


def input_dtype(mode):
    dtype, pure = MODES[mode]
    return dtype if pure else torch.float32


def check_modes(modes, device):
    """fp16 on a CPU only with native fp16 arithmetic (otherwise torch emulates it, ~500x slower)."""
    if device.type != 'cpu' or not any(MODES[m][0] == torch.float16 for m in modes):
        return
    with open('/proc/cpuinfo') as f:
        flags = set(next((line.split(':', 1)[1].split() for line in f if line.startswith('flags')), []))
    if not flags & {'avx512_fp16', 'amx_fp16'}:
        raise SystemExit('--dtype fp16/fp16-pure on this CPU: it has neither avx512_fp16 nor amx_fp16, so torch '
                         'would emulate fp16 (hundreds of times slower than fp32); use bf16 or --device cuda')


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(fn, x, device):
    sync(device)
    start = time.perf_counter()
    fn(x)
    sync(device)
    return time.perf_counter() - start


def gemm_runner(dtype, device, n=None):
    """A square n x n GEMM in ``dtype`` (n = 8192 on CUDA, 2048 on CPU by default): the FLOP/s yardstick of
    the models run in that dtype."""
    n = n or (8192 if device.type == 'cuda' else 2048)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    return (lambda _: a @ b), 2 * n ** 3


def peak_memory_mb(args, key, size, device):
    """Peak memory of one forward beyond the built model and its input."""
    name, mode = key
    if device.type == 'cuda':
        runner = BenchModel(args, name, device, mode, size)
        x = make_input(args, size, device).to(input_dtype(mode))
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        runner(x)
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20
    cmd = [sys.executable, osp.abspath(__file__), '--memory-probe', name, '--sizes', f'{size[0]}x{size[1]}',
           '--task', args.task, '--dtype', mode, '--batch-size', str(args.batch_size), '--device', 'cpu']
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
    mode = args.dtype[0]
    runner = BenchModel(args, args.memory_probe, device, mode, size)
    x = make_input(args, size, device).to(input_dtype(mode))
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    before = _proc_status_kb('VmRSS')
    runner(x)
    print((_proc_status_kb('VmHWM') - before) / 1024)


def count_flops(runner, size, device):
    x = torch.randn(1, 3, *size, device=device, dtype=input_dtype(runner.mode))
    with torch.no_grad():
        return flop_analyzer(runner.model, (x,)).total()


def parse_size(text):
    h, w = text.lower().split('x')
    return int(h), int(w)


def select_runs(args, runners, pixels, last):
    """The (model, mode) runs to time at this size, and the skipped ones with the reason."""
    active, skipped = [], {}
    for key in runners:
        if key in last:
            prev_pixels, prev_seconds = last[key]
            predicted = prev_seconds * (pixels / prev_pixels) ** GROWTH.get(key[0], 1.2)
            if predicted > args.max_seconds:
                skipped[key] = f'skipped: predicted {predicted:.0f} s per run > --max-seconds {args.max_seconds:g}'
                continue
        active.append(key)
    return active, skipped


def benchmark(args):
    from rich.progress import Progress

    device = torch.device(args.device)
    sizes = [parse_size(s) for s in args.sizes]
    runners = {(name, mode): BenchModel(args, name, device, mode, sizes[0])
               for name in args.models for mode in args.dtype}
    dtypes = dict.fromkeys(MODES[m][0] for m in args.dtype)           # in order, without repeats
    gemms = {DTYPE_NAMES[d]: gemm_runner(d, device, args.gemm_size) for d in dtypes}
    results, last, flops = [], {}, {}
    total = len(sizes) * (args.warmup + args.repeats) * (len(runners) + len(gemms))
    with Progress(transient=True) as progress:
        bar = progress.add_task('benchmark', total=total)
        for size in sizes:
            x = make_input(args, size, device)
            inputs = {m: x.to(input_dtype(m)) for m in args.dtype}
            pixels = size[0] * size[1]
            active, skipped = select_runs(args, runners, pixels, last)
            jobs = active + [('gemm', dtype) for dtype in gemms]
            times = {key: [] for key in jobs}
            for round_ in range(args.warmup + args.repeats):
                progress.update(bar, description=f'{size[0]}x{size[1]} round {round_ + 1}')
                for key in jobs:
                    progress.advance(bar)
                    if key in skipped:
                        continue
                    fn, inp = (gemms[key[1]][0], None) if key[0] == 'gemm' else (runners[key], inputs[key[1]])
                    try:
                        seconds = timed(fn, inp, device)
                    except (RuntimeError, MemoryError) as err:  # out of memory, or a mode the model cannot run
                        skipped[key] = f'skipped: {str(err).splitlines()[0][:80]}'
                        continue
                    if round_ >= args.warmup:
                        times[key].append(seconds)
            gemm_rate = {dtype: run[1] / statistics.median(times[('gemm', dtype)]) for dtype, run in gemms.items()}
            for key, runner in runners.items():
                name, mode = key
                dtype_name = DTYPE_NAMES[MODES[mode][0]]
                row = dict(model=name, size=f'{size[0]}x{size[1]}', pixels=pixels, batch=args.batch_size,
                           dtype=mode, device=str(device), params_m=runner.params / 1e6)
                if key in skipped:
                    row['note'] = skipped[key]
                    results.append(row)
                    continue
                median = statistics.median(times[key])
                last[key] = (pixels, median)
                progress.update(bar, description=f'{size[0]}x{size[1]} FLOPs/memory of {name} {mode}')
                if (name, size) not in flops:
                    flops[name, size] = count_flops(runner, size, device) * args.batch_size
                macs = flops[name, size]
                row.update(latency_ms=1e3 * median, min_ms=1e3 * min(times[key]), max_ms=1e3 * max(times[key]),
                           images_per_s=args.batch_size / median, gflops=macs / 1e9 / args.batch_size,
                           achieved_gflops_per_s=2 * macs / median / 1e9,
                           gemm_fraction=2 * macs / median / gemm_rate[dtype_name],
                           gemm_gflops_per_s=gemm_rate[dtype_name] / 1e9,
                           peak_memory_mb=peak_memory_mb(args, key, size, device) if args.memory else float('nan'),
                           note='')
                results.append(row)
    return results


def add_ratios(args, results):
    """``ratio_to_reference``: latency over ``--reference``'s in the same mode and size;
    ``speedup_over_fp32``: the same model's fp32 latency over this latency (same size)."""
    latency = {(r['model'], r['dtype'], r['size']): r['latency_ms'] for r in results if 'latency_ms' in r}
    nan = float('nan')
    for r in results:
        if 'latency_ms' in r:
            ref = latency.get((args.reference, r['dtype'], r['size']))
            fp32 = latency.get((r['model'], 'fp32', r['size']))
            r['ratio_to_reference'] = r['latency_ms'] / ref if ref else nan
            r['speedup_over_fp32'] = fp32 / r['latency_ms'] if fp32 else nan


def cpu_flags():
    """The CPU features that decide reduced-precision speed (AMX tiles, AVX-512 bf16/fp16)."""
    with open('/proc/cpuinfo') as f:
        flags = next((line.split(':', 1)[1].split() for line in f if line.startswith('flags')), [])
    return sorted(f for f in flags if f.startswith('amx') or f in ('avx512_bf16', 'avx512_fp16'))


def run_meta(args):
    device = torch.device(args.device)
    if device.type == 'cuda':
        processor, flags = torch.cuda.get_device_name(device), []
    else:
        with open('/proc/cpuinfo') as f:
            processor = next((line.split(':', 1)[1].strip() for line in f if line.startswith('model name')), 'cpu')
        flags = cpu_flags()
    return dict(command=' '.join(sys.argv), torch=torch.__version__, threads=torch.get_num_threads(),
                processor=processor, cpu_flags=flags, task=args.task, dtype=args.dtype,
                batch_size=args.batch_size, device=args.device, channels_last=args.channels_last,
                compile=args.compile, window_sizes=args.window_sizes)


def report(args, results, meta):
    os.makedirs(args.out_dir, exist_ok=True)
    add_ratios(args, results)
    header = (f'{"size":>10} {"model":>18} {"dtype":>9} {"latency ms":>11} {"min-max ms":>15} {"img/s":>7} '
              f'{"mem MB":>8} {"GFLOPs":>8} {"GFLOP/s":>8} {"%GEMM":>6} {"x " + args.reference:>10} {"fp32/this":>9}')
    print(header)
    for r in results:
        if 'latency_ms' not in r:
            print(f'{r["size"]:>10} {r["model"]:>18} {r["dtype"]:>9}   {r["note"]}')
            continue
        print(f'{r["size"]:>10} {r["model"]:>18} {r["dtype"]:>9} {r["latency_ms"]:>11.1f} '
              f'{r["min_ms"]:>7.0f}-{r["max_ms"]:<7.0f} {r["images_per_s"]:>7.2f} {r["peak_memory_mb"]:>8.0f} '
              f'{r["gflops"]:>8.1f} {r["achieved_gflops_per_s"]:>8.1f} {100 * r["gemm_fraction"]:>5.0f}% '
              f'{r["ratio_to_reference"]:>10.2f} {r["speedup_over_fp32"]:>9.2f}')
    for name in args.models:
        for mode in args.dtype:
            rows = [r for r in results if r['model'] == name and r['dtype'] == mode and 'latency_ms' in r]
            if len(rows) >= 2:
                slope = np.polyfit(np.log([r['pixels'] for r in rows]), np.log([r['latency_ms'] for r in rows]), 1)[0]
                print(f'{name} {mode}: latency ~ pixels^{slope:.2f} over {rows[0]["size"]}..{rows[-1]["size"]}')
    with open(osp.join(args.out_dir, 'results.json'), 'w') as f:
        json.dump(dict(meta=meta, results=results), f, indent=1)
    keys = ['model', 'size', 'pixels', 'batch', 'dtype', 'device', 'latency_ms', 'min_ms', 'max_ms', 'images_per_s',
            'peak_memory_mb', 'params_m', 'gflops', 'achieved_gflops_per_s', 'gemm_gflops_per_s', 'gemm_fraction',
            'ratio_to_reference', 'speedup_over_fp32', 'note']
    with open(osp.join(args.out_dir, 'results.csv'), 'w') as f:
        f.write(','.join(keys) + '\n')
        for r in results:
            f.write(','.join(str(r.get(k, '')) for k in keys) + '\n')
    plot(args, results, meta)
    written = 'results.csv, results.json, latency_memory.png'
    if args.window_sizes:
        report_window_sweep(args, results, meta)
        written += ', window_sizes.png'
    print(f'wrote {args.out_dir}/{written}')


def window_sweep_rows(args, results):
    """Per (window size, mode): Swin-T's and InLine-Swin-T's images/s and the speed-up of InLine."""
    per = {(r['model'], r['dtype']): r for r in results if 'latency_ms' in r}
    rows = []
    for mode in args.dtype:
        for w in args.window_sizes:
            swin, inline = per.get((f'swin-t-w{w}', mode)), per.get((f'inline-swin-t-w{w}', mode))
            if swin and inline:
                rows.append(dict(window=w, dtype=mode, swin_images_per_s=swin['images_per_s'],
                                 inline_images_per_s=inline['images_per_s'],
                                 speedup=swin['latency_ms'] / inline['latency_ms'],
                                 paper_speedup=PAPER_WINDOW_SPEEDUP.get(w, float('nan'))))
    return rows


def report_window_sweep(args, results, meta):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    rows = window_sweep_rows(args, results)
    print(f'{"window":>6} {"dtype":>9} {"Swin-T img/s":>12} {"InLine img/s":>12} {"speed-up":>8} {"paper (GPU)":>11}')
    for r in rows:
        print(f'{r["window"]:>6} {r["dtype"]:>9} {r["swin_images_per_s"]:>12.1f} {r["inline_images_per_s"]:>12.1f} '
              f'{r["speedup"]:>8.2f} {r["paper_speedup"]:>11.1f}')
    fig, (ax_fps, ax_ratio) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in args.dtype:
        sub = [r for r in rows if r['dtype'] == mode]
        windows = [r['window'] for r in sub]
        ax_fps.plot(windows, [r['swin_images_per_s'] for r in sub], 'o-', label=f'Swin-T {mode}')
        ax_fps.plot(windows, [r['inline_images_per_s'] for r in sub], 's-', label=f'InLine-Swin-T {mode}')
        ax_ratio.plot(windows, [r['speedup'] for r in sub], 'o-', label=f'measured, {mode}')
    paper = sorted(PAPER_WINDOW_SPEEDUP.items())
    ax_ratio.plot([w for w, _ in paper], [v for _, v in paper], 'k*--', label='paper Fig. 3 (GPU)')
    ax_ratio.axhline(1, color='grey', lw=0.8)
    for ax, label in ((ax_fps, 'images/s'), (ax_ratio, 'InLine-Swin-T / Swin-T throughput')):
        ax.set_xscale('log', base=2)
        ax.set_xticks(args.window_sizes, [str(w) for w in args.window_sizes])
        ax.set_xlabel('window size')
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"window sweep at {args.sizes[0]}, batch {meta['batch_size']}, {meta['device']} "
                 f"({meta['processor']}, {meta['threads']} threads)", fontsize=10)
    fig.tight_layout()
    fig.savefig(osp.join(args.out_dir, 'window_sizes.png'), dpi=110)


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
    for ax, (key, scale, label) in zip(axes, panels, strict=False):
        for name in args.models:
            for mode in args.dtype:
                rows = sorted((r for r in results if r['model'] == name and r['dtype'] == mode and r.get(key, 0) > 0),
                              key=lambda r: r['pixels'])
                if rows:
                    ax.plot([r['pixels'] / 1e6 for r in rows], [r[key] * scale for r in rows], 'o-',
                            label=name if len(args.dtype) == 1 else f'{name} {mode}')
        ax.set_xscale('log')
        ax.set_yscale('log')
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel('megapixels per image')
        ax.set_ylabel(label)
        ax.grid(True, which='both', alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{meta['task']}, {'/'.join(meta['dtype'])}, batch {meta['batch_size']}, {meta['device']} "
                 f"({meta['processor']}, {meta['threads']} threads)", fontsize=10)
    fig.tight_layout()
    fig.savefig(osp.join(args.out_dir, 'latency_memory.png'), dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', nargs='+', help='HxW sizes (default: 512x512 ... 2048x2048; 224x224 with '
                        '--window-sizes)')
    parser.add_argument('--models', nargs='+',
                        default=['inline-swin-t', 'inline-swin-s', 'inline-swin-b', 'swin-t', 'swin-s', 'swin-b',
                                 'swin-t-global'])
    parser.add_argument('--task', choices=['backbone', 'mask-rcnn', 'upernet'], default='backbone')
    parser.add_argument('--device', default='auto')
    parser.add_argument('--dtype', nargs='+', choices=list(MODES), default=['fp32'],
                        help='modes timed in the same rounds: fp32, bf16/fp16 (autocast), bf16-pure/fp16-pure '
                        '(model and input cast)')
    parser.add_argument('--batch-size', type=int, default=1)
    parser.add_argument('--channels-last', action='store_true')
    parser.add_argument('--compile', action='store_true', help='torch.compile every model')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--max-seconds', type=float, default=60., help='skip runs predicted to take longer')
    parser.add_argument('--no-memory', dest='memory', action='store_false', help='skip peak-memory probes')
    parser.add_argument('--gemm-size', type=int, help='side of the square GEMM yardstick (default: 8192 on CUDA, '
                        '2048 on CPU; smaller only for quick checks: small GEMMs run below peak)')
    parser.add_argument('--window-sizes', nargs='+', type=int,
                        help="the paper's Fig. 3: time swin-t-w{w} against inline-swin-t-w{w} for each w")
    parser.add_argument('--reference', default='swin-t', help='model that the ratio column divides by')
    parser.add_argument('--out-dir', default='outputs/benchmark')
    parser.add_argument('--from-json', help='re-print the table and re-draw the plot of a saved results.json')
    parser.add_argument('--memory-probe', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device == 'auto':
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    try:
        torch.device(args.device)
    except RuntimeError as err:
        raise SystemExit(f'--device {args.device!r}: {err}') from err
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        args.models = list(dict.fromkeys(r['model'] for r in saved['results']))
        args.dtype = list(dict.fromkeys(r['dtype'] for r in saved['results']))
        args.sizes = list(dict.fromkeys(r['size'] for r in saved['results']))
        args.window_sizes = saved['meta'].get('window_sizes')
        report(args, saved['results'], saved['meta'])
        return
    if args.window_sizes:
        if args.task != 'backbone':
            raise SystemExit('--window-sizes times backbones: drop --task')
        args.models = [f'{m}-w{w}' for w in args.window_sizes for m in ('swin-t', 'inline-swin-t')]
        args.reference = f'swin-t-w{args.window_sizes[0]}'
    args.sizes = args.sizes or (['224x224'] if args.window_sizes else SIZES)
    if any(m.startswith('swin-t-w') for m in args.models) and len(args.sizes) != 1:
        raise SystemExit('swin-t-w{w} models are built for one input size (timm clamps their windows to the '
                         'stage maps at that size): give exactly one --sizes')
    check_modes(args.dtype, torch.device(args.device))
    if args.memory_probe:
        memory_probe(args)
        return
    report(args, benchmark(args), run_meta(args))


if __name__ == '__main__':
    main()
