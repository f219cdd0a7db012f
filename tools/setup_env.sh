#!/usr/bin/env bash
# Create or refresh the project virtual environment in .venv/ (idempotent).
#
# First run on a fresh machine: ~15 min, dominated by compiling mmcv 2.1.0 (no wheels exist for this
# torch). The compiled wheel is cached in $MMCAUSAL_CACHE (default ~/.cache/mmcausal), keyed on mmcv, torch,
# Python and the ops it was built with (CPU only, or CUDA <torch.version.cuda> for the GPU architectures
# it targets), and uv keeps every other package in its cache, so a second set-up on the same machine, even
# from a fresh clone, takes well under 2 minutes. A stamp of the requirement files makes a run with nothing
# to change return in seconds.
#
# On a GPU host mmcv gets CUDA ops, compiled for the visible GPUs with nvcc from the CUDA toolkit that
# matches torch (CUDA_HOME); without one the script stops and says how to proceed. MMCAUSAL_MMCV_OPS=cpu
# builds CPU ops instead (the detectors then cannot run on the GPU); =cuda forces CUDA ops (with
# TORCH_CUDA_ARCH_LIST where no GPU is visible). The decisions: tools/misc/mmcv_build_plan.py.
#
# Why each step is the way it is: docs/compatibility.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
CACHE="${MMCAUSAL_CACHE:-$HOME/.cache/mmcausal}"
MMCV_VERSION=2.1.0
UV_VERSION=0.13.9
REQ="$ROOT/requirements"
PLAN="$ROOT/tools/misc/mmcv_build_plan.py"

log() { echo "[setup_env] $*"; }

