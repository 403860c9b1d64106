#!/usr/bin/env bash
# The backbone device script: the GPU tests (the Triton paths against the generic path and the reference at real
# sizes, CUDA-graph serving) and every benchmark of docs/benchmarks.md's GPU section
# (tools/analysis_tools/benchmark.py), everything under $OUT.
#
#   bash tools/setup/fetch_gpu_wheels.sh          # first, on a machine with PyPI access: fills .gpu_wheels/
#   OUT=/some/dir bash tools/device/gpu_backbone_check.sh   # on the GPU machine, from the repository root
#   DRY_RUN=1 OUT=/tmp/plan bash tools/device/gpu_backbone_check.sh   # anywhere: print the commands, run nothing
#
# The GPU machine has torch, triton and timm but no mmengine, which the benchmark's FLOP counts and the OpenMMLab
# tests use (the package itself imports none): the carried wheels of .gpu_wheels/ go into /tmp/site (PYTHONPATH). Through the device tool: carry [".gpu_wheels"], timeout_s 600.
# Files under $OUT: gpu.txt (GPU, driver, versions), gpu_tests.log, bench.log, and the runs merged by the benchmark's
# --from-json: results.json (every row), results.csv, results.md (the tables of docs/benchmarks.md), latency_memory.png.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"   # strict mode, $OUT, $ROOT (the working folder), $WHEELS, $SITE
BENCH="${BENCH_DIR:-/tmp/inline_bench}"
DRY_RUN="${DRY_RUN:-}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore

run() {   # "$@" (its output to $LOG_TO if set), or only its command line under DRY_RUN
  echo "+ $*"
  [ -n "$DRY_RUN" ] && return 0
  if [ -n "${LOG_TO:-}" ]; then "$@" >> "$LOG_TO" 2>&1; else "$@"; fi
}

run "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  "$WHEELS"/*.whl || { echo "installing the carried wheels of $WHEELS failed: run tools/setup/fetch_gpu_wheels.sh, carry it"; exit 1; }
export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "$DRY_RUN" ]; then
  nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
  "$PY" -c "import torch, triton, timm; print('torch', torch.__version__, 'triton', triton.__version__, 'timm', timm.__version__)" \
    | tee -a "$OUT/gpu.txt"
fi
LOG_TO="$OUT/gpu_tests.log" run timeout 150 "$PY" -m pytest -q -p no:cacheprovider -W ignore tests/test_gpu_paths.py \
  tests/test_serving.py tests/test_inline_paths.py
[ -n "$DRY_RUN" ] || tail -3 "$OUT/gpu_tests.log"

n=0
bench() {   # one benchmark run into $BENCH/<n>, its report appended to bench.log
  n=$((n + 1))
  LOG_TO="$OUT/bench.log" run timeout "${T:-100}" "$PY" tools/analysis_tools/benchmark.py --rounds 8 --warmup 3 \
    --no-flops --out-dir "$BENCH/$n" "$@"
}
bench --sizes 1120 --batches 1 8 --dtype bf16 --models inline-swin-t inline-swin-t@torch timm:swin-t
bench --sizes 448 2240 3136 4032 6048 --batches 1 --dtype bf16 --models inline-swin-t timm:swin-t
bench --sizes 1120 --batches 8 --dtype bf16 --padding-aware --models inline-swin-t inline-pvt-t
bench --sizes 1120 --batches 8 --dtype bf16 --models inline-pvt-t inline-pvt-t@torch timm:pvt-v2-b1
bench --sizes 1120 --batches 2 --dtype bf16 --train --models inline-swin-t inline-swin-t@torch timm:swin-t
bench --sizes 1120 --batches 2 --dtype fp16 --train --models inline-swin-t inline-swin-t@torch timm:swin-t
bench --sizes 1120 2240 --batches 1 --dtype bf16 --cuda-graphs --models inline-swin-t timm:swin-t
bench --sizes 1120 --batches 8 --dtype fp32 --models inline-swin-t inline-swin-t@torch timm:swin-t
bench --sizes 1120 2240 --batches 1 8 --dtype bf16 --models inline-swin-t flatten-swin-t timm:swin-t cswin-t-stripes \
  inline-cswin-t
bench --sizes 1120 --batches 8 --dtype bf16 --profile 12 --rounds 2 --warmup 2 --models inline-swin-t timm:swin-t
[ -n "$DRY_RUN" ] && exit 0

files=()
for i in $(seq 1 "$n"); do [ -f "$BENCH/$i/results.json" ] && files+=("$BENCH/$i/results.json"); done
"$PY" tools/analysis_tools/benchmark.py --from-json "${files[@]}" --out-dir "$OUT" >> "$OUT/bench.log" 2>&1
