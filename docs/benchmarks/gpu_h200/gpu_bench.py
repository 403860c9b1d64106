"""The script of docs/benchmarks.md's GPU section, as run (from the repository root, with mmengine and timm
installed; no mmdet or mmcv needed): InLine-Swin-T / InLine-PVT-T against timm's Swin-T (window 7), fp32 / bf16 /
fp16 autocast, batch 1 and 8, interleaved rounds, CUDA events, median after warm-up; plus the accuracy of bf16 and
fp16 against fp32."""
import json
import os
import platform
import statistics
import sys
import time

import timm
import torch

sys.path.insert(0, os.getcwd())
from inline_backbones import InLinePVT, InLineSwinTransformer  # noqa: E402

OUT = os.environ.get('OUT', '.')
dev = torch.device('cuda')
torch.manual_seed(0)
# sizes divisible by 32 * 7, so that timm's Swin-T (window 7) needs no padding at any stage
SIZES = [(896, 1344), (1120, 1120), (2016, 2016)]
MODES = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}
ROUNDS, WARMUP = 10, 3
log = open(os.path.join(OUT, 'gpu_bench.log'), 'w')


def say(*a):
    print(*a, flush=True)
    print(*a, file=log, flush=True)


def gemm_rate(dtype, n=8192):
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        a @ b
    e.record()
    torch.cuda.synchronize()
    return 2 * n ** 3 * 10 / (s.elapsed_time(e) / 1e3) / 1e12


def models_for(h, w):
    return {
        'inline-swin-t': InLineSwinTransformer(arch='tiny'),
        'swin-t (timm)': timm.create_model('swin_tiny_patch4_window7_224', img_size=(h, w), features_only=True),
        'inline-pvt-t': InLinePVT(arch='tiny'),
    }


def run(model, x, dtype):
    with torch.no_grad(), torch.autocast('cuda', dtype=dtype, enabled=dtype is not None):
        return model(x)


results = []
say(f'torch {torch.__version__}, timm {timm.__version__}, {torch.cuda.get_device_name()}, '
    f'python {platform.python_version()}')
say(f'matmul TF32 {torch.backends.cuda.matmul.allow_tf32}, cudnn TF32 {torch.backends.cudnn.allow_tf32}')
rates = {k: gemm_rate(v or torch.float32) for k, v in MODES.items()}
say('8192^3 GEMM TFLOP/s: ' + ', '.join(f'{k} {v:.0f}' for k, v in rates.items()))
t0 = time.time()
for h, w in SIZES:
    models = {k: m.to(dev).eval() for k, m in models_for(h, w).items()}
    for batch in (1, 8):
        x = torch.randn(batch, 3, h, w, device=dev)
        for mode, dtype in MODES.items():
            times = {k: [] for k in models}
            for _ in range(WARMUP):
                for m in models.values():
                    run(m, x, dtype)
            torch.cuda.synchronize()
            for _ in range(ROUNDS):
                for k, m in models.items():
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    run(m, x, dtype)
                    e.record()
                    torch.cuda.synchronize()
                    times[k].append(s.elapsed_time(e))
            mem = {}
            for k, m in models.items():
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                run(m, x, dtype)
                torch.cuda.synchronize()
                mem[k] = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
            ref = statistics.median(times['swin-t (timm)'])
            for k in models:
                med = statistics.median(times[k])
                row = dict(size=f'{h}x{w}', batch=batch, mode=mode, model=k, median_ms=med, min_ms=min(times[k]),
                           max_ms=max(times[k]), x_swin_t=med / ref, peak_mb=mem[k])
                results.append(row)
                say(f'{h}x{w} b{batch} {mode:4s} {k:14s} {med:8.2f} ms ({min(times[k]):.2f}-{max(times[k]):.2f})'
                    f'  x Swin-T {med / ref:.2f}  peak {mem[k]:.0f} MB')
    # accuracy of the reduced precisions against fp32, InLine-Swin-T and InLine-PVT-T, batch 1
    x = torch.randn(1, 3, h, w, device=dev)
    for k in ('inline-swin-t', 'inline-pvt-t'):
        ref_out = run(models[k], x, None)
        for mode in ('bf16', 'fp16'):
            out = run(models[k], x, MODES[mode])
            errs = [float((o.float() - r).norm() / r.norm()) for o, r in zip(out, ref_out, strict=True)]
            finite = all(bool(torch.isfinite(o).all()) for o in out)
            results.append(dict(size=f'{h}x{w}', model=k, mode=mode, rel_l2_per_stage=errs, finite=finite))
            say(f'{h}x{w} {k} {mode} vs fp32: relative L2 per stage ' + ' '.join(f'{e:.1e}' for e in errs)
                + f', finite {finite}')
    del models
    torch.cuda.empty_cache()
say(f'total {time.time() - t0:.0f} s')
json.dump(dict(torch=torch.__version__, device=torch.cuda.get_device_name(), gemm_tflops=rates, rounds=ROUNDS,
               warmup=WARMUP, results=results), open(os.path.join(OUT, 'gpu_bench.json'), 'w'), indent=1)
