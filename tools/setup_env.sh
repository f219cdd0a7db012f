#!/usr/bin/env bash
# Create or refresh the project virtual environment in .venv/ (idempotent), or install into the active one.
#
#   bash tools/setup_env.sh                      # .venv/ with the pinned stack (torch included)
#   bash tools/setup_env.sh --into-current-env   # the Python environment of `python` (or $PYTHON), its own torch
#
# First run on a fresh machine: ~15 min, dominated by compiling mmcv 2.1.0 (no wheels exist for this
# torch). The compiled wheel is cached in $MMCAUSAL_CACHE (default ~/.cache/mmcausal), keyed on mmcv, torch (its
# build, e.g. 2.14.1+cu128), Python and the ops it was built with (CPU only, or CUDA <torch.version.cuda> for the
# GPU architectures it targets), and uv keeps every other package in its cache, so a second set-up on the same
# machine, even from a fresh clone, takes well under 2 minutes. A stamp of the requirement files makes a run with
# nothing to change return in seconds.
#
# torch: MMCAUSAL_TORCH_CUDA=auto (default) installs the pinned torch's default build (PyPI's: CUDA 13.0) unless
# nvidia-smi reports a driver too old for it, then the newest CUDA 12 build that driver runs; =cu126, cu128, cu130
# or cpu installs that build from https://download.pytorch.org/whl/<variant>. Minimum Linux drivers: cu126
# >= 560.28.03 (>= 525.60.13 through CUDA minor-version compatibility), cu128 >= 570.26, cu130 >= 580.65.06. When
# nvidia-smi lists GPUs that the installed torch cannot use, the script stops and says which build to take. The
# decisions: tools/misc/torch_variant.py.
#
# On a GPU host mmcv gets CUDA ops, compiled for the visible GPUs with nvcc from the CUDA toolkit that
# matches torch (CUDA_HOME); without one the script stops and says how to proceed. MMCAUSAL_MMCV_OPS=cpu
# builds CPU ops instead (the detectors then cannot run on the GPU); =cuda forces CUDA ops (with
# TORCH_CUDA_ARCH_LIST where no GPU is visible). The decisions: tools/misc/mmcv_build_plan.py.
#
# --into-current-env: for an existing environment with torch (>= 2.6): keeps its torch (pinned for every install
# so nothing swaps it), keeps an mmcv 2.1.x whose compiled ops work, else compiles mmcv 2.1.0 as above (cached
# the same way), then installs the OpenMMLab stack and its undeclared imports (requirements/runtime.txt), the ONNX
# export packages (onnx, onnxscript, onnxruntime, pinned in requirements/tests.txt) and mmcausal (editable). It
# pins setuptools to <82 there (mmcv's setup.py and mmengine import pkg_resources).
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
VARIANT="$ROOT/tools/misc/torch_variant.py"

log() { echo "[setup_env] $*"; }

MODE=venv
case "${1:-}" in
  "") ;;
  '--into-current-env') MODE=current ;;
  -h|--help) sed -n '2,5p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) log "unknown option ${1}: run it without options (.venv/) or with --into-current-env"; exit 2 ;;
esac

