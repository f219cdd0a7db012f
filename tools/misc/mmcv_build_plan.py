"""How ``tools/setup_env.sh`` compiles mmcv 2.1.0 on this host: CPU or CUDA ops, the build environment, and what is
missing if it cannot.

    python tools/misc/mmcv_build_plan.py     # prints shell assignments that setup_env.sh evaluates

Prints ``MMCV_OPS`` (the ops variant, part of the cached wheel's name: ``cpu``, or ``cu<torch's CUDA>-<archs>`` such
as ``cu13.0-sm90``), ``MMCV_CXX20`` (1 if mmcv's ``-std=c++17`` must become ``-std=c++20``), ``MMCV_BUILD_ENV`` (a
bash array of ``KEY=value`` for the build) and ``MMCV_BUILD_PROBLEM`` (empty, or why the build cannot run and how to
proceed; a cached wheel needs no build, so setup_env.sh reports it only when it has to compile). Warnings go to
stderr. Settings that leave no ops variant to build (an unknown switch, CUDA ops without a CUDA torch or a target
GPU) end it with one line on stderr and exit status 1.

The decision (:func:`plan_build`) is a pure function of :class:`HostFacts`; :func:`gather_facts` reads them from
torch, the CUDA toolkit torch's extension builder would use, and the environment:

* ``MMCAUSAL_MMCV_OPS``: ``auto`` (default: CUDA ops iff torch is a CUDA build and sees a GPU, or ``FORCE_CUDA=1``),
  ``cuda`` or ``cpu`` (CPU ops even on a GPU host: the detectors' mmcv ops then cannot run on the GPU).
* ``TORCH_CUDA_ARCH_LIST``: default the compute capabilities of the visible GPUs, never every architecture.
* ``MAX_JOBS``: default the usable cores, at most one job per 3 GiB of memory (the largest unit,
  ``filtered_lrelu.cu``, peaks at 2.7 GB).
* ``CUDA_HOME``: the toolkit; its nvcc must have torch's CUDA major version, its ``lib64`` the ``libcudart.so`` the
  extension links. cuBLAS / cuSPARSE / cuSOLVER headers
  that torch's CUDA headers include but the toolkit lacks (a toolkit assembled from pip packages) are taken from
  torch's ``nvidia/*/include`` through ``CPATH``.
Only the standard library and torch are used.
"""
import glob
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

SWITCH = 'MMCAUSAL_MMCV_OPS'
SWITCH_VALUES = ('auto', 'cpu', 'cuda')
#: headers that torch's ATen/cuda/CUDAContextLight.h includes from the CUDA math libraries
LIBRARY_HEADERS = ('cublas_v2.h', 'cublasLt.h', 'cusparse.h', 'cusolverDn.h')
BYTES_PER_JOB = 3 * 2**30
CXX20_FROM_TORCH = (2, 14)  # torch >= 2.14 compiles extensions with -std=c++20 and its headers need it


class PlanError(ValueError):
    """The settings leave no ops variant to build; the message says what to change."""


@dataclass(frozen=True)
class HostFacts:
    """What the build depends on."""
    torch_version: str                          #: ``torch.__version__``, e.g. ``'2.14.1+cu130'``
    torch_cuda: Optional[str]                   #: ``torch.version.cuda`` (``'13.0'``); None for a CPU-only torch
    gpu_capabilities: Tuple[Tuple[int, int], ...] = ()  #: (major, minor) of each GPU torch sees
    cuda_home: Optional[str] = None             #: the toolkit torch's extension builder uses
    nvcc_release: Optional[Tuple[int, int]] = None  #: ``nvcc --version`` of ``cuda_home``; None without nvcc
    library_include_dirs: Tuple[str, ...] = ()  #: torch's ``nvidia/*/include`` directories
    cpus: int = 1
    memory_bytes: int = 0
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class BuildPlan:
    """How to build mmcv; ``problem`` is set when the build cannot run on this host."""
    ops: str
    cxx20: bool
    env: Dict[str, str]
    problem: Optional[str] = None
    warnings: List[str] = field(default_factory=list)


def _version(text: str) -> Tuple[int, int]:
    major, minor = re.match(r'(\d+)\.(\d+)', text).groups()
    return int(major), int(minor)


def nvcc_release(version_output: str) -> Optional[Tuple[int, int]]:
    """``(major, minor)`` from ``nvcc --version`` output (``... release 13.0, V13.0.88``), None if absent."""
    match = re.search(r'release (\d+)\.(\d+)', version_output)
    return (int(match.group(1)), int(match.group(2))) if match else None


