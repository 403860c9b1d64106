#!/usr/bin/env bash
# Create (or update) the project's virtual environment with one pinned OpenMMLab 2.0 line.
#
#   bash tools/setup/setup_env.sh                 # the default line (official) in <repo>/.venv
#   STACK=onedl bash tools/setup/setup_env.sh     # the maintained fork (onedl-*) in <repo>/.venv-onedl
#   VENV=path/to/venv bash tools/setup/setup_env.sh   # relative paths are relative to the caller's directory
#
# A line is a file requirements/<STACK>.txt pinning its mmengine, mmcv, mmdet, mmseg and mim (the same module
# names in both lines, so one venv holds one line: the venv remembers its line and refuses another); the pins
# common to both are in requirements.txt. The default line's venv is <repo>/.venv, another's <repo>/.venv-<STACK>.
# A prebuilt mmcv wheel of the line (e.g. a CUDA wheel from the fork's index) is taken before building from source:
#   MMCV_WHEEL=/path/to/onedl_mmcv-...whl       # that file (its name must be the line's mmcv and version)
#   MMCV_INDEX=https://...                      # the line's mmcv version as a wheel from that index (pip
#                                               # --extra-index-url, or --find-links for an .html page;
#                                               # --only-binary); none there: built from source
#   bash tools/setup/setup_env.sh --plan          # resolve paths and the wheel-cache key, print the plan, do nothing
#   bash tools/setup/setup_env.sh --cuda          # mmcv's ops built for the GPU (also chosen when nvcc and a GPU are found)
#   bash tools/setup/setup_env.sh --cpu-ops       # mmcv's CPU ops only, even where nvcc and a GPU are found
#   PYTHON=python3 bash tools/setup/setup_env.sh --mmcv-wheel [--cuda|--cpu-ops]
#                                           # only build (or take from the cache) mmcv's wheel for $PYTHON's own
#                                           # torch and print its path; no venv, nothing installed
#
# CUDA route: MMCV_WITH_OPS=1 FORCE_CUDA=1, TORCH_CUDA_ARCH_LIST from the visible GPUs (torch's
# get_device_capability, else nvidia-smi's compute_cap) unless it is set, MAX_JOBS from nproc unless set; the
# cache key and folder name carry the CUDA release and the arch list. --cpu-ops hides the GPUs from the build
# (mmcv compiles CUDA ops whenever torch sees a GPU) and gives the CPU flavour: enough for UperNet, not for
# Mask R-CNN's RoIAlign on CUDA tensors. Offline (the GPU machine): PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR with
# mmcv's sdist in DIR (tools/setup/fetch_gpu_wheels.sh fetches it).
#
# Neither line's mmcv has a wheel with compiled ops for torch 2.14 on PyPI, so it is built from the sdist once
# (10-25 minutes on 2 cores: 15 on a Zen 4 EPYC, 25 on an AVX2-only EPYC), with -std=c++17 patched to -std=c++20 (torch 2.14 headers need it), and the
# wheel is cached in $INLINE_CACHE (default ~/.cache/inline_backbones). The cache folder is keyed on a
# hash of the build recipe (mmcv distribution and version, patch, build flags, torch version, CUDA/CPU flavour,
# Python version and the text of build_mmcv below), so editing the recipe means a rebuild on the next run,
# in CI included: a broken cold path cannot hide behind a wheel built by an older recipe.
# CUDA builds put the toolkit's include folder, then the pip NVIDIA headers (cuSPARSE & co., which a CUDA 13
# toolkit may lack) on CPATH.
set -euo pipefail