stamp_of() {
  { cat "$REQ"/*.txt "$ROOT/tools/setup_env.sh" "$PLAN" "$ROOT/pyproject.toml"; echo "ops ${MMCAUSAL_MMCV_OPS:-auto}"; } |
    sha256sum | cut -d' ' -f1
}

check_stack() {
  "$VENV/bin/python" - <<'PYCHECK'
import torch, torchvision  # noqa: F401
from mmcv.ops import nms  # fails if mmcv was built without its compiled ops
import mmdet.models, mmseg.models, mmpretrain.models  # noqa: F401
import mmcausal  # noqa: F401
import os
# a CPU-ops mmcv raises here on a GPU node ("not compiled with GPU support") unless CPU ops were asked for
if torch.cuda.is_available() and os.environ.get('MMCAUSAL_MMCV_OPS', '').lower() != 'cpu':
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.]], device='cuda')
    nms(boxes, torch.tensor([0.9, 0.8], device='cuda'), 0.5)
PYCHECK
}

STAMP_FILE="$VENV/.mmcausal-setup-stamp"
if [[ -f "$STAMP_FILE" && "$(cat "$STAMP_FILE")" == "$(stamp_of)" ]] && check_stack 2>/dev/null; then
  log "environment up to date ($VENV)"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
export PIP_CONSTRAINT="$REQ/constraints.txt"

# uv installs from its cache by hard links, which makes a set-up in a fresh clone take seconds instead of
# minutes (torch alone is 5.5 GB). It is pointed at the same package sources pip is configured with.
log "uv (installer)"
"${PIP[@]}" install -q "uv==$UV_VERSION"
# unsafe-best-match: like pip, pick the best version across all indexes (uv's default stops at the first).
UV=("$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -c "$REQ/constraints.txt"
    --index-strategy unsafe-best-match)
for url in $("${PIP[@]}" config get global.extra-index-url 2>/dev/null || true); do
  UV+=(--extra-index-url "$url")
done
for dir in ${PIP_FIND_LINKS:-} $("${PIP[@]}" config get global.find-links 2>/dev/null || true); do
  UV+=(--find-links "$dir")
done

log "build tooling and torch"
"${UV[@]}" -r "$REQ/build.txt" -r "$REQ/torch.txt"

TORCH_VERSION="$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
PY_TAG="$("$VENV/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
# MMCV_OPS, MMCV_CXX20, MMCV_BUILD_ENV (array), MMCV_BUILD_PROBLEM; an impossible setting stops here (one line).
MMCV_PLAN="$("$VENV/bin/python" "$PLAN")"
eval "$MMCV_PLAN"
# A CPU-ops wheel keeps the unsuffixed name every earlier version of this script used on CPU machines, so
# their caches stay valid; a CUDA-ops wheel gets its own directory (e.g. ...-cp311-cu13.0-sm90).
WHEEL_DIR="$CACHE/wheels/mmcv-$MMCV_VERSION-torch$TORCH_VERSION-$PY_TAG"
[[ "$MMCV_OPS" == cpu ]] || WHEEL_DIR="$WHEEL_DIR-$MMCV_OPS"
if ! ls "$WHEEL_DIR"/mmcv-*.whl >/dev/null 2>&1; then
  if [[ -n "$MMCV_BUILD_PROBLEM" ]]; then
    log "cannot compile mmcv $MMCV_VERSION with $MMCV_OPS ops: $MMCV_BUILD_PROBLEM"
    exit 1
  fi
  log "compiling mmcv $MMCV_VERSION with $MMCV_OPS ops against torch $TORCH_VERSION (${MMCV_BUILD_ENV[*]}; CPU ops" \
    "about 11-17 min on 2 cores, CUDA ops about 5-8 min on 16)"
  BUILD="$(mktemp -d)"
  "${PIP[@]}" download -q --no-deps --no-binary :all: "mmcv==$MMCV_VERSION" -d "$BUILD"
  tar -xzf "$BUILD/mmcv-$MMCV_VERSION.tar.gz" -C "$BUILD"
  # torch>=2.14 headers require C++20; mmcv hard-codes -std=c++17 (open-mmlab/mmcv#3341).
  if [[ "$MMCV_CXX20" == 1 ]]; then
    sed -i 's/-std=c++17/-std=c++20/g; s#/std:c++17#/std:c++20#g' "$BUILD/mmcv-$MMCV_VERSION/setup.py"
  fi
  mkdir -p "$WHEEL_DIR.partial"
  # --no-build-isolation: an isolated build cannot see torch and silently produces an mmcv without ops.
  env "${MMCV_BUILD_ENV[@]}" "${PIP[@]}" wheel -q --no-build-isolation --no-deps --no-cache-dir \
    -w "$WHEEL_DIR.partial" "$BUILD/mmcv-$MMCV_VERSION"
  rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.partial" "$WHEEL_DIR"
  rm -rf "$BUILD"
fi

log "OpenMMLab stack, test tools and mmcausal (editable)"
"${UV[@]}" "$WHEEL_DIR"/mmcv-*.whl -r "$REQ/runtime.txt" -r "$REQ/tests.txt"
"${UV[@]}" --no-deps --no-build-isolation -e "$ROOT"
# The bytecode of the whole site-packages, written once here (about 20 s on 2 cores). Where PYTHONDONTWRITEBYTECODE
# is set (this project's CI machines) Python never writes .pyc files itself, so every new interpreter compiled
# torch's and OpenMMLab's sources again: importing the stack took 16 s instead of 6 s on 2 cores. compileall reports
# the few files that are not Python 3.11 (a Python 3.12 test helper of torch) and goes on; nothing imports them.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$VENV/bin/python" -m compileall -q -j 0 "$SITE" >/dev/null || true
# De-focus Mamba's CPU selective-scan kernel (a torch C++ extension, cached under ~/.cache/torch_extensions): built
# here once (about 30 s on 2 cores) instead of in the first scan. Without a working compiler the scan falls back to
# the chunked PyTorch scan, so a failed build warns and the set-up goes on.
log "CPU selective-scan kernel (De-focus Mamba)"
"$VENV/bin/python" - <<'PYSCAN' || true
from mmcausal.models.backbones.defocus.cpu_scan import cpu_scan_extension
module, reason = cpu_scan_extension()
print(f'  built: {module.__file__}' if module else f'  WARNING: not built ({reason}); the chunked PyTorch scan runs '
      'instead (MMCAUSAL_VERBOSE_BUILD=1 shows the compiler output)')
PYSCAN

check_stack
stamp_of > "$STAMP_FILE"
log "ready: $VENV"
