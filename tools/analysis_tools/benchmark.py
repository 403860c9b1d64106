"""Benchmark high-resolution inference: backbones and whole models, CPU and GPU, timed interleaved.

    python tools/analysis_tools/benchmark.py --models inline-swin-t mmdet:swin-t --sizes 800x1333 1024x1024
    python tools/analysis_tools/benchmark.py --from-json docs/benchmarks/cpu_fp32/results.json

``--help`` says what is measured, how, and the model names; the code is :mod:`inline_backbones.benchmark`.
"""
from inline_backbones.benchmark.cli import main
from inline_backbones.cli import run_tool

if __name__ == '__main__':
    run_tool(main, 'benchmark')