# ---- every path resolved once, here -------------------------------------------------------------
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
# The default line, chosen from what was measured (docs/installation.md says why); the Makefile reads it here.
DEFAULT_STACK=official
STACK="${STACK:-$DEFAULT_STACK}"
LINE_REQ="$ROOT/requirements/$STACK.txt"
[[ "$STACK" =~ ^[a-z0-9]+$ ]] && [ -f "$LINE_REQ" ] || { echo "[setup] error: STACK=$STACK is not an OpenMMLab line \
of this project; the lines: $(cd "$ROOT/requirements" && ls -- *.txt | sed 's/\.txt$//' | paste -sd' ') \
(requirements/<line>.txt)" >&2; exit 2; }
DEFAULT_VENV="$ROOT/.venv"; [ "$STACK" = "$DEFAULT_STACK" ] || DEFAULT_VENV="$ROOT/.venv-$STACK"
VENV="$(abspath "${VENV:-$DEFAULT_VENV}")"
CACHE="$(abspath "${INLINE_CACHE:-$HOME/.cache/inline_backbones}")"
REQ="$ROOT/requirements.txt"
REQ_TEST="$ROOT/requirements-test.txt"
STAMP="$VENV/.inline_setup_done"
STACK_STAMP="$VENV/.inline_stack"
LOG="$CACHE/setup.log"
MODE=install        # install | --plan
OPS=auto            # auto (CUDA when nvcc and a GPU are found) | cuda (--cuda) | cpu (--cpu-ops)
WHEEL_ONLY=no       # --mmcv-wheel: build or reuse mmcv's wheel for $PYTHON's torch, nothing else
usage() { echo "usage: bash tools/setup/setup_env.sh [--plan] [--cuda | --cpu-ops] [--mmcv-wheel]" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    install) ;;
    --plan) MODE=--plan ;;
    --cuda) [ "$OPS" = cpu ] && usage; OPS=cuda ;;
    --cpu-ops) [ "$OPS" = cuda ] && usage; OPS=cpu ;;
    --mmcv-wheel) WHEEL_ONLY=yes ;;
    *) usage ;;
  esac
done

SUPPORTED_PY="3.11"        # the pinned torch/mmcv stack is verified on CPython 3.11 only
MMCV_PATCH='s/-std=c++17/-std=c++20/g'
MAX_JOBS="${MAX_JOBS:-$(nproc)}"

die() { echo "[setup] error: $*" >&2; exit 1; }
pin() { grep -E "^$1==" "$REQ" || die "no '$1==' pin in $REQ"; }
pin_version() { pin "$1" | cut -d= -f3; }
# The line's pin of one role the script installs apart: engine, cv or mim (distribution names differ between lines).
line_pin() {
  local re
  case "$1" in
    engine) re='(onedl-)?mmengine' ;; cv) re='(onedl-)?mmcv' ;; mim) re='(openmim|onedl-mim)' ;;
  esac
  grep -E "^$re==" "$LINE_REQ" || die "no $1 pin ($re==...) in $LINE_REQ"
}
MMCV_DIST="$(line_pin cv | cut -d= -f1)"
MMCV_VERSION="$(line_pin cv | cut -d= -f3)"
MMCV_FILE="${MMCV_DIST//-/_}-$MMCV_VERSION"     # the sdist's and wheels' file-name stem
[ -n "${MMCV_WHEEL:-}" ] && [ -n "${MMCV_INDEX:-}" ] && die "set MMCV_WHEEL (a file) or MMCV_INDEX (an index), not both"
if [ -n "${MMCV_WHEEL:-}" ]; then
  MMCV_WHEEL="$(abspath "$MMCV_WHEEL")"
  [ -f "$MMCV_WHEEL" ] || die "MMCV_WHEEL=$MMCV_WHEEL: no such file"
  case "$(basename "$MMCV_WHEEL")" in
    "$MMCV_FILE"-*.whl) ;;
    *) die "MMCV_WHEEL=$MMCV_WHEEL is not a wheel of the $STACK line's $MMCV_DIST $MMCV_VERSION \
(expected a file named $MMCV_FILE-*.whl; the line's pins: $LINE_REQ)" ;;
  esac
fi

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
if [ "$WHEEL_ONLY" = yes ]; then
  # The wheel is for this interpreter and the torch installed in it, whatever their versions.
  PY="$(command -v "${PYTHON:-python3}")" || die "--mmcv-wheel: no ${PYTHON:-python3} on PATH (set PYTHON)"
  SUPPORTED_PY="$(py_version "$PY")"
  TORCH_V="$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)" \
    || die "--mmcv-wheel builds against the torch installed in $PY, and it has none"
