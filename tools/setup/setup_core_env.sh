#!/usr/bin/env bash
# Create (or update) a virtual environment without any OpenMMLab line: the timm / transformers user's route of
# docs/installation.md, plus pytest, to run the suite's tests that do not touch OpenMMLab there.
#
#   bash tools/setup/setup_core_env.sh              # <repo>/.venv-core
#   VENV=path/to/venv bash tools/setup/setup_core_env.sh
#
# What it installs is the documented route, `pip install -e '.[tools,transformers]'`, with the repository's pins as
# constraints (requirements.txt, requirements-test.txt: the same torch, timm, onnx, transformers releases as the
# OpenMMLab venvs), then pytest. It checks at the end that no OpenMMLab module can be imported. A second run with
# nothing changed takes seconds (a stamp of the inputs' hash).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
VENV="$(abspath "${VENV:-$ROOT/.venv-core}")"
SUPPORTED_PY="3.11"
STAMP="$VENV/.inline_core_setup_done"
die() { echo "[setup-core] error: $*" >&2; exit 1; }
HASH="$(cat "$ROOT/pyproject.toml" "$ROOT/requirements.txt" "$ROOT/requirements-test.txt" "${BASH_SOURCE[0]}" \
        | sha1sum | cut -c1-12)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
  echo "[setup-core] $VENV is up to date"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  PY=""
  for cand in ${PYTHON:-} python3.11 python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    [ "$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$SUPPORTED_PY" ] && { PY="$cand"; break; }
  done
  [ -n "$PY" ] || die "no Python $SUPPORTED_PY found (set PYTHON=/path/to/python3.11)"
  echo "[setup-core] creating $VENV"
  "$PY" -m venv "$VENV"
fi
start=$SECONDS
# pip's constraints ignore comments; pytest's pin is in requirements-test.txt.
(cd "$ROOT" && "$VENV/bin/python" -m pip install -q -c requirements.txt -c requirements-test.txt \
   -e '.[tools,transformers]' pytest)
"$VENV/bin/python" - <<'PY' || die "an OpenMMLab module is importable in $VENV: this environment must have none"
import importlib.util
found = [m for m in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mim') if importlib.util.find_spec(m) is not None]
assert not found, found
PY
echo "$HASH" > "$STAMP"
echo "[setup-core] $VENV ready in $((SECONDS - start)) s (no OpenMMLab line)"
