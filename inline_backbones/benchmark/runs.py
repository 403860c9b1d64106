"""The benchmark's rows: options -> the models to time at each (size, batch), their calls, and one row per model and
mode with what was measured (:func:`benchmark`)."""
import contextlib
import functools
import statistics
import sys

import torch

from ..models.mixers.inline.paths import force_path
from . import memory, timing
from .names import build_backbone, build_task_model
from .options import MODES
from .report import COLUMNS

DTYPE_NAMES = {torch.float32: 'fp32', torch.bfloat16: 'bf16', torch.float16: 'fp16'}
# Growth of time with pixels, to predict whether the next size fits in --max-seconds (global softmax: quadratic).
GROWTH = {'swin-t-global': 2.0}


def input_dtype(mode):
    """The input's dtype in ``mode``: the mode's dtype in the pure modes, fp32 under autocast."""
    dtype, pure = MODES[mode]
    return dtype if pure else torch.float32


def padded_shapes(size, batch):
    """``batch`` image sizes (H, W) from ``size`` down to 60% of it in steps of 32 pixels, the first the full size,
    heights and widths falling in different orders (a padded batch of differently shaped images)."""
    def sides(n):
        return [n - round(0.4 * n * i / max(1, batch - 1) / 32) * 32 for i in range(batch)]

    heights, widths = sides(size[0]), sides(size[1])
    return [(h, max(32, widths[(batch - i) % batch])) for i, h in enumerate(heights)]


def make_input(size, batch, padded, device, channels_last=False):
    """A standard-normal batch of ``size`` images and each image's (H, W); ``padded``: the sizes of
    :func:`padded_shapes`, zero outside each image (bottom and right), as mmdet/mmseg pad a batch."""
    x = torch.randn(batch, 3, *size, device=device)
    shapes = padded_shapes(size, batch) if padded else [tuple(size)] * batch
    for i, (h, w) in enumerate(shapes):
        x[i, :, h:] = 0
        x[i, :, :, w:] = 0
    return (x.contiguous(memory_format=torch.channels_last) if channels_last else x), shapes


class Run:
    """One model in one ``--dtype`` mode, built for ``size`` and called on a batch: in eval or train mode, cast (pure
    modes) or under autocast, compiled or captured in a CUDA graph, with InLine's implementation forced
    (``NAME@path``), given each image's size (padding-aware models)."""

    def __init__(self, name, mode, size, shapes, args, device):
        self.name, self.device, self.train = name, device, args.train
        self.dtype, pure = MODES[mode]
        self.autocast = not pure and self.dtype != torch.float32
        self.input_dtype = input_dtype(mode)
        model = build_backbone(name, size) if args.task == 'backbone' else build_task_model(args.task, name)
        model = model.to(device, self.input_dtype)
        model.train(args.train)   # not chained: mmdet's SwinTransformer.train() returns None
        self.model = model.to(memory_format=torch.channels_last) if args.channels_last else model
        self.params = sum(p.numel() for p in self.model.parameters())
        self.kwargs = dict(image_shapes=torch.tensor(shapes)) if name.padding_aware else {}
        self.fn = torch.compile(self.model, dynamic=True) if args.compile else self.model
        self.graph = None
        if args.cuda_graphs:
            from ..deployment.cuda_graph import CUDAGraphBackbone

            example = torch.zeros(len(shapes), 3, *size, device=device, dtype=self.input_dtype)
            with self._path():
                self.graph = CUDAGraphBackbone(self.model, example, self.dtype if self.autocast else None)

    def _path(self):
        return force_path(self.name.path) if self.name.path else contextlib.nullcontext()

    def __call__(self, x):
        if self.graph is not None:
            return self.graph(x)
        grad = torch.enable_grad() if self.train else torch.no_grad()
        with self._path(), grad, torch.autocast(self.device.type, dtype=self.dtype, enabled=self.autocast):
            out = self.fn(x, **self.kwargs)
            if self.train:
                sum(o.float().mean() for o in out).backward()
                self.model.zero_grad(set_to_none=True)
        return out


def gemm_call(dtype, device, n=None):
    """A square n x n GEMM in ``dtype`` (n = 8192 on CUDA, 2048 on a CPU by default), the FLOP/s yardstick of the
    models run in that dtype: ``(fn, FLOPs of one call)``."""
    n = n or (8192 if device.type == 'cuda' else 2048)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    return (lambda: a @ b), 2 * n ** 3


def count_macs(run, size):
    """Multiply-adds of one forward of ``run``'s model on one image of ``size``."""
    from ..analysis.flops import flop_analyzer  # mmengine's FlopAnalyzer: imported where FLOPs are counted

    x = torch.randn(1, 3, *size, device=run.device, dtype=run.input_dtype)
    with torch.no_grad():
        return flop_analyzer(run.model, (x,)).total()