elif [ -x "$VENV/bin/python" ]; then
  PY="$VENV/bin/python"
  [ "$(py_version "$PY")" = "$SUPPORTED_PY" ] || die "$VENV has Python $(py_version "$PY"); supported: \
$SUPPORTED_PY. Remove $VENV or point VENV elsewhere."
else
  PY="$(find_python)" || die "no Python $SUPPORTED_PY found (tried ${PYTHON:+\$PYTHON=$PYTHON, }python3.11, \
python3 = $(py_version python3 || echo none)). Supported: Python $SUPPORTED_PY (torch $(pin_version torch) \
+ mmcv $MMCV_VERSION built here). Install it, or set PYTHON=/path/to/python3.11."
fi

# What is known of each line's CUDA build here (CUDA 13.0, torch 2.14.1+cu130, sm_90; docs/installation.md).
cuda_build_known() {
  case "$STACK" in
    official) echo "mmcv 2.1.0: all 58 .cu files compile; info.cpp failed before the toolkit include was put on CPATH; \
not built to the end since (2026-12-06)" ;;
    onedl) echo "onedl-mmcv 2.3.6: builds and imports (all 138 objects, linked with the toolkit's lib64; 37.8 MB wheel; \
2026-12-06)" ;;
    *) echo "not tried" ;;
  esac
}

# ---- the build recipe and its cache key ---------------------------------------------------------
# The visible GPUs' architectures as TORCH_CUDA_ARCH_LIST wants them ("9.0", "8.0;9.0"): torch's view (the
# build compiles against it), else nvidia-smi's; nothing when neither answers.
gpu_arch_list() {
  local py="$PY" arch
  [ -x "$VENV/bin/python" ] && [ "$WHEEL_ONLY" = no ] && py="$VENV/bin/python"
  arch="$("$py" -c 'import torch
n = torch.cuda.device_count()
print("arch=" + ";".join(sorted({"%d.%d" % torch.cuda.get_device_capability(i) for i in range(n)})))' 2>/dev/null \
          | sed -n 's/^arch=\([0-9].*\)$/\1/p')"
  [ -n "$arch" ] || arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
                            | grep -E '^[0-9]+\.[0-9]+$' | sort -u | paste -sd';')"
  printf '%s\n' "$arch"
}
have_cuda_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
if [ "$OPS" = cuda ]; then
  command -v nvcc >/dev/null 2>&1 || die "--cuda needs CUDA's compiler nvcc on PATH (e.g. PATH=/usr/local/cuda/bin:\$PATH)"
fi
if [ "$OPS" = cuda ] || { [ "$OPS" = auto ] && command -v nvcc >/dev/null 2>&1 && have_cuda_gpu; }; then
  FLAVOUR=cuda$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$(gpu_arch_list)}"
  [ -n "$ARCH_LIST" ] || die "no GPU architecture found (torch sees no GPU, nvidia-smi gives no compute_cap): \
set TORCH_CUDA_ARCH_LIST, e.g. TORCH_CUDA_ARCH_LIST=9.0 for an H100/H200, 8.0 for an A100"
  export TORCH_CUDA_ARCH_LIST="$ARCH_LIST"
else
  FLAVOUR=cpu
  ARCH_LIST=
  # mmcv's setup.py compiles its CUDA ops whenever torch sees a GPU, FORCE_CUDA=0 or not: hide the GPUs.
  if [ "$OPS" = cpu ]; then export CUDA_VISIBLE_DEVICES=; fi
fi
[ "$WHEEL_ONLY" = yes ] || TORCH_V="$(pin_version torch)"

