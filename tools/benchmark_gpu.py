"""GPU benchmark of the backbones: latency, kernel launches, peak memory and training steps, interleaved.

    python tools/benchmark_gpu.py [--sizes 448 1120 2240 6048] [--batches 1 8] [--dtype bf16]
        [--models inline-swin-t inline-swin-t@torch swin-t inline-pvt-t pvt-v2-b1]
        [--padding-aware] [--train] [--compile | --cuda-graphs] [--profile TOP] [--rounds 10] [--warmup 3]
        [--out-dir outputs/benchmark_gpu] [--from-json RESULTS]

Runs where mmdet is not installed (only torch, timm and this package's core). The references are timm's:
``swin-t`` is ``swin_tiny_patch4_window7_224`` with ``img_size`` set to the input (features of the four
stages; choose sizes divisible by 224 so that it needs no padding), ``pvt-v2-b1`` is timm's PVT v2-b1 (the
nearest PVT that timm has: mmdet's PVT v1 is not used here). ``NAME@torch`` forces InLine's ``'torch'``
path (:mod:`inline_backbones.models.mixers.inline_paths`), to compare the GPU path with the generic one in the
same run; ``NAME@reference`` the plain reference.

For every (size, batch), the models run interleaved (one forward each per round), ``--rounds`` rounds after
``--warmup``, timed with CUDA events (``perf_counter`` and a sync on a CPU); the median is reported with the
ratio to the first reference model (a name not starting with ``inline``; else the first model). Also per
model: CUDA kernel launches of one forward (the profiler's count; None on a CPU) and peak memory above the inputs.

``--padding-aware``: InLine models in padding-aware mode on a batch of images of ``batch`` different sizes
(from the full size down to 60% of it, zero-padded), against the same models in plain mode on the same batch.
``--train``: one forward + backward of the backbone (loss: the sum of the stage means), under the same autocast.
``--compile``: ``torch.compile(model, dynamic=True)`` for every model (warm-up includes compilation).
``--cuda-graphs``: every model captured once and replayed (:class:`inline_backbones.serving.CUDAGraphBackbone`;
plain mode, inference).
Writes ``results.json`` and a Markdown table ``results.md`` to ``--out-dir``; ``--from-json FILE`` prints the
table of a saved ``results.json`` (several runs' rows merged into one file print as one table).
"""
import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from inline_backbones import InLinePVT, InLineSwinTransformer  # noqa: E402
from inline_backbones.models.mixers.inline_paths import force_path  # noqa: E402
from inline_backbones.serving import CUDAGraphBackbone  # noqa: E402

DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16, 'fp16': torch.float16}


def build(name, size, padding_aware=False):
    """A backbone by name (see the module docstring) for ``size`` x ``size`` inputs."""
    import timm

    base = name.split('@')[0]
    if base == 'inline-swin-t':
        return InLineSwinTransformer('tiny', drop_path_rate=0., padding_aware=padding_aware)
    if base == 'inline-pvt-t':
        return InLinePVT('tiny', drop_path_rate=0., padding_aware=padding_aware)
    if base == 'swin-t':
        return timm.create_model('swin_tiny_patch4_window7_224', img_size=(size, size), features_only=True)
    if base == 'pvt-v2-b1':
        return timm.create_model('pvt_v2_b1', features_only=True)
    raise SystemExit(f'unknown model {name!r}')


class Runner:
    """One model: eval/train mode, forced path, autocast, compiled or not."""

    def __init__(self, name, model, args, device, train=False, image_shapes=None):
        self.name, self.device, self.train, self.image_shapes = name, device, train, image_shapes
        self.path = name.split('@')[1] if '@' in name else None
        self.model = model.to(device).train(train)
        self.fn = torch.compile(self.model, dynamic=True) if args.compile else self.model
        self.dtype = DTYPES[args.dtype]
        self.graph = None
        if args.cuda_graphs:
            with self._path():
                example = torch.zeros(args.example_shape, device=device)
                self.graph = CUDAGraphBackbone(self.model, example, None if self.dtype == torch.float32 else self.dtype)

    def _path(self):
        return force_path(self.path) if self.path else contextlib.nullcontext()

    def __call__(self, x):
        if self.graph is not None:
            return self.graph(x)
        grad = torch.enable_grad() if self.train else torch.no_grad()
        autocast = torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype != torch.float32)
        with self._path(), grad, autocast:
            kwargs = {} if self.image_shapes is None else dict(image_shapes=self.image_shapes)
            out = self.fn(x, **kwargs)
            if self.train:
                sum(o.float().mean() for o in out).backward()
                self.model.zero_grad(set_to_none=True)
        return out


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_once(fn, x, device):
    """Milliseconds of one call: CUDA events on a GPU, a synchronised wall clock on a CPU."""
    if device.type == 'cuda':
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end)
    t0 = time.perf_counter()
    fn(x)
    return 1e3 * (time.perf_counter() - t0)


def kernel_profile(fn, x, device, top=0):
    """CUDA kernels one call launches (the profiler's count; None on a CPU) and, with ``top``, a table of the
    ``top`` kernels by summed GPU time."""
    if device.type != 'cuda':
        return None, ''
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x)
        torch.cuda.synchronize(device)
    events = prof.key_averages()
    table = events.table(sort_by='self_cuda_time_total', row_limit=top) if top else ''
    return sum(e.count for e in events if e.device_type.name == 'CUDA'), table


