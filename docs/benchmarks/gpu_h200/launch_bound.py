"""Is batch 1 bound by the host? Per model at 1120x1120, fp16 autocast: the host time to enqueue one forward (no
sync), the time until the GPU is done (sync), and the number of CUDA kernels one forward launches."""
import os
import statistics
import sys
import time

import timm
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.getcwd())
from inline_backbones import InLinePVT, InLineSwinTransformer  # noqa: E402

dev = torch.device('cuda')
OUT = os.environ.get('OUT', '.')
h = w = 1120
models = {'inline-swin-t': InLineSwinTransformer(arch='tiny'),
          'swin-t (timm)': timm.create_model('swin_tiny_patch4_window7_224', img_size=(h, w), features_only=True),
          'inline-pvt-t': InLinePVT(arch='tiny')}
lines = []
for batch in (1, 8):
    x = torch.randn(batch, 3, h, w, device=dev)
    for name, m in models.items():
        m = m.to(dev).eval()
        with torch.no_grad(), torch.autocast('cuda', dtype=torch.float16):
            for _ in range(5):
                m(x)
            torch.cuda.synchronize()
            enqueue, total = [], []
            for _ in range(20):
                t0 = time.perf_counter()
                m(x)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                enqueue.append(t1 - t0)
                total.append(t2 - t0)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                m(x)
                torch.cuda.synchronize()
        kernels = sum(e.count for e in prof.key_averages() if e.device_type.name == 'CUDA')
        gpu_ms = sum(e.self_device_time_total for e in prof.key_averages() if e.device_type.name == 'CUDA') / 1e3
        line = (f'b{batch} {name:14s} host enqueue {1e3 * statistics.median(enqueue):6.2f} ms, until done '
                f'{1e3 * statistics.median(total):6.2f} ms, kernels {kernels}, summed kernel time {gpu_ms:6.2f} ms')
        print(line, flush=True)
        lines.append(line)
open(os.path.join(OUT, 'launch_bound.log'), 'w').write('\n'.join(lines) + '\n')
