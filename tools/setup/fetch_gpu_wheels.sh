#!/usr/bin/env bash
# Download, on a machine with PyPI access, everything tools/device/gpu_training_check.sh installs on the GPU machine
# (which has Python 3.12 with torch, numpy, scipy, matplotlib, opencv-python-headless, pillow, pyyaml, rich,
# six, tqdm, regex, psutil and ninja, and cannot reach any registry):
#
#   bash tools/setup/fetch_gpu_wheels.sh            # into <repo>/.gpu_wheels (ignored by git)
#   bash tools/setup/fetch_gpu_wheels.sh DIR        # elsewhere
#
# What it fetches: CPython 3.12 manylinux x86_64 wheels (pure-Python ones where the package is pure) of the
# official OpenMMLab line pinned in requirements/official.txt (mmengine, mmdet, mmsegmentation), pycocotools
# (requirements.txt) and the
# pure-Python needs the GPU image lacks (addict, termcolor, yapf, platformdirs, shapely, terminaltables,
# prettytable, wcwidth, ftfy), setuptools<81 (mmcv's setup.py and mmengine's mmdet::/mmseg:: scopes import
# pkg_resources), and mmcv's source archive (its ops are compiled there, against that machine's torch).
# One version of each, --no-deps: the list above is the whole closure (checked by
# tests/test_gpu_training_check.py against the packages' own Requires-Dist). About 10 MB.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/.gpu_wheels}"
PY="${PYTHON:-python3}"
REQ=("$ROOT/requirements.txt" "$ROOT/requirements/official.txt")
pin() { grep -hE "^$1==" "${REQ[@]}" || { echo "no '$1==' pin in ${REQ[*]}" >&2; exit 1; }; }

# Wheels for CPython 3.12 on x86_64 Linux (the GPU machine), whatever this machine runs.
WHEELS=(
  "$(pin mmengine)" "$(pin mmdet)" "$(pin mmsegmentation)" "$(pin pycocotools)"
  addict==2.4.0 termcolor==3.3.0 yapf==0.43.0 platformdirs==4.14.9 shapely==2.2.0 terminaltables==3.1.10
  prettytable==3.19.0 wcwidth==0.9.4 ftfy==6.3.1 setuptools==80.10.2
)
mkdir -p "$DEST"
"$PY" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$DEST" "${WHEELS[@]}"
# mmcv: the source archive only (no wheel with compiled ops exists for torch 2.11 + CUDA 13).
"$PY" -m pip download --disable-pip-version-check --no-deps --no-binary :all: --no-build-isolation -d "$DEST" \
  "$(pin mmcv)"
ls -l "$DEST"
echo "[fetch] $(find "$DEST" -maxdepth 1 -type f | wc -l) files, $(du -sh "$DEST" | cut -f1) in $DEST"