def wants_cuda_ops(facts: HostFacts) -> bool:
    """Whether mmcv is to be built with CUDA ops; raises :class:`PlanError` for an unknown switch value or CUDA ops
    with a CPU-only torch."""
    requested = facts.env.get(SWITCH, 'auto').strip().lower() or 'auto'
    if requested not in SWITCH_VALUES:
        raise PlanError(f'{SWITCH}={requested!r}: choose one of {", ".join(SWITCH_VALUES)}.')
    if requested == 'cpu':
        return False
    if requested == 'cuda' and not facts.torch_cuda:
        raise PlanError(f'{SWITCH}=cuda, but torch {facts.torch_version} is a CPU-only build: install a CUDA build '
                        f'of torch, or build CPU ops ({SWITCH}=cpu).')
    return bool(facts.torch_cuda) and (requested == 'cuda' or bool(facts.gpu_capabilities)
                                       or facts.env.get('FORCE_CUDA') == '1')


def cuda_arch_list(facts: HostFacts) -> str:
    """``TORCH_CUDA_ARCH_LIST`` for the build: the user's, else the visible GPUs' compute capabilities."""
    given = facts.env.get('TORCH_CUDA_ARCH_LIST', '').strip()
    if given:
        return given
    if not facts.gpu_capabilities:
        raise PlanError('CUDA ops are requested but torch sees no GPU: set TORCH_CUDA_ARCH_LIST to the compute '
                        'capability of the GPU that will run them (e.g. 9.0 for H100/H200, 8.0 for A100); without '
                        'it mmcv would compile every architecture.')
    return ';'.join(f'{major}.{minor}' for major, minor in sorted(set(facts.gpu_capabilities)))


def arch_tag(arch_list: str) -> str:
    """The architectures in a file name: ``'8.0;9.0+PTX'`` -> ``'sm80_sm90+PTX'``."""
    return '_'.join('sm' + entry.replace('.', '') for entry in re.split(r'[;\s]+', arch_list.strip()) if entry)


def max_jobs(facts: HostFacts) -> str:
    """Parallel compile jobs: the user's ``MAX_JOBS``, else the cores, at most one per 3 GiB of memory."""
    if facts.env.get('MAX_JOBS', '').strip():
        return facts.env['MAX_JOBS'].strip()
    by_memory = facts.memory_bytes // BYTES_PER_JOB if facts.memory_bytes else facts.cpus
    return str(max(1, min(facts.cpus, by_memory)))


def _toolkit_problem(facts: HostFacts) -> Optional[str]:
    """Why the CUDA toolkit at ``facts.cuda_home`` cannot compile mmcv's CUDA ops for this torch, or None."""
    cuda = facts.torch_cuda
    fallback = (f'or build mmcv with CPU ops only: {SWITCH}=cpu bash tools/setup_env.sh (classification and '
                'segmentation still run on the GPU; the detectors, whose RoIAlign, NMS and deformable attention are '
                'mmcv ops, do not).')
    if not facts.cuda_home:
        where = 'CUDA_HOME is not set, nvcc is not on PATH and there is no /usr/local/cuda'
    elif facts.nvcc_release is None:
        where = f'{facts.cuda_home}/bin/nvcc does not exist (CUDA_HOME={facts.cuda_home})'
    elif not os.path.isfile(os.path.join(facts.cuda_home, 'include', 'cuda_runtime.h')):
        where = f'{facts.cuda_home} is no toolkit root (it has no include/cuda_runtime.h)'
    elif not os.path.exists(os.path.join(facts.cuda_home, 'lib64', 'libcudart.so')):
        return (f'{facts.cuda_home}/lib64/libcudart.so is missing (the extension links -lcudart): install the '
                "toolkit's CUDA runtime development files, or link libcudart.so there to a libcudart.so.* (next to "
                f"it or in torch's nvidia/*/lib), {fallback}")
    elif facts.nvcc_release[0] != _version(cuda)[0]:
        found = '.'.join(map(str, facts.nvcc_release))
        return (f'nvcc in {facts.cuda_home} is CUDA {found}, but torch {facts.torch_version} was built with CUDA '
                f'{cuda}: point CUDA_HOME to a CUDA {_version(cuda)[0]}.x toolkit, {fallback}')
    else:
        return None
    return (f"mmcv's CUDA ops need nvcc from a CUDA {cuda} toolkit (torch {facts.torch_version} was built with CUDA "
            f'{cuda}), but {where}. Install the CUDA {cuda} toolkit and set CUDA_HOME to it, {fallback}')