# Builds mmcv's wheel from the sdist into $1 (a fresh folder), logging to $LOG.
build_mmcv() {
  local out="$1" build src cpath=
  build="$(mktemp -d)"
  run_logged "pip download $MMCV_DIST==$MMCV_VERSION (sdist)" \
    "$VENV/bin/python" -m pip download --no-deps --no-build-isolation --no-binary :all: -d "$build" \
    "$MMCV_DIST==$MMCV_VERSION"
  tar -xzf "$(compgen -G "$build/$MMCV_FILE.tar.gz" || compgen -G "$build/$MMCV_DIST-$MMCV_VERSION.tar.gz")" -C "$build"
  src="$(compgen -G "$build/$MMCV_FILE/setup.py" || compgen -G "$build/$MMCV_DIST-$MMCV_VERSION/setup.py")"
  src="$(dirname "$src")"
  # torch 2.14 headers need C++20; mmcv passes -std=c++17 after torch's flags, so CXXFLAGS cannot override it.
  sed -i "$MMCV_PATCH" "$src/setup.py"
  grep -q -- '-std=c++20' "$src/setup.py" || die "could not patch $src/setup.py for C++20"
  local force_cuda=0; [ "$FLAVOUR" = cpu ] || force_cuda=1
  if [ "$force_cuda" = 1 ]; then
    # The toolkit's own headers first (crt/ lives only there), then the pip NVIDIA ones (cuSPARSE & co.).
    cpath="$(dirname "$(dirname "$(command -v nvcc)")")/include"
    cpath="$cpath$("$VENV/bin/python" -c 'import glob, os, site
for d in site.getsitepackages():
    for inc in sorted(glob.glob(os.path.join(d, "nvidia", "*", "include"))): print(":" + inc, end="")')"
    cpath="$cpath${CPATH:+:$CPATH}"
  fi
  (cd "$src" && run_logged "pip wheel $MMCV_DIST (MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda MAX_JOBS=$MAX_JOBS)" \
     env MMCV_WITH_OPS=1 FORCE_CUDA="$force_cuda" MAX_JOBS="$MAX_JOBS" ${cpath:+CPATH="$cpath"} \
     "$VENV/bin/python" -m pip wheel --no-build-isolation --no-deps -w "$out" .)
  rm -rf "$build"
}
# CUDA builds: the toolkit where nvcc says it is (its dry run's TOP; nvcc on PATH may be a wrapper script outside
# it, and torch's CUDA_HOME guess then has no headers and no libcudart): its include/ on CPATH (the pip
# cuda_runtime_api.h includes crt/, which only the toolkit has) and its lib64/ on LIBRARY_PATH (the link's -lcudart).
# Kept out of build_mmcv so that the CPU recipe's key stays as it was; the CUDA key hashes this function too.
cuda_toolkit_env() {
  local top
  top="$(cd "$(nvcc --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)" && pwd)" \
    || die "cannot find the CUDA toolkit of $(command -v nvcc) (nvcc --dryrun gives no TOP)"
  export CPATH="${CPATH:+$CPATH:}$top/include" LIBRARY_PATH="$top/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}"
}
# The CPU recipe's key is the one it always had; the CUDA one adds the arch list (a wheel for one GPU
# architecture has no kernels for another).
RECIPE_KEY="$( { echo "mmcv=$MMCV_DIST==$MMCV_VERSION torch=$TORCH_V flavour=$FLAVOUR py=$SUPPORTED_PY patch=$MMCV_PATCH${ARCH_LIST:+ \
arch=$ARCH_LIST}"
                 declare -f build_mmcv; [ "$FLAVOUR" = cpu ] || declare -f cuda_toolkit_env; } | sha1sum | cut -c1-12)"
ARCH_TAG="${ARCH_LIST:+-sm$(printf '%s' "$ARCH_LIST" | tr -cd '0-9A-Za-z;+' | tr ';+' '-_')}"
WHEEL_DIR="$CACHE/$MMCV_DIST-$MMCV_VERSION-torch$TORCH_V-$FLAVOUR$ARCH_TAG-py${SUPPORTED_PY/./}-$RECIPE_KEY"
FORCE_CUDA_FLAG=0; [ "$FLAVOUR" = cpu ] || FORCE_CUDA_FLAG=1
BUILD_ENV="MMCV_WITH_OPS=1 FORCE_CUDA=$FORCE_CUDA_FLAG MAX_JOBS=$MAX_JOBS${ARCH_LIST:+ TORCH_CUDA_ARCH_LIST=$ARCH_LIST}\
${CUDA_VISIBLE_DEVICES+ CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES}"
# The stamp covers everything that decides the venv's content.
SETUP_HASH="$(cat "$REQ" "$LINE_REQ" "$REQ_TEST" "${BASH_SOURCE[0]}" | sha1sum | cut -c1-12)"

