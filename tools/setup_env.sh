#!/usr/bin/env bash
# Create (or update) the project's virtual environment with the pinned OpenMMLab 2.0 stack.
#
#   bash tools/setup_env.sh                 # venv in <repo>/.venv
#   VENV=path/to/venv bash tools/setup_env.sh   # relative paths are relative to the caller's directory
#   bash tools/setup_env.sh --plan          # resolve paths and the wheel-cache key, print the plan, do nothing
#
# mmcv 2.1.0 has no wheel with compiled ops for torch 2.14, so it is built from the sdist once (about
# 10 minutes on 2 cores), with -std=c++17 patched to -std=c++20 (torch 2.14 headers need it), and the
# wheel is cached in $INLINE_CACHE (default ~/.cache/inline_backbones). The cache folder is keyed on a
# hash of the build recipe (mmcv version, patch, build flags, torch version, CUDA/CPU flavour, Python
# version and the text of build_mmcv below), so editing the recipe means a rebuild on the next run,
# in CI included: a broken cold path cannot hide behind a wheel built by an older recipe.
set -euo pipefail

# ---- every path resolved once, here -------------------------------------------------------------
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
VENV="$(abspath "${VENV:-$ROOT/.venv}")"
CACHE="$(abspath "${INLINE_CACHE:-$HOME/.cache/inline_backbones}")"
REQ="$ROOT/requirements.txt"
REQ_TEST="$ROOT/requirements-test.txt"
STAMP="$VENV/.inline_setup_done"
LOG="$CACHE/setup.log"
MODE="${1:-install}"
case "$MODE" in install|--plan) ;; *) echo "usage: bash tools/setup_env.sh [--plan]" >&2; exit 2 ;; esac

MMCV_VERSION=2.1.0
SUPPORTED_PY="3.11"        # the pinned torch/mmcv stack is verified on CPython 3.11 only
MMCV_PATCH='s/-std=c++17/-std=c++20/g'
MAX_JOBS="${MAX_JOBS:-$(nproc)}"

die() { echo "[setup] error: $*" >&2; exit 1; }
pin() { grep -E "^$1==" "$REQ" || die "no '$1==' pin in $REQ"; }
pin_version() { pin "$1" | cut -d= -f3; }

# ---- which Python builds the venv: $PYTHON, else python3.11, else python3 if it is 3.11 ----------
py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
find_python() {
  local cand
  for cand in ${PYTHON:-} python3.11 python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    [ "$(py_version "$cand")" = "$SUPPORTED_PY" ] && { command -v "$cand"; return 0; }
  done
  return 1
}
if [ -x "$VENV/bin/python" ]; then
  PY="$VENV/bin/python"
  [ "$(py_version "$PY")" = "$SUPPORTED_PY" ] || die "$VENV has Python $(py_version "$PY"); supported: \
$SUPPORTED_PY. Remove $VENV or point VENV elsewhere."
else
  PY="$(find_python)" || die "no Python $SUPPORTED_PY found (tried ${PYTHON:+\$PYTHON=$PYTHON, }python3.11, \
python3 = $(py_version python3 || echo none)). Supported: Python $SUPPORTED_PY (torch $(pin_version torch) \
+ mmcv $MMCV_VERSION built here). Install it, or set PYTHON=/path/to/python3.11."
fi

# ---- the build recipe and its cache key ---------------------------------------------------------
if command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  FLAVOUR=cuda$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
else
  FLAVOUR=cpu
fi
TORCH_V="$(pin_version torch)"

# Builds mmcv's wheel from the sdist into $1 (a fresh folder), logging to $LOG.
build_mmcv() {
  local out="$1" build src
  build="$(mktemp -d)"
  run_logged "pip download mmcv==$MMCV_VERSION (sdist)" \
    "$VENV/bin/python" -m pip download --no-deps --no-build-isolation --no-binary :all: -d "$build" "mmcv==$MMCV_VERSION"
  tar -xzf "$build/mmcv-$MMCV_VERSION.tar.gz" -C "$build"
  src="$build/mmcv-$MMCV_VERSION"
  # torch 2.14 headers need C++20; mmcv passes -std=c++17 after torch's flags, so CXXFLAGS cannot override it.
  sed -i "$MMCV_PATCH" "$src/setup.py"
  grep -q -- '-std=c++20' "$src/setup.py" || die "could not patch $src/setup.py for C++20"
  local force_cuda=0; [ "$FLAVOUR" = cpu ] || force_cuda=1
  (cd "$src" && run_logged "pip wheel mmcv (MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda MAX_JOBS=$MAX_JOBS)" \
     env MMCV_WITH_OPS=1 FORCE_CUDA="$force_cuda" MAX_JOBS="$MAX_JOBS" \
     "$VENV/bin/python" -m pip wheel --no-build-isolation --no-deps -w "$out" .)
  rm -rf "$build"
}
RECIPE_KEY="$( { echo "mmcv=$MMCV_VERSION torch=$TORCH_V flavour=$FLAVOUR py=$SUPPORTED_PY patch=$MMCV_PATCH"
                 declare -f build_mmcv; } | sha1sum | cut -c1-12)"