def peak_memory_mb(fn, x, device):
    if device.type != 'cuda':
        return None
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn(x)
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20


def padded_shapes(size, batch):
    """``batch`` image sizes from ``size`` down to 60% of it (multiples of 32), the first the full size."""
    steps = [size - round(0.4 * size * i / max(1, batch - 1) / 32) * 32 for i in range(batch)]
    return [(s, max(32, steps[(batch - i) % batch])) for i, s in enumerate(steps)]


def runners_for(args, size, batch, device):
    """The models of one (size, batch) setting, with their input."""
    x = torch.randn(batch, 3, size, size, device=device)
    args.example_shape = tuple(x.shape)
    runners = []
    if args.padding_aware:
        shapes = padded_shapes(size, batch)
        for i, (h, w) in enumerate(shapes):   # zero outside each image, as in a padded batch
            x[i, :, h:] = 0
            x[i, :, :, w:] = 0
        for name in args.models:
            if name.startswith('inline'):
                runners.append(Runner(name, build(name, size), args, device, args.train))
                runners.append(Runner(name + ' (padding-aware)', build(name, size, padding_aware=True), args, device,
                                      args.train, image_shapes=shapes))
    else:
        runners = [Runner(name, build(name, size), args, device, args.train) for name in args.models]
    return runners, x


def benchmark(args, device):
    rows = []
    for size in args.sizes:
        for batch in args.batches:
            torch.manual_seed(0)
            runners, x = runners_for(args, size, batch, device)
            times = {r.name: [] for r in runners}
            for _ in range(args.warmup):
                for r in runners:
                    r(x)
            sync(device)
            for _ in range(args.rounds):
                for r in runners:
                    times[r.name].append(time_once(r, x, device))
            reference = next((r.name for r in runners if not r.name.startswith('inline')), runners[0].name)
            ref_ms = statistics.median(times[reference])
            for r in runners:
                med = statistics.median(times[r.name])
                row = dict(size=size, batch=batch, dtype=args.dtype, train=args.train,
                           compiled='cuda-graphs' if args.cuda_graphs else 'compile' if args.compile else False,
                           model=r.name, median_ms=med, min_ms=min(times[r.name]), max_ms=max(times[r.name]),
                           ratio=med / ref_ms, reference=reference, peak_mb=peak_memory_mb(r, x, device))
                row['launches'], table = kernel_profile(r, x, device, args.profile)
                rows.append(row)
                print(f'{size}^2 b{batch} {args.dtype} {"train" if args.train else "infer"} {r.name:32s} '
                      f'{med:9.2f} ms (x{row["ratio"]:.2f} {reference}) launches {row["launches"]} '
                      f'peak {row["peak_mb"] and round(row["peak_mb"])} MB', flush=True)
                if table:
                    print(table, flush=True)
            del runners
            if device.type == 'cuda':
                torch.cuda.empty_cache()
    return rows


def markdown(rows):
    lines = ['| size | batch | dtype | step | model | median ms | min-max | x ref | launches | peak MB |',
             '|---|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        peak = '' if r['peak_mb'] is None else f'{r["peak_mb"]:.0f}'
        lines.append(f'| {r["size"]}^2 | {r["batch"]} | {r["dtype"]} | {"train" if r["train"] else "infer"}'
                     f'{" " + r["compiled"] if r["compiled"] else ""} | {r["model"]} | {r["median_ms"]:.2f} | '
                     f'{r["min_ms"]:.2f}-{r["max_ms"]:.2f} | {r["ratio"]:.2f} | {r["launches"]} | {peak} |')
    return '\n'.join(lines) + '\n'


def parse_args(argv=None):
    """The command line (``argv``: a list, or ``sys.argv``), checked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', nargs='+', type=int, default=[448, 1120, 2240])
    parser.add_argument('--batches', nargs='+', type=int, default=[1, 8])
    parser.add_argument('--dtype', choices=list(DTYPES), default='bf16')
    parser.add_argument('--models', nargs='+', default=['inline-swin-t', 'inline-swin-t@torch', 'swin-t'])
    parser.add_argument('--padding-aware', action='store_true')
    parser.add_argument('--train', action='store_true')
    group = parser.add_mutually_exclusive_group()
    group.add_argument('--compile', action='store_true')
    group.add_argument('--cuda-graphs', action='store_true')
    parser.add_argument('--profile', type=int, default=0, metavar='TOP',
                        help='print the TOP kernels of one forward by GPU time, per model')
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--out-dir', default='outputs/benchmark_gpu')
    parser.add_argument('--from-json', metavar='RESULTS', help='print the Markdown table of a saved results.json')
    args = parser.parse_args(argv)
    if args.cuda_graphs and (args.train or args.padding_aware):
        parser.error('--cuda-graphs captures plain-mode inference: not with --train or --padding-aware')
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        print(f'{saved["meta"]["device"]}, torch {saved["meta"]["torch"]}\n\n' + markdown(saved['results']), end='')
        return saved['results']
    device = torch.device(args.device)
    rows = benchmark(args, device)
    meta = dict(torch=torch.__version__, python=platform.python_version(),
                device=torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor(),
                args=vars(args))
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, 'results.json'), 'w') as f:
        json.dump(dict(meta=meta, results=rows), f, indent=1)
    with open(os.path.join(args.out_dir, 'results.md'), 'w') as f:
        f.write(f'{meta["device"]}, torch {meta["torch"]}\n\n' + markdown(rows))
    return rows


if __name__ == '__main__':
    main()
