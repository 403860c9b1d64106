"""What the training benchmark measures per iteration, and its summary.

* the train step: from the first ``before_train_iter`` hook to the first ``after_train_iter`` hook (the model's
  ``train_step``: forward, backward, optimizer step), on :func:`~.timing.wall_clock` (CUDA-synchronised on a GPU);
* the whole iteration: between consecutive ``after_train_iter`` calls (data loading and every hook included);
* the logged losses and the AMP loss scale;
* the peak memory of the step (:func:`peak_mb`).
"""
import math
import resource
import statistics

import torch

from .timing import wall_clock


def measured_device():
    """The device the benchmark's timings wait for: the GPU where there is one, else the CPU."""
    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')


def reset_peak(device):
    """Start a step's peak memory (the CUDA allocator's; a CPU's peak RSS cannot be reset)."""
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats()


def peak_mb(device):
    """MiB at the peak since :func:`reset_peak`: ``torch.cuda.max_memory_allocated`` on a GPU; on a CPU the whole
    process's peak resident set size so far (``ru_maxrss``), labelled :func:`peak_memory_kind`."""
    if device.type == 'cuda':
        return round(torch.cuda.max_memory_allocated() / 2 ** 20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def peak_memory_kind(device):
    """What :func:`peak_mb` reads on ``device``, as the record names it."""
    return 'torch.cuda.max_memory_allocated' if device.type == 'cuda' else 'cpu_max_rss (whole process)'


def make_recorder():
    """An mmengine hook recording each iteration's step time, wall time, losses, loss scale and peak memory in its
    ``rows``."""
    from mmengine.hooks import Hook

    class IterationRecorder(Hook):
        priority = 'HIGHEST'

        def __init__(self):
            self.rows, self._start, self._last = [], None, None
            self.device = measured_device()

        def before_train(self, runner):
            self._last = wall_clock(self.device)

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            reset_peak(self.device)
            self._start = wall_clock(self.device)

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            now = wall_clock(self.device)
            losses = {k: float(v.detach() if isinstance(v, torch.Tensor) else v) for k, v in (outputs or {}).items()}
            scaler = getattr(runner.optim_wrapper, 'loss_scaler', None)
            self.rows.append(dict(iter=runner.iter + 1, step_s=now - self._start, iter_s=now - self._last,
                                  losses=losses, peak_mb=peak_mb(self.device),
                                  loss_scale=float(scaler.get_scale()) if scaler is not None else None))
            self._last = now

    return IterationRecorder()


def summarise(rows, warmup):
    """The record's summary of the rows after ``warmup``: median seconds per iteration and per step, the steps'
    range, the peak memory (of all rows), whether every loss was finite, the first and last loss."""
    measured = rows[warmup:]
    loss_values = [v for r in rows for k, v in r['losses'].items() if 'loss' in k]
    return dict(
        median_s_per_iter=statistics.median(r['iter_s'] for r in measured),
        median_step_s=statistics.median(r['step_s'] for r in measured),
        min_step_s=min(r['step_s'] for r in measured), max_step_s=max(r['step_s'] for r in measured),
        peak_memory_mb=max(r['peak_mb'] for r in rows),
        losses_finite=bool(loss_values) and all(math.isfinite(v) for v in loss_values),
        first_loss=rows[0]['losses'].get('loss'), last_loss=rows[-1]['losses'].get('loss'))