have_wheel() { compgen -G "$WHEEL_DIR/${MMCV_DIST//-/_}-*.whl" >/dev/null; }
cached_wheel() { compgen -G "$WHEEL_DIR/${MMCV_DIST//-/_}-*.whl" | head -n 1; }
venv_current() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SETUP_HASH" ]; }
# The line a venv was made for (none: a venv made before lines existed held the official one).
venv_stack() { if [ -f "$STACK_STAMP" ]; then cat "$STACK_STAMP"; elif [ -f "$STAMP" ]; then echo official; fi; }
if [ "$WHEEL_ONLY" = no ] && [ -x "$VENV/bin/python" ] && [ -n "$(venv_stack)" ] && [ "$(venv_stack)" != "$STACK" ]; then
  die "$VENV holds the $(venv_stack) OpenMMLab line; STACK=$STACK needs a venv of its own (both lines install the \
same modules, mmcv, mmdet, ...): leave VENV unset (STACK=$STACK uses $DEFAULT_VENV), or remove $VENV"
fi

if [ "$MODE" = --plan ]; then
  echo "root=$ROOT"
  echo "stack=$STACK"
  echo "line_requirements=$LINE_REQ"
  echo "mmcv=$MMCV_DIST==$MMCV_VERSION"
  echo "venv=$VENV"
  echo "python=$PY ($(py_version "$PY"))"
  echo "cache=$CACHE"
  echo "flavour=$FLAVOUR"
  echo "torch=$TORCH_V"
  echo "torch_cuda_arch_list=${ARCH_LIST:--}"
  [ "$FLAVOUR" = cpu ] || echo "cuda_build_known=$(cuda_build_known)"
  echo "max_jobs=$MAX_JOBS"
  echo "mmcv_build_env=$BUILD_ENV"
  echo "recipe_key=$RECIPE_KEY"
  echo "mmcv_prebuilt=${MMCV_WHEEL:+wheel:$MMCV_WHEEL}${MMCV_INDEX:+index:$MMCV_INDEX}"
  echo "wheel_dir=$WHEEL_DIR"
  if [ "$WHEEL_ONLY" = yes ]; then echo "mode=mmcv-wheel"; echo "build_mmcv=$(have_wheel && echo no || echo yes)"
  elif venv_current; then echo "venv_up_to_date=yes"; echo "build_mmcv=no"
  else echo "venv_up_to_date=no"; echo "build_mmcv=$({ [ -n "${MMCV_WHEEL:-}" ] || have_wheel; } && echo no || echo yes)"; fi
  exit 0
fi

if [ "$WHEEL_ONLY" = no ] && venv_current; then
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
           "(pip download $MMCV_DIST==$MMCV_VERSION), that gcc/g++ and the Python $SUPPORTED_PY headers are" \
           "installed, and that the disk has a few GB free; then rerun the same command (finished steps" \
           "are kept). 'bash tools/setup/setup_env.sh --plan' shows the paths in use."
    } >&2
    exit 1
  fi
}
: >"$LOG"

# Builds the wheel into $WHEEL_DIR unless the cache has it; only a finished build lands in the cache.
build_into_cache() {
  local tmp_wheels="$WHEEL_DIR.partial.$$" start=$SECONDS
  rm -rf "$tmp_wheels"; mkdir -p "$tmp_wheels"
  [ "$FLAVOUR" = cpu ] || cuda_toolkit_env
  build_mmcv "$tmp_wheels"
  rm -rf "$WHEEL_DIR"; mv "$tmp_wheels" "$WHEEL_DIR"
  echo "[setup] $MMCV_DIST $MMCV_VERSION ($FLAVOUR${ARCH_LIST:+, arch $ARCH_LIST}) built in $((SECONDS - start)) s"
}

if [ "$WHEEL_ONLY" = yes ]; then
  "$PY" -c 'import torch, setuptools, pkg_resources, wheel' 2>/dev/null || die "$PY needs torch, wheel and \
setuptools<82 (mmcv's setup.py imports pkg_resources) to build mmcv"
  if ! have_wheel; then
    # build_mmcv runs "$VENV/bin/python": a wrapper that runs $PY (no venv is made).
    VENV="$(mktemp -d)"; mkdir "$VENV/bin"
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY" >"$VENV/bin/python"; chmod +x "$VENV/bin/python"
    echo "[setup] building $MMCV_DIST $MMCV_VERSION for $PY (torch $TORCH_V; $BUILD_ENV) into $WHEEL_DIR"
    build_into_cache
    rm -rf "$VENV"
  fi
  echo "mmcv_wheel=$(cached_wheel)"
  exit 0
