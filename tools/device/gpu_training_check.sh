#!/usr/bin/env bash
# The training device script: mmcv built with CUDA ops (timed), then real training iterations of the paper's
# configs through mmengine's Runner (tools/analysis_tools/benchmark_training.py) beside mmdet's/mmseg's own Swin-T, a torchrun
# launch, backbone times for the S/B rows, and the cost table (tools/analysis_tools/training_cost.py). Everything under $OUT.
#
#   bash tools/setup/fetch_gpu_wheels.sh                  # first, on a machine with PyPI access: fills .gpu_wheels/
#   OUT=/some/dir bash tools/device/gpu_training_check.sh  # on the GPU machine, from the repository root
#   DRY_RUN=1 OUT=/tmp/plan bash tools/device/gpu_training_check.sh   # anywhere: print the commands, run nothing
#
# The GPU machine (docs/training_cost.md): Python 3.12 with torch 2.11 + CUDA 13, nvcc, 16 cores, no network,
# no OpenMMLab package. So: the carried wheels of .gpu_wheels/ are installed into /tmp/site (PYTHONPATH), mmcv
# is built from its carried sdist by `tools/setup/setup_env.sh --mmcv-wheel --cuda` (MMCV_WITH_OPS=1 FORCE_CUDA=1,
# TORCH_CUDA_ARCH_LIST of the GPU, MAX_JOBS=nproc) within BUILD_BUDGET_S seconds, else with CPU ops only
# (--cpu-ops: enough for UperNet; Mask R-CNN's RoIAlign then has no CUDA kernel and its runs are skipped).
# MMCV_WHEEL=path/to/mmcv-*.whl skips the build (a wheel from an earlier run's $OUT, carried).
#
# Runs in priority order while the time budget lasts (BUDGET_S in all, each run capped by RUN_S): UperNet
# InLine-Swin-T and mmseg's Swin-T with fp16 and bf16 AmpOptimWrapper, padding-aware on (the configs' default)
# and off; the same for Mask R-CNN InLine-Swin-T 1x against mmdet's Swin-T multi-scale-crop config (same
# pipeline and batch) when mmcv has CUDA ops; one torchrun --nproc_per_node 1 --launcher pytorch launch; the
# backbones' forward + backward times (T/S/B, PVT T/S/M/L) for the derived rows. A run that does not fit is
# listed as skipped. ITERS (default 50) iterations per run, the first WARMUP (10) left out of the medians.
#
# Files under $OUT (the device tool brings back at most 8): log.txt (every command and its output),
# build.txt (the mmcv build: command, seconds, result), records.json (every record), cost_fp16.md and
# cost_bf16.md (tools/analysis_tools/training_cost.py's tables), summary.md (one line per run), and the mmcv wheel when it
# is under 16 MB.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"   # strict mode, $OUT, $ROOT (the working folder), $WHEELS, $SITE
RECORDS="${RECORDS:-/tmp/inline_records}"
BUDGET_S="${BUDGET_S:-540}"
BUILD_BUDGET_S="${BUILD_BUDGET_S:-270}"
RUN_S="${RUN_S:-120}"
ITERS="${ITERS:-50}"
WARMUP="${WARMUP:-10}"
DRY_RUN="${DRY_RUN:-}"
PY="${PYTHON:-python3}"
START=$SECONDS
mkdir -p "$OUT" "$RECORDS"
LOG="$OUT/log.txt"; : >"$LOG"
SUMMARY="$OUT/summary.md"; : >"$SUMMARY"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore

left() { echo $((BUDGET_S - (SECONDS - START))); }
say() { echo "[gpu_check $((SECONDS - START))s] $*" | tee -a "$LOG"; }
# Runs "$@" (logged), or only prints it under DRY_RUN.
run() {
  echo "+ $*" | tee -a "$LOG"
  [ -n "$DRY_RUN" ] && return 0
  "$@" >>"$LOG" 2>&1
}

# ---- 1. the carried wheels -----------------------------------------------------------------------------
if [ -z "$DRY_RUN" ]; then
  compgen -G "$WHEELS/*.whl" >/dev/null || { say "no wheels in $WHEELS: run tools/setup/fetch_gpu_wheels.sh and carry it"; exit 1; }
fi
run "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  "$WHEELS"/*.whl || { say "installing the carried wheels failed"; exit 1; }
export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "$DRY_RUN" ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOG" "$SUMMARY"
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda",
torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.get_device_name(0))' \
    | tee -a "$LOG" "$SUMMARY"
  nvcc --version | tail -n 2 | tee -a "$LOG"
fi

