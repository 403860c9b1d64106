"""How a call is timed, on every device, for every row of the benchmark.

One method per device: on a CUDA GPU, CUDA events recorded on the current stream before and after the call, then a
synchronisation (the time between the two events on the GPU's timeline, which includes the GPU's idle waits for
the host's launches); on a CPU, the wall clock (``time.perf_counter``) around the call, which returns when the work
is done. Models are compared in interleaved rounds (:func:`interleaved`): one call of each per round, warm-up
rounds untimed, so that drifts of a shared machine (clock, other jobs) fall on all of them alike. Spans that no one
call holds (the training benchmark's, from one mmengine hook to another) are read on :func:`wall_clock`.
"""
import time

import torch


def time_call(fn, device):
    """Milliseconds of one call of ``fn()`` on ``device`` (CUDA events on a GPU, the wall clock elsewhere)."""
    if device.type == 'cuda':
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end)
    start = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - start)


def wall_clock(device):
    """``time.perf_counter()`` once the work queued on ``device`` is done (on a GPU: after a synchronisation), in
    seconds: the difference of two readings is the wall time of the work between them."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    return time.perf_counter()


def interleaved(calls, rounds, warmup, device):
    """Time each of ``calls`` (key -> ``fn()``) once per round, in order: ``warmup`` untimed rounds (compilation,
    caches, algorithm choice), then ``rounds`` timed ones. Returns ``(times, failed)``: key -> the timed rounds'
    milliseconds, and key -> the first line of the error of a call that raised RuntimeError or MemoryError (out
    of memory, a dtype the model cannot run), which is left out of the later rounds."""
    times, failed = {key: [] for key in calls}, {}
    for round_ in range(warmup + rounds):
        for key, fn in calls.items():
            if key in failed:
                continue
            try:
                ms = time_call(fn, device)
            except (RuntimeError, MemoryError) as err:
                failed[key] = str(err).strip().splitlines()[0][:80] if str(err).strip() else type(err).__name__
                if device.type == 'cuda':
                    torch.cuda.empty_cache()
                continue
            if round_ >= warmup:
                times[key].append(ms)
    return times, failed


def profile_call(fn, device, top=0):
    """``(launches, table)`` of one call: the CUDA kernels it launches (the profiler's count; None on a CPU) and,
    with ``top``, the profiler's table of the ``top`` kernels (CPU ops on a CPU) by their own summed time."""
    if device.type != 'cuda' and not top:
        return None, ''
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == 'cuda'
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize(device)
    events = prof.key_averages()
    table = events.table(sort_by='self_cuda_time_total' if cuda else 'self_cpu_time_total', row_limit=top) if top \
        else ''
    return (sum(e.count for e in events if e.device_type.name == 'CUDA') if cuda else None), table