WHEEL_DIR="$CACHE/mmcv-$MMCV_VERSION-torch$TORCH_V-$FLAVOUR-py${SUPPORTED_PY/./}-$RECIPE_KEY"
# The stamp covers everything that decides the venv's content.
SETUP_HASH="$(cat "$REQ" "$REQ_TEST" "${BASH_SOURCE[0]}" | sha1sum | cut -c1-12)"

have_wheel() { compgen -G "$WHEEL_DIR/mmcv-*.whl" >/dev/null; }
venv_current() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SETUP_HASH" ]; }

if [ "$MODE" = --plan ]; then
  echo "root=$ROOT"
  echo "venv=$VENV"
  echo "python=$PY ($(py_version "$PY"))"
  echo "cache=$CACHE"
  echo "flavour=$FLAVOUR"
  echo "recipe_key=$RECIPE_KEY"
  echo "wheel_dir=$WHEEL_DIR"
  if venv_current; then echo "venv_up_to_date=yes"; echo "build_mmcv=no"
  else echo "venv_up_to_date=no"; echo "build_mmcv=$(have_wheel && echo no || echo yes)"; fi
  exit 0
fi

if venv_current; then
  echo "[setup] $VENV is up to date"
  exit 0
fi

# ---- failure output: the step, the command, the log tail, what to try ---------------------------
mkdir -p "$CACHE"
# Runs "$@" with output appended to $LOG; on failure prints what failed and exits.
run_logged() {
  local what="$1"; shift
  echo "[setup] $what" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    {
      echo "[setup] FAILED: $what"
      echo "[setup] command: $*"
      echo "[setup] last 40 lines of $LOG:"
      tail -n 40 "$LOG" | sed 's/^/    /'
      echo "[setup] what to try: read the full log above; check that the PyPI registry is reachable" \
           "(pip download mmcv==$MMCV_VERSION), that gcc/g++ and the Python $SUPPORTED_PY headers are" \
           "installed, and that the disk has a few GB free; then rerun the same command (finished steps" \
           "are kept). 'bash tools/setup_env.sh --plan' shows the paths in use."
    } >&2
    exit 1
  fi
}
: >"$LOG"

[ -x "$VENV/bin/python" ] || { echo "[setup] creating $VENV with $PY"; run_logged "create venv" "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
run_logged "upgrade pip/setuptools" "${PIP[@]}" install --upgrade "pip>=24" "setuptools>=77.0.3,<81" wheel

echo "[setup] torch / torchvision"
run_logged "install torch" "${PIP[@]}" install "$(pin torch)" "$(pin torchvision)" "numpy>=2,<2.5"

if ! have_wheel; then
  echo "[setup] building mmcv $MMCV_VERSION ($FLAVOUR) from source into $WHEEL_DIR (about 10 min on 2 cores)"
  run_logged "install mmcv build deps" "${PIP[@]}" install "$(pin mmengine)" ninja psutil
  tmp_wheels="$WHEEL_DIR.partial.$$"
  rm -rf "$tmp_wheels"; mkdir -p "$tmp_wheels"
  build_mmcv "$tmp_wheels"
  rm -rf "$WHEEL_DIR"; mv "$tmp_wheels" "$WHEEL_DIR"      # only a finished build lands in the cache
fi
echo "[setup] mmcv from $WHEEL_DIR"
run_logged "install mmcv wheel" "${PIP[@]}" install --no-deps "$WHEEL_DIR"/mmcv-*.whl

echo "[setup] OpenMMLab stack and test tools"
grep -vE '^(openmim|torch|torchvision|mmcv)==' "$REQ" > "$VENV/.req-rest.txt"
run_logged "install requirements" "${PIP[@]}" install -r "$VENV/.req-rest.txt" -r "$REQ_TEST" \
  "$(pin torch)" "$(pin torchvision)" "mmcv==$MMCV_VERSION"
# openmim's opendatalab dependency pins setuptools 60 and downgrades torch: install it alone.
run_logged "install openmim" "${PIP[@]}" install --no-deps "$(pin openmim)"
run_logged "install inline_backbones (editable)" "${PIP[@]}" install --no-deps --no-build-isolation -e "$ROOT"

run_logged "import check" "$VENV/bin/python" -c '
import torch, mmcv, mmengine, mmdet, mmseg, timm
from mmcv.ops import RoIAlign, nms  # compiled ops must import
import inline_backbones'
"$VENV/bin/python" -c 'import torch, mmcv, mmengine, mmdet, mmseg
print(f"[setup] torch {torch.__version__}, mmcv {mmcv.__version__}, mmengine {mmengine.__version__}, "
      f"mmdet {mmdet.__version__}, mmseg {mmseg.__version__}")'
echo "$SETUP_HASH" > "$STAMP"
echo "[setup] done: $VENV"