# ---- 2. mmcv: CUDA ops within the build budget, else CPU ops ----------------------------------------------
MMCV_OPS=cuda
build() {   # $1: --cuda or --cpu-ops, $2: seconds allowed
  local t0=$SECONDS rc
  echo "+ PYTHON=$PY PIP_NO_INDEX=1 PIP_FIND_LINKS=$WHEELS INLINE_CACHE=/tmp/inline_cache timeout $2" \
       "bash tools/setup/setup_env.sh --mmcv-wheel $1" | tee -a "$LOG" "$OUT/build.txt"
  [ -n "$DRY_RUN" ] && { MMCV_WHEEL_PATH=/tmp/inline_cache/mmcv.whl; return 0; }
  PYTHON="$PY" PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELS" INLINE_CACHE=/tmp/inline_cache MAX_JOBS="$(nproc)" \
    timeout "$2" bash tools/setup/setup_env.sh --mmcv-wheel "$1" >/tmp/build_out.txt 2>&1
  rc=$?
  cat /tmp/build_out.txt >>"$LOG"
  echo "rc=$rc seconds=$((SECONDS - t0)) ($1, budget $2 s)" | tee -a "$OUT/build.txt" "$SUMMARY"
  [ $rc -ne 0 ] && tail -n 60 /tmp/inline_cache/setup.log >>"$OUT/build.txt" 2>/dev/null
  MMCV_WHEEL_PATH="$(sed -n 's/^mmcv_wheel=//p' /tmp/build_out.txt | tail -n 1)"
  [ $rc -eq 0 ] && [ -n "$MMCV_WHEEL_PATH" ]
}
if [ -n "${MMCV_WHEEL:-}" ]; then
  MMCV_WHEEL_PATH="$MMCV_WHEEL"; say "mmcv: the carried wheel $MMCV_WHEEL (no build)"
elif ! build --cuda "$BUILD_BUDGET_S"; then
  say "mmcv with CUDA ops did not build within $BUILD_BUDGET_S s: CPU ops only (UperNet runs; Mask R-CNN skipped)"
  MMCV_OPS=cpu
  build --cpu-ops 240 || { say "mmcv did not build with CPU ops either: see build.txt"; exit 1; }
fi
run "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$MMCV_WHEEL_PATH" \
  || { say "installing $MMCV_WHEEL_PATH failed"; exit 1; }
if [ -z "$DRY_RUN" ]; then
  "$PY" -c 'import mmcv, mmdet, mmseg, mmengine; from mmcv.ops import get_compiling_cuda_version as v
print("mmcv", mmcv.__version__, "ops cuda:", v(), "mmengine", mmengine.__version__, "mmdet", mmdet.__version__,
"mmseg", mmseg.__version__)' 2>&1 | tee -a "$LOG" "$SUMMARY"
  size=$(stat -c %s "$MMCV_WHEEL_PATH" 2>/dev/null || echo 0)
  [ "$size" -lt 16000000 ] && [ -z "${MMCV_WHEEL:-}" ] && cp "$MMCV_WHEEL_PATH" "$OUT/"
fi

# ---- 3. the training matrix, in priority order ------------------------------------------------------------
UPER_T=mmseg_configs/inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
UPER_SWIN=mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
MASK_T=mmdet_configs/mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py
MASK_SWIN=mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py
n=0
# bench NAME SECONDS_CAP ARGS...: one tools/analysis_tools/benchmark_training.py run into $RECORDS/NAME.json if time is left.
bench() {
  local name="$1" cap="$2" rc; shift 2
  n=$((n + 1))
  local budget=$(( $(left) - 15 ))         # 15 s kept for the tables at the end
  [ "$budget" -gt "$cap" ] && budget=$cap
  if [ -z "$DRY_RUN" ] && [ "$budget" -lt 40 ]; then
    echo "| $name | skipped: $(left) s of the budget left |" | tee -a "$SUMMARY" "$LOG"; return 0
  fi
  if [ "$1" = -m ]; then     # a launcher module and its own arguments come first
    run timeout "$budget" "$PY" "$@" --out "$RECORDS/$name.json"
  else
    run timeout "$budget" "$PY" tools/analysis_tools/benchmark_training.py "$@" --out "$RECORDS/$name.json"
  fi
  rc=$?
  [ -n "$DRY_RUN" ] && return 0
  if [ -f "$RECORDS/$name.json" ]; then
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); print("| %s | %s | %.4f s/iter | %.4f s/step | %.0f MB |'\
' finite %s | %s | SyncBN %s |" % (sys.argv[2], r["amp"], r.get("median_s_per_iter", float("nan")), r["median_step_s"],'\
' r["peak_memory_mb"], r["losses_finite"], r.get("distributed", {}).get("wrapper", "-"),'\
' r.get("distributed", {}).get("syncbn_layers", "-")))' "$RECORDS/$name.json" "$name" | tee -a "$SUMMARY"
  else
    echo "| $name | failed (rc=$rc): see log.txt |" | tee -a "$SUMMARY"
  fi
}
COMMON=(--iters "$ITERS" --warmup "$WARMUP")
bench uper_inline_fp16_pa-on "$RUN_S" "$UPER_T" "${COMMON[@]}" --amp fp16
bench uper_swin_fp16 "$RUN_S" "$UPER_SWIN" "${COMMON[@]}" --amp fp16
if [ "$MMCV_OPS" = cuda ]; then
  bench mask_inline_fp16_pa-on "$RUN_S" "$MASK_T" "${COMMON[@]}" --amp fp16
  bench mask_swin_fp16 "$RUN_S" "$MASK_SWIN" "${COMMON[@]}" --amp fp16
