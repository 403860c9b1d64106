"""Training iterations of a detection or segmentation config through mmengine's Runner, measured.

    python tools/analysis_tools/benchmark_training.py CONFIG [--iters 50] [--warmup 10] [--amp fp16|bf16|none]
        [--padding-aware on|off|config] [--batch-size N] [--workers N] [--launcher none|pytorch]
        [--out FILE] [--work-dir DIR] [--num-images 32] [--seed 0] [--scale-down F] [--backbone-only]
    torchrun --nproc_per_node 1 tools/analysis_tools/benchmark_training.py CONFIG --launcher pytorch ...

``--help`` lists the options; what it measures, how, and the record it writes: the code,
:mod:`inline_backbones.benchmark.training`.
"""
from inline_backbones.benchmark.training import main
from inline_backbones.cli import run_tool

if __name__ == '__main__':
    run_tool(main, 'benchmark_training')
