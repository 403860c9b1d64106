# Sourced by the device scripts of this folder: strict mode, $OUT required, the repository root as the working
# folder, the carried wheels ($GPU_WHEELS, default .gpu_wheels/) and where they are installed ($SITE, default
# /tmp/site).
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
WHEELS="${GPU_WHEELS:-$ROOT/.gpu_wheels}"
SITE="${SITE:-/tmp/site}"
