"""Peak memory of one call, beyond the built model and its input.

On a CUDA GPU: ``torch.cuda.max_memory_allocated`` during the call minus ``memory_allocated`` before it, in this
process (the caching allocator's free blocks released first). On a CPU: the growth of the peak resident set size
(RSS) during the call, in a fresh process (:mod:`.memory_probe`, given the benchmark's own options for one model,
one mode, one size and one batch), so that the peaks of earlier work (imports, building models, other models'
calls) do not hide it.
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
    out = subprocess.run([sys.executable, '-m', f'{__package__}.memory_probe', *argv], capture_output=True, text=True,
                         env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    if out.returncode:
        return None
    return float(out.stdout.strip().splitlines()[-1])