def library_include_path(facts: HostFacts) -> Tuple[List[str], List[str]]:
    """``(directories to add to CPATH, headers found nowhere)`` for :data:`LIBRARY_HEADERS` that the toolkit's
    ``include/`` lacks; the directories come from torch's ``nvidia/*/include``."""
    dirs: List[str] = []
    missing: List[str] = []
    for header in LIBRARY_HEADERS:
        if os.path.isfile(os.path.join(facts.cuda_home, 'include', header)):
            continue
        found = next((d for d in facts.library_include_dirs if os.path.isfile(os.path.join(d, header))), None)
        if found is None:
            missing.append(header)
        elif found not in dirs:
            dirs.append(found)
    return dirs, missing


def plan_build(facts: HostFacts) -> BuildPlan:
    """The mmcv build for ``facts`` (module doc); raises :class:`PlanError` when no ops variant can be chosen."""
    cxx20 = _version(facts.torch_version) >= CXX20_FROM_TORCH
    env = {'MMCV_WITH_OPS': '1', 'MAX_JOBS': max_jobs(facts)}
    if not wants_cuda_ops(facts):
        plan = BuildPlan('cpu', cxx20, env)
        if facts.gpu_capabilities:  # hide the GPU: mmcv's setup.py compiles CUDA ops whenever torch sees one
            env.update(FORCE_CUDA='0', CUDA_VISIBLE_DEVICES='')
            plan.warnings.append(f'building mmcv with CPU ops only ({SWITCH}=cpu) on a GPU host: the detectors '
                                 "(RoIAlign, NMS, deformable attention are mmcv ops) will not run on the GPU.")
        return plan
    arch_list = cuda_arch_list(facts)
    plan = BuildPlan(f'cu{facts.torch_cuda}-{arch_tag(arch_list)}', cxx20,
                     dict(env, FORCE_CUDA='1', TORCH_CUDA_ARCH_LIST=arch_list))
    plan.problem = _toolkit_problem(facts)
    if plan.problem:
        return plan
    plan.env['CUDA_HOME'] = facts.cuda_home
    dirs, missing = library_include_path(facts)
    if missing:
        plan.problem = (f'{", ".join(missing)} (included by torch\'s CUDA headers) are neither in '
                        f'{facts.cuda_home}/include nor in torch\'s nvidia/*/include: install the CUDA toolkit\'s '
                        f'cuBLAS/cuSPARSE/cuSOLVER development headers, or build CPU ops ({SWITCH}=cpu).')
    elif dirs:
        plan.env['CPATH'] = os.pathsep.join(dirs + [p for p in [facts.env.get('CPATH', '')] if p])
        plan.warnings.append(f'{facts.cuda_home}/include lacks CUDA library headers; using {", ".join(dirs)}')
    return plan


def shell_assignments(plan: BuildPlan) -> str:
    """``plan`` as bash assignments (module doc)."""
    build_env = ' '.join(shlex.quote(f'{key}={value}') for key, value in plan.env.items())
    return '\n'.join([f'MMCV_OPS={shlex.quote(plan.ops)}', f'MMCV_CXX20={int(plan.cxx20)}',
                      f'MMCV_BUILD_ENV=({build_env})', f'MMCV_BUILD_PROBLEM={shlex.quote(plan.problem or "")}'])


def _library_include_dirs() -> Tuple[str, ...]:
    spec = importlib.util.find_spec('nvidia')
    roots: Sequence[str] = list(spec.submodule_search_locations or []) if spec else []
    return tuple(sorted(d for root in roots for d in glob.glob(os.path.join(root, '*', 'include'))))


def gather_facts(env: Mapping[str, str] = os.environ) -> HostFacts:
    """The facts of this host (torch, its GPUs and CUDA toolkit, cores, memory) and ``env``."""
    import torch

    gpus = tuple(torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())) \
        if torch.version.cuda and torch.cuda.is_available() else ()
    cuda_home = release = None
    if torch.version.cuda and (gpus or env.get(SWITCH) == 'cuda' or env.get('FORCE_CUDA') == '1'):  # else unused
        from torch.utils.cpp_extension import CUDA_HOME as cuda_home
        nvcc = os.path.join(cuda_home, 'bin', 'nvcc') if cuda_home else ''
        if os.access(nvcc, os.X_OK):
            release = nvcc_release(subprocess.run([nvcc, '--version'], capture_output=True, text=True).stdout)
    memory = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    return HostFacts(torch.__version__, torch.version.cuda, gpus, cuda_home, release, _library_include_dirs(),
                     len(os.sched_getaffinity(0)), memory, dict(env))


def main() -> int:
    try:
        plan = plan_build(gather_facts())
    except PlanError as error:
        print(f'[setup_env] {error}', file=sys.stderr)
        return 1
    for warning in plan.warnings:
        print(f'[setup_env] warning: {warning}', file=sys.stderr)
    print(shell_assignments(plan))
    return 0


if __name__ == '__main__':
    sys.exit(main())