stamp_of() {
  { cat "$REQ"/*.txt "$ROOT/tools/setup_env.sh" "$PLAN" "$VARIANT" "$ROOT/pyproject.toml"
    echo "ops ${MMCAUSAL_MMCV_OPS:-auto} torch $TORCH_VARIANT"; } | sha256sum | cut -d' ' -f1
}

# check_stack PYTHON: the stack imports, mmcv has its compiled ops, and they run on the GPU where torch sees one.
check_stack() {
  "$1" - <<'PYCHECK'
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

# build_mmcv PYTHON TORCH_BUILD: the cached mmcv wheel for the torch of PYTHON (compiled first if needed) in WHEEL_DIR.
build_mmcv() {
  local python="$1" torch_build="$2" py_tag plan build
  local pip=("$python" -m pip --disable-pip-version-check)
  py_tag="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
  # MMCV_OPS, MMCV_CXX20, MMCV_BUILD_ENV (array), MMCV_BUILD_PROBLEM; an impossible setting stops here (one line).
  plan="$("$python" "$PLAN")" || exit 1
  eval "$plan"
  # TORCH_BUILD is the torch distribution's version: 2.14.1 for PyPI's wheel, so a CPU-ops wheel has the plain
  # name (torch2.14.1), which CPU-ops wheels already in a cache have; a build from PyTorch's
  # index carries its label (torch2.14.1+cu128), and a CUDA-ops wheel gets its own directory (...-cp311-cu13.0-sm90).
  WHEEL_DIR="$CACHE/wheels/mmcv-$MMCV_VERSION-torch$torch_build-$py_tag"
  [[ "$MMCV_OPS" == cpu ]] || WHEEL_DIR="$WHEEL_DIR-$MMCV_OPS"
  ls "$WHEEL_DIR"/mmcv-*.whl >/dev/null 2>&1 && return 0
  if [[ -n "$MMCV_BUILD_PROBLEM" ]]; then
    log "cannot compile mmcv $MMCV_VERSION with $MMCV_OPS ops: $MMCV_BUILD_PROBLEM"
    exit 1
  fi
  log "compiling mmcv $MMCV_VERSION with $MMCV_OPS ops against torch $torch_build (${MMCV_BUILD_ENV[*]}; CPU ops" \
    "about 11-17 min on 2 cores, CUDA ops about 5-8 min on 16)"
  build="$(mktemp -d)"
  "${pip[@]}" download -q --no-deps --no-binary :all: "mmcv==$MMCV_VERSION" -d "$build"
  tar -xzf "$build/mmcv-$MMCV_VERSION.tar.gz" -C "$build"
  # torch>=2.14 headers require C++20; mmcv hard-codes -std=c++17 (https://github.com/open-mmlab/mmcv/issues/3341).
  if [[ "$MMCV_CXX20" == 1 ]]; then
    sed -i 's/-std=c++17/-std=c++20/g; s#/std:c++17#/std:c++20#g' "$build/mmcv-$MMCV_VERSION/setup.py"
  fi
  mkdir -p "$WHEEL_DIR.partial"
  # --no-build-isolation: an isolated build cannot see torch and silently produces an mmcv without ops.
  env "${MMCV_BUILD_ENV[@]}" "${pip[@]}" wheel -q --no-build-isolation --no-deps --no-cache-dir \
    -w "$WHEEL_DIR.partial" "$build/mmcv-$MMCV_VERSION"
  rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.partial" "$WHEEL_DIR"
  rm -rf "$build"
}

# build_scan_kernel PYTHON: De-focus Mamba's CPU selective-scan kernel (a torch C++ extension, cached under
# ~/.cache/torch_extensions), built here once (about 30 s on 2 cores) instead of in the first scan. Without a
# working compiler the scan falls back to the chunked PyTorch scan, so a failed build warns and the set-up goes on.
build_scan_kernel() {
  log "CPU selective-scan kernel (De-focus Mamba)"
  "$1" - <<'PYSCAN' || true
from mmcausal.models.defocus.scans.cpu import cpu_scan_extension
module, reason = cpu_scan_extension()
print(f'  built: {module.__file__}' if module else f'  WARNING: not built ({reason}); the chunked PyTorch scan runs '
      'instead (MMCAUSAL_VERBOSE_BUILD=1 shows the compiler output)')
PYSCAN
}

# ---- --into-current-env: the active environment, its own torch ------------------------------------------------------
if [[ "$MODE" == current ]]; then
  TARGET="${PYTHON:-python}"
  if ! command -v "$TARGET" >/dev/null 2>&1; then
    log "no $TARGET on PATH: activate the environment (or set PYTHON to its interpreter)"
    exit 1
  fi
  # the installed distribution's version: 2.14.1 for PyPI's wheel, 2.14.1+cu128 for PyTorch's index
  if ! TORCH_BUILD="$("$TARGET" -c 'import torch; from importlib.metadata import version; print(version("torch"))' \
    2>/dev/null)"; then
    log "$TARGET has no torch: install torch >= 2.6 for this machine first (https://pytorch.org/get-started/locally/)," \
      "or run bash tools/setup_env.sh without options for the pinned stack in .venv/"
    exit 1
  fi
  if ! "$TARGET" -c 'import re, sys; sys.exit(tuple(map(int, re.findall(r"\d+", sys.argv[1])[:2])) < (2, 6))' \
    "$TORCH_BUILD"; then
    log "torch $TORCH_BUILD in $TARGET is older than 2.6, which mmcausal needs (weights-only checkpoint loading)"
    exit 1
  fi
  "$TARGET" "$VARIANT" check || exit 1
  log "installing into $("$TARGET" -c 'import sys; print(sys.prefix)') (torch $TORCH_BUILD, kept)"
  PIP=("$TARGET" -m pip --disable-pip-version-check)
  # Pin what is installed, so that no install below swaps torch under the compiled ops.
  CONSTRAINTS="$(mktemp)"
  "$TARGET" - >"$CONSTRAINTS" <<'PYPIN'
from importlib import metadata
for name in ('torch', 'torchvision'):
    try:
        print(f'{name}=={metadata.version(name)}')
    except metadata.PackageNotFoundError:
        pass
PYPIN
  grep -E '^(setuptools|numpy)' "$REQ/constraints.txt" >>"$CONSTRAINTS"
  export PIP_CONSTRAINT="$CONSTRAINTS"
  log "build tooling"
  "${PIP[@]}" install -q -r "$REQ/build.txt"
  if "$TARGET" -c "$(cat <<'PYMMCV'
import os, sys, torch, mmcv
from mmcv.ops import nms
if not mmcv.__version__.startswith('2.1.'):
    sys.exit(1)
if torch.cuda.is_available() and os.environ.get('MMCAUSAL_MMCV_OPS', '').lower() != 'cpu':
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.]], device='cuda')
    nms(boxes, torch.tensor([0.9, 0.8], device='cuda'), 0.5)
PYMMCV
)" >/dev/null 2>&1; then
    log "mmcv $("$TARGET" -c 'import mmcv; print(mmcv.__version__)') with working ops: kept"
  else
    build_mmcv "$TARGET" "$TORCH_BUILD"
    log "mmcv $MMCV_VERSION ($MMCV_OPS ops)"
    "${PIP[@]}" install -q --force-reinstall --no-deps "$WHEEL_DIR"/mmcv-*.whl
  fi
  log "OpenMMLab stack, ONNX export packages and mmcausal (editable)"
  mapfile -t ONNX < <(grep -oE '^onnx[a-z]*==[^ #]+' "$REQ/tests.txt")
  "${PIP[@]}" install -q -r "$REQ/runtime.txt" "${ONNX[@]}"
  "${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"
  rm -f "$CONSTRAINTS"
  build_scan_kernel "$TARGET"
  check_stack "$TARGET"
  log "ready: $TARGET"
  exit 0
fi

# ---- .venv/ ---------------------------------------------------------------------------------------------------------
# TORCH_VARIANT, TORCH_INDEX_URL, TORCH_LOCAL; a setting or driver that leaves no torch build stops here (one line).
TORCH_CHOICE="$("$PY" "$VARIANT" choose)" || exit 1
eval "$TORCH_CHOICE"

STAMP_FILE="$VENV/.mmcausal-setup-stamp"
if [[ -f "$STAMP_FILE" && "$(cat "$STAMP_FILE")" == "$(stamp_of)" ]] && check_stack "$VENV/bin/python" 2>/dev/null; then
  "$VENV/bin/python" "$VARIANT" check || exit 1
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

log "build tooling and torch ($([[ "$TORCH_VARIANT" == default ]] && echo "its default build" ||
  echo "$TORCH_VARIANT build from $TORCH_INDEX_URL"))"
"${UV[@]}" -r "$REQ/build.txt"
# Another build of the same torch version than the one installed (its local label, +cu128, differs) satisfies the
# pins, so uv would keep it: reinstall torch, torchvision and mmcv (compiled against it) then.
INSTALLED="$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null ||
  true)"
REINSTALL=()
if [[ -n "$INSTALLED" && "$INSTALLED" != *"$TORCH_LOCAL" || "$TORCH_LOCAL" == "" && "$INSTALLED" == *+* ]]; then
  REINSTALL=(--reinstall-package torch --reinstall-package torchvision --reinstall-package mmcv)
fi
if [[ "$TORCH_VARIANT" == default ]]; then
  "${UV[@]}" "${REINSTALL[@]}" -r "$REQ/torch.txt"
else
  mapfile -t TORCH_PINS < <(sed -nE "s/^(torch|torchvision)==([^ #]+).*/\1==\2$TORCH_LOCAL/p" "$REQ/torch.txt")
  "${UV[@]}" "${REINSTALL[@]}" --index-url "$TORCH_INDEX_URL" "${TORCH_PINS[@]}"
fi
# Stops (one line) when nvidia-smi lists GPUs that this torch cannot use, instead of compiling CPU ops for it.
"$VENV/bin/python" "$VARIANT" check || exit 1

build_mmcv "$VENV/bin/python" "$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("torch"))')"

log "OpenMMLab stack, test tools and mmcausal (editable)"
"${UV[@]}" "${REINSTALL[@]}" "$WHEEL_DIR"/mmcv-*.whl -r "$REQ/runtime.txt" -r "$REQ/tests.txt"
"${UV[@]}" --no-deps --no-build-isolation -e "$ROOT"
# The bytecode of the whole site-packages, written once here (about 20 s on 2 cores). Where PYTHONDONTWRITEBYTECODE
# is set (this project's CI machines) Python never writes .pyc files itself, so every new interpreter would compile
# torch's and OpenMMLab's sources again: importing the stack takes 16 s instead of 6 s on 2 cores. compileall reports
# the few files that are not Python 3.11 (a Python 3.12 test helper of torch) and goes on; nothing imports them.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$VENV/bin/python" -m compileall -q -j 0 "$SITE" >/dev/null || true
build_scan_kernel "$VENV/bin/python"

check_stack "$VENV/bin/python"
stamp_of > "$STAMP_FILE"
log "ready: $VENV"