fi

[ -x "$VENV/bin/python" ] || { echo "[setup] creating $VENV with $PY"; run_logged "create venv" "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
run_logged "upgrade pip/setuptools" "${PIP[@]}" install --upgrade "pip>=24" "setuptools>=77.0.3,<81" wheel

echo "[setup] torch / torchvision"
run_logged "install torch" "${PIP[@]}" install "$(pin torch)" "$(pin torchvision)" "numpy>=2,<2.5"

# mmcv: a prebuilt wheel the user names (a file, or an index holding the line's version), else the cached build.
MMCV_SRC=
if [ -n "${MMCV_WHEEL:-}" ]; then
  MMCV_SRC="$MMCV_WHEEL"
elif [ -n "${MMCV_INDEX:-}" ]; then
  idx=(--extra-index-url "$MMCV_INDEX"); case "$MMCV_INDEX" in *.html) idx=(--find-links "$MMCV_INDEX") ;; esac
  mkdir -p "$VENV/.mmcv-prebuilt"
  if "${PIP[@]}" download --no-deps --only-binary :all: "${idx[@]}" -d "$VENV/.mmcv-prebuilt" \
       "$MMCV_DIST==$MMCV_VERSION" >>"$LOG" 2>&1; then
    MMCV_SRC="$(compgen -G "$VENV/.mmcv-prebuilt/$MMCV_FILE-*.whl" | head -n 1)"
  else
    echo "[setup] $MMCV_INDEX has no $MMCV_DIST $MMCV_VERSION wheel for this Python/platform; building from source"
  fi
fi
if [ -z "$MMCV_SRC" ]; then
  if ! have_wheel; then
    echo "[setup] building $MMCV_DIST $MMCV_VERSION ($FLAVOUR; $BUILD_ENV) from source into $WHEEL_DIR (10-25 min on 2 cores)"
    run_logged "install mmcv build deps" "${PIP[@]}" install "$(line_pin engine)" ninja psutil "packaging>=24.2"
    build_into_cache
  fi
  MMCV_SRC="$(cached_wheel)"
fi
echo "[setup] $MMCV_DIST from $MMCV_SRC"
run_logged "install mmcv wheel" "${PIP[@]}" install --no-deps "$MMCV_SRC"

echo "[setup] OpenMMLab line '$STACK' ($LINE_REQ) and test tools"
grep -vE '^(torch|torchvision)==' "$REQ" > "$VENV/.req-rest.txt"
grep -E '^[a-z]' "$LINE_REQ" | grep -vE "^($MMCV_DIST|openmim|onedl-mim)==" >> "$VENV/.req-rest.txt"
run_logged "install requirements" "${PIP[@]}" install -r "$VENV/.req-rest.txt" -r "$REQ_TEST" \
  "$(pin torch)" "$(pin torchvision)" "$MMCV_DIST==$MMCV_VERSION"
# mim's opendatalab dependency pins setuptools 60 and downgrades torch: install it alone.
run_logged "install mim" "${PIP[@]}" install --no-deps "$(line_pin mim)"
run_logged "install inline_backbones (editable)" "${PIP[@]}" install --no-deps --no-build-isolation -e "$ROOT"

run_logged "import check" "$VENV/bin/python" -c '
import torch, mmcv, mmengine, mmdet, mmseg, timm
from mmcv.ops import RoIAlign, nms  # compiled ops must import
import inline_backbones'
run_logged "one OpenMMLab line: $STACK" "$VENV/bin/python" "$ROOT/tools/misc/openmmlab_line.py" --expect "$STACK"
"$VENV/bin/python" "$ROOT/tools/misc/openmmlab_line.py" | sed 's/^/[setup] /'
echo "$STACK" > "$STACK_STAMP"
echo "$SETUP_HASH" > "$STAMP"
echo "[setup] done: $VENV"
