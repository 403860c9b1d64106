#!/usr/bin/env bash
# Create (or update) the project's virtual environment with the pinned OpenMMLab 2.0 stack.
#
#   bash tools/setup_env.sh            # venv in ./.venv
#   VENV=/path/to/venv bash tools/setup_env.sh
#
# mmcv 2.1.0 has no wheel with compiled ops for torch 2.14, so it is built from the sdist once
# (about 10 minutes on 2 cores), with -std=c++17 patched to -std=c++20 (torch 2.14 headers need it),
# and the wheel is cached in $INLINE_CACHE (default ~/.cache/inline_backbones) so later runs skip the
# build. CUDA ops are built when nvcc and a GPU are present; the cache key says which.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
CACHE="${INLINE_CACHE:-$HOME/.cache/inline_backbones}"
PY="${PYTHON:-python3}"
MMCV_VERSION=2.1.0
STAMP="$VENV/.inline_setup_done"

# pip, minus the warnings about local index folders that some machines' pip.conf names but lack.
pip_quiet() { "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }

req_hash() { cat "$ROOT/requirements.txt" "$ROOT/requirements-test.txt" "$ROOT/tools/setup_env.sh" | sha1sum | cut -c1-12; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(req_hash)" ]; then
  echo "[setup] $VENV is up to date"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=(pip_quiet "$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade "pip>=24" "setuptools>=77.0.3,<81" wheel

pin() { grep -E "^$1==" "$ROOT/requirements.txt"; }
echo "[setup] torch / torchvision"
"${PIP[@]}" install -q "$(pin torch)" "$(pin torchvision)" "numpy>=2,<2.5"

if command -v nvcc >/dev/null 2>&1 && "$VENV/bin/python" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  FLAVOUR=cuda$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
else
  FLAVOUR=cpu
fi
TORCH_V=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
WHEEL_DIR="$CACHE/mmcv-$MMCV_VERSION-torch$TORCH_V-$FLAVOUR-py$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"

if ! ls "$WHEEL_DIR"/mmcv-*.whl >/dev/null 2>&1; then
  echo "[setup] building mmcv $MMCV_VERSION ($FLAVOUR) from source into $WHEEL_DIR (about 10 min on 2 cores)"
  "${PIP[@]}" install -q "$(pin mmengine)" ninja psutil
  BUILD="$(mktemp -d)"
  "${PIP[@]}" download -q --no-deps --no-build-isolation --no-binary :all: -d "$BUILD" "mmcv==$MMCV_VERSION"
  tar -xzf "$BUILD"/mmcv-$MMCV_VERSION.tar.gz -C "$BUILD"
  SRC="$BUILD/mmcv-$MMCV_VERSION"
  # torch 2.14 headers need C++20; mmcv passes -std=c++17 after torch's flags, so CXXFLAGS cannot override it.
  sed -i 's/-std=c++17/-std=c++20/g' "$SRC/setup.py"
  grep -q -- '-std=c++20' "$SRC/setup.py" || { echo "[setup] could not patch mmcv setup.py for C++20" >&2; exit 1; }
  if [ "$FLAVOUR" = cpu ]; then export FORCE_CUDA=0; else export FORCE_CUDA=1; fi
  mkdir -p "$WHEEL_DIR" "$CACHE"
  LOG="$CACHE/mmcv-build.log"
  if ! (cd "$SRC" && MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
        "${PIP[@]}" wheel --no-build-isolation --no-deps -w "$WHEEL_DIR" .) > "$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "[setup] mmcv build failed; full log: $LOG" >&2
    exit 1
  fi
  rm -rf "$BUILD"
fi
echo "[setup] mmcv from $WHEEL_DIR"
"${PIP[@]}" install -q --no-deps "$WHEEL_DIR"/mmcv-*.whl

echo "[setup] OpenMMLab stack and test tools"
grep -vE '^(openmim|torch|torchvision|mmcv)==' "$ROOT/requirements.txt" > "$VENV/.req-rest.txt"
"${PIP[@]}" install -q -r "$VENV/.req-rest.txt" -r "$ROOT/requirements-test.txt" "$(pin torch)" "$(pin torchvision)" "mmcv==$MMCV_VERSION"
# openmim's opendatalab dependency pins setuptools 60 and downgrades torch: install it alone.
"${PIP[@]}" install -q --no-deps "$(pin openmim)"
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

"$VENV/bin/python" - <<'PY'
import torch, mmcv, mmengine, mmdet, mmseg
from mmcv.ops import RoIAlign, nms  # compiled ops must import
print(f"[setup] torch {torch.__version__}, mmcv {mmcv.__version__}, mmengine {mmengine.__version__}, "
      f"mmdet {mmdet.__version__}, mmseg {mmseg.__version__}")
PY
req_hash > "$STAMP"
echo "[setup] done: $VENV"
