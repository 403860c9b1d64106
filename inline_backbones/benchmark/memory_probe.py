"""The fresh process of a CPU memory measurement (:func:`.memory.cpu_peak_mb`): build one run of the benchmark's
options, reset the peak resident set size (Linux: 5 written to ``/proc/self/clear_refs`` sets ``VmHWM`` to the
current ``VmRSS``), call it once, print the growth of the peak in MiB.

    python -m inline_backbones.benchmark.memory_probe OPTIONS
"""
import sys

import torch

from .options import parse_args
from .runs import Run, make_input


def _status_kb(field):
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ':'))


def probe(argv):
    """The fresh process's work: build the run, reset the peak RSS, call it once, print the growth in MiB."""
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