else
  echo "| Mask R-CNN runs | skipped: mmcv has CPU ops only (RoIAlign needs its CUDA kernel on GPU tensors) |" \
    | tee -a "$SUMMARY"
fi
bench uper_inline_bf16_pa-on "$RUN_S" "$UPER_T" "${COMMON[@]}" --amp bf16
bench uper_swin_bf16 "$RUN_S" "$UPER_SWIN" "${COMMON[@]}" --amp bf16
bench uper_inline_fp16_pa-off "$RUN_S" "$UPER_T" "${COMMON[@]}" --amp fp16 --padding-aware off
# torchrun: DDP wrapping, NCCL and the heads' SyncBN on one GPU
bench uper_inline_fp16_torchrun "$RUN_S" -m torch.distributed.run --nproc_per_node 1 tools/analysis_tools/benchmark_training.py \
  "$UPER_T" --iters 20 --warmup 5 --amp fp16 --launcher pytorch
if [ "$MMCV_OPS" = cuda ]; then
  bench mask_inline_bf16_pa-on "$RUN_S" "$MASK_T" "${COMMON[@]}" --amp bf16
  bench mask_swin_bf16 "$RUN_S" "$MASK_SWIN" "${COMMON[@]}" --amp bf16
  bench mask_inline_fp16_pa-off "$RUN_S" "$MASK_T" "${COMMON[@]}" --amp fp16 --padding-aware off
fi
bench uper_inline_bf16_pa-off "$RUN_S" "$UPER_T" "${COMMON[@]}" --amp bf16 --padding-aware off
# InLine-PVT-T's schedules (fp16), beside mmdet's PVT-T RetinaNet
bench fpn_pvt-t_fp16 "$RUN_S" mmseg_configs/fpn_inline-pvt-t_8xb2-40k_ade20k-512x512.py "${COMMON[@]}" --amp fp16
if [ "$MMCV_OPS" = cuda ]; then
  bench mask_pvt-t_fp16 "$RUN_S" mmdet_configs/mask-rcnn_inline-pvt-t_fpn_1x_coco.py "${COMMON[@]}" --amp fp16
  bench retina_pvt-t_fp16 "$RUN_S" mmdet_configs/retinanet_inline-pvt-t_fpn_1x_coco.py "${COMMON[@]}" --amp fp16
  bench retina_pvt-t-mmdet_fp16 "$RUN_S" mmdet::pvt/retinanet_pvt-t_fpn_1x_coco.py "${COMMON[@]}" --amp fp16
fi
# backbone forward + backward at the training size, for the rows derived from T (fp16, the configs' --amp)
for cfg in mmdet_configs/mask-rcnn_inline-swin-{t,s,b}_fpn_ms-crop-1x_coco.py \
           mmseg_configs/inline-swin-{tiny,small,base}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py \
           mmdet_configs/{mask-rcnn,retinanet}_inline-pvt-{t,s,m,l}_fpn_1x_coco.py \
           mmseg_configs/fpn_inline-pvt-{t,s,m,l}_8xb2-40k_ade20k-512x512.py; do
  bench "backbone_$(basename "$cfg" .py)" 60 "$cfg" --backbone-only --iters 20 --warmup 5 --amp fp16
done

# ---- 4. the records and the cost tables -------------------------------------------------------------------
[ -n "$DRY_RUN" ] && { say "dry run: $n runs planned, nothing run"; exit 0; }
"$PY" -c 'import glob, json, os, sys
recs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))]
json.dump(recs, open(sys.argv[2], "w"), indent=1)
print(len(recs), "records")' "$RECORDS" "$OUT/records.json" | tee -a "$LOG"
for amp in fp16 bf16; do
  compgen -G "$RECORDS/*.json" >/dev/null && \
    "$PY" tools/analysis_tools/training_cost.py "$RECORDS"/*.json --amp "$amp" --out "$OUT/cost_$amp.md" >>"$LOG" 2>&1
done
say "done in $((SECONDS - START)) s"
