"""Peak memory of one call, beyond the built model and its input.

On a CUDA GPU: ``torch.cuda.max_memory_allocated`` during the call minus ``memory_allocated`` before it, in this
process (the caching allocator's free blocks released first). On a CPU: the growth of the peak resident set size
(RSS) during the call, in a fresh process (``python -m inline_backbones.benchmark.memory OPTIONS``, the benchmark's
own options for one model, one mode, one size and one batch), so that the peaks of earlier work (imports, building
models, other models' calls) do not hide it: Linux resets a process's peak RSS (``VmHWM``) to its current RSS when
5 is written to ``/proc/self/clear_refs``.
"""
import os
import subprocess
import sys

import torch


def cuda_peak_mb(fn, device):
    """MiB that one call of ``fn()`` allocates on ``device`` at its peak, beyond what was allocated before it."""
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20


def cpu_peak_mb(argv):
    """MiB of peak-RSS growth during one call of the run that the benchmark options ``argv`` describe (one model,
    mode, size, batch), measured in a fresh process; None if that process fails."""
    out = subprocess.run([sys.executable, '-m', __name__, *argv], capture_output=True, text=True,
                         env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    if out.returncode:
        return None
    return float(out.stdout.strip().splitlines()[-1])


def _status_kb(field):
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ':'))


def probe(argv):
    """The fresh process's work: build the run, reset the peak RSS, call it once, print the growth in MiB."""
    from .options import parse_args
    from .runs import Run, make_input

    args = parse_args(['--device', 'cpu', *argv])
    device = torch.device('cpu')
    size, batch, mode = args.sizes[0], args.batches[0], args.dtype[0]
    x, shapes = make_input(size, batch, args.padding_aware, device, args.channels_last)
    run = Run(args.models[0], mode, size, shapes, args, device)
    x = x.to(run.input_dtype)
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    before = _status_kb('VmRSS')
    run(x)
    print((_status_kb('VmHWM') - before) / 1024)


if __name__ == '__main__':
    probe(sys.argv[1:])
