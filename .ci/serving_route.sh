#!/usr/bin/env bash
# The serving machine's install route (docs/deployment.md#a-serving-machine), in a fresh venv: a whole segmentor
# exported in the OpenMMLab venv (the mini UperNet of mmseg_configs/, random weights), then the documented command
# `pip install ./runtime` into a new venv, a check that it pulled no torch, timm or OpenMMLab, and
# `python -m inline_runtime FILE IMAGE --out-dir DIR`, whose label map must be written.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
.venv/bin/python tools/deployment/export_onnx.py mmseg_configs/inline-swin-mini_upernet_shapes-256x256.py --whole \
  --out "$work/mini.onnx" --check-sizes 96x128
"${PYTHON:-python3.11}" -m venv "$work/serve"
cp -rL runtime "$work/runtime"   # a copy (the link followed): no build output of an earlier install in the clone is reused
cd "$work"            # from here on nothing of the clone is on the path: only what the install put in the venv
"$work/serve/bin/python" -m pip install -q ./runtime      # the documented command
echo "[serving] installed in the serving venv:"; "$work/serve/bin/python" -m pip list --format=freeze | sed 's/^/  /'
"$work/serve/bin/python" - <<PY
import importlib.util
present = [m for m in ('torch', 'timm', 'torchvision', 'mmengine', 'mmcv', 'mmdet', 'mmseg', 'inline_backbones')
           if importlib.util.find_spec(m) is not None]
assert not present, f'the serving install pulled {present}'
import inline_runtime
assert inline_runtime.__file__.startswith('$work/serve/'), inline_runtime.__file__
print('[serving] inline_runtime installed without torch, timm or OpenMMLab:', inline_runtime.__file__)
PY
"$work/serve/bin/python" -c "import cv2, numpy as np; cv2.imwrite('$work/street.png', \
np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8))"
"$work/serve/bin/python" -m inline_runtime "$work/mini.onnx" "$work/street.png" --out-dir "$work/out"
ls "$work/out"
[ -n "$(ls "$work/out")" ] || { echo "[serving] error: python -m inline_runtime wrote nothing" >&2; exit 1; }
echo "[serving] route checked in $((SECONDS - start)) s"
