"""Whole-model latency and peak memory of segmentors and detectors: eager PyTorch against the exported file in
onnxruntime and OpenVINO, each runtime alone in its own process, interleaved rounds, medians.

    python tools/analysis_tools/benchmark_deployed.py CONFIG [CONFIG ...] [--megapixels 1 4 16]
        [--runtimes eager onnxruntime:fp32 openvino:fp32 openvino:bf16] [--rounds 3]
        [--out-dir outputs/benchmark_deployed]

Writes results.json, results.md and latency.png under ``--out-dir``; the method:
``inline_backbones/benchmark/deployed.py``.
"""
import sys

from inline_backbones.benchmark.deployed import main
from inline_backbones.cli import run_tool

if __name__ == '__main__':
    sys.exit(run_tool(main, 'benchmark_deployed'))