def _probe_argv(args, name, mode, size, batch):
    """The options of the fresh process that measures one run's CPU memory (:func:`.memory.cpu_peak_mb`)."""
    flags = [f for f, on in (('--channels-last', args.channels_last), ('--train', args.train),
                             ('--padding-aware', args.padding_aware)) if on]
    return ['--models', str(name), '--dtype', mode, '--sizes', f'{size[0]}x{size[1]}', '--batches', str(batch),
            '--task', args.task, *flags]


def _skips(args, keys, pixels, batch, last):
    """The runs (name, mode) predicted to take longer than ``--max-seconds`` at ``pixels``, from their time at the
    previous size (``last``), with the reason."""
    skipped = {}
    for name, mode in keys:
        if (str(name), mode, batch) in last:
            prev_pixels, prev_seconds = last[str(name), mode, batch]
            predicted = prev_seconds * (pixels / prev_pixels) ** GROWTH.get(str(name), 1.2)
            if predicted > args.max_seconds:
                skipped[name, mode] = (f'skipped: predicted {predicted:.0f} s per run > --max-seconds '
                                       f'{args.max_seconds:g}')
    return skipped


def benchmark(args, device):
    """Time ``args.models`` in every ``args.dtype`` mode at every size and batch, interleaved (:mod:`.timing`); one
    row (a dict) per (size, batch, model, mode), ratios not yet added (:func:`.report.add_ratios`)."""
    yardsticks = {}
    if args.flops and not args.train:
        for dtype in dict.fromkeys(MODES[m][0] for m in args.dtype):
            yardsticks[DTYPE_NAMES[dtype]] = gemm_call(dtype, device, args.gemm_size)
    capture = 'cuda-graphs' if args.cuda_graphs else 'compile' if args.compile else ''
    rows, last, macs = [], {}, {}
    for size in args.sizes:
        for batch in args.batches:
            torch.manual_seed(0)
            x, shapes = make_input(size, batch, args.padding_aware, device, args.channels_last)
            pixels = size[0] * size[1]
            keys = [(name, mode) for name in args.models for mode in args.dtype]
            skipped = _skips(args, keys, pixels, batch, last)
            runs = {key: Run(*key, size, shapes, args, device) for key in keys if key not in skipped}
            inputs = {mode: x.to(input_dtype(mode)) for mode in args.dtype}
            calls = {key: functools.partial(run, inputs[key[1]]) for key, run in runs.items()}
            calls.update({('gemm', dtype): fn for dtype, (fn, _) in yardsticks.items()})
            times, failed = timing.interleaved(calls, args.rounds, args.warmup, device)
            skipped.update({key: f'skipped: {error}' for key, error in failed.items()})
            gemm_rate = {d: flops / (1e-3 * statistics.median(times['gemm', d])) for d, (_, flops) in yardsticks.items()
                         if ('gemm', d) not in failed}
            for name, mode in keys:
                row = dict(dict.fromkeys(COLUMNS), model=str(name), size=f'{size[0]}x{size[1]}', pixels=pixels,
                           batch=batch, dtype=mode, device=device.type, step='train' if args.train else 'infer',
                           capture=capture, run=0, note='')
                rows.append(row)
                if (name, mode) in skipped:
                    row['note'] = skipped[name, mode]
                    continue
                run, ms = runs[name, mode], times[name, mode]
                median = statistics.median(ms)
                last[str(name), mode, batch] = (pixels, median / 1e3)
                row.update(latency_ms=median, min_ms=min(ms), max_ms=max(ms), images_per_s=batch * 1e3 / median,
                           params_m=run.params / 1e6)
                row['launches'], table = timing.profile_call(calls[name, mode], device, args.profile)
                if args.memory:
                    row['peak_memory_mb'] = memory.cuda_peak_mb(calls[name, mode], device) if device.type == 'cuda' \
                        else memory.cpu_peak_mb(_probe_argv(args, name, mode, size, batch))
                dtype_name = DTYPE_NAMES[MODES[mode][0]]
                if dtype_name in gemm_rate:
                    if (str(name), size) not in macs:
                        macs[str(name), size] = count_macs(run, size)
                    rate, gemm = 2 * macs[str(name), size] * batch / (median / 1e3), gemm_rate[dtype_name]
                    row.update(gflops=macs[str(name), size] / 1e9, achieved_gflops_per_s=rate / 1e9,
                               gemm_gflops_per_s=gemm / 1e9, gemm_fraction=rate / gemm)
                print(f'{row["size"]} b{batch} {mode} {row["step"]} {row["model"]}: {median:.2f} ms', file=sys.stderr,
                      flush=True)
                if table:
                    print(f'profile of {row["model"]}, {row["size"]}, batch {batch}, {mode}:\n{table}', flush=True)
            del runs, calls
            if device.type == 'cuda':
                torch.cuda.empty_cache()
    return rows


