"""Which torch build ``tools/setup_env.sh`` installs, and whether torch then sees the GPUs the driver sees.

    python tools/misc/torch_variant.py choose   # shell assignments that setup_env.sh evaluates
    python tools/misc/torch_variant.py check    # after torch is installed (its interpreter): the GPU check

``MMCAUSAL_TORCH_CUDA`` picks the build of the pinned torch (``requirements/torch.txt``):

* ``auto`` (default): without a working ``nvidia-smi`` (CPU machines, CI) torch's default build from the package
  index pip is configured with (PyPI's Linux wheel is a CUDA 13.0 build). With one, the newest CUDA build the
  driver runs: ``cu130`` (the same default build) from driver 580.65.06, else ``cu128`` from 570.26, else
  ``cu126``, which a driver from 525.60.13 runs through CUDA's minor-version compatibility (full support from
  560.28.03); an older driver stops the set-up.
* ``cu126``, ``cu128``, ``cu130``, ``cpu``: that build from PyTorch's own index,
  ``https://download.pytorch.org/whl/<variant>``.

The minimum Linux drivers are CUDA's release notes' (Table 3, "CUDA Toolkit and Corresponding Driver Versions", and
the minor-version compatibility table): CUDA 12.6 GA >= 560.28.03, 12.8 GA >= 570.26, 13.0 GA >= 580.65.06; any
CUDA 12.x build >= 525.60.13 with minor-version compatibility (no PTX JIT compilation), CUDA 13.x >= 580.

``choose`` prints ``TORCH_VARIANT`` (``default`` or a variant), ``TORCH_INDEX_URL`` (empty for ``default``) and
``TORCH_LOCAL`` (the local version label the build carries, ``+cu128``; empty for ``default``); a setting or driver
that leaves no build to install ends it with one line on stderr and exit status 1. ``check`` ends with one line and
exit status 1 when ``nvidia-smi`` lists GPUs but the installed torch cannot use them (a build the driver is too old
for, or a CPU-only build), unless ``cpu`` was asked for. Only the standard library is used (``check`` imports torch).
"""
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Tuple

SWITCH = 'MMCAUSAL_TORCH_CUDA'
INDEX_URL = 'https://download.pytorch.org/whl/{}'
Version = Tuple[int, ...]
#: variant -> (CUDA release, the Linux driver of its GA release: full compatibility)
CUDA_VARIANTS = {'cu126': ('12.6', (560, 28, 3)), 'cu128': ('12.8', (570, 26)), 'cu130': ('13.0', (580, 65, 6))}
#: the oldest driver that runs any CUDA 12.x build (minor-version compatibility, without PTX JIT)
CUDA12_MINOR_COMPAT = (525, 60, 13)
VARIANTS = ('auto', *CUDA_VARIANTS, 'cpu')
#: what PyPI's default Linux wheel of the pinned torch is built with
DEFAULT_BUILD = 'cu130'


class VariantError(ValueError):
    """No torch build fits the setting and the driver; the message says what to change."""


@dataclass(frozen=True)
class Gpus:
    """What ``nvidia-smi`` reports."""
    names: Tuple[str, ...]
    driver: Version


@dataclass
class Choice:
    variant: str                #: ``default`` (the configured index's build) or a key of :data:`CUDA_VARIANTS` / cpu
    index_url: str = ''
    local: str = ''             #: the build's local version label, ``+cu128``
    notes: List[str] = field(default_factory=list)


def driver_text(driver: Version) -> str:
    return '.'.join(f'{part:02d}' if index else str(part) for index, part in enumerate(driver))


def parse_driver(text: str) -> Version:
    return tuple(int(part) for part in re.findall(r'\d+', text))


def requirements_text() -> str:
    """The minimum driver of each variant, for messages."""
    return ', '.join(f'{variant} >= {driver_text(driver)}' for variant, (_, driver) in CUDA_VARIANTS.items())


def _pinned(variant: str) -> Choice:
    return Choice(variant, INDEX_URL.format(variant), f'+{variant}')


def choose(requested: str, gpus: Optional[Gpus]) -> Choice:
    """The torch build for the switch value ``requested`` on a host whose ``nvidia-smi`` reports ``gpus`` (None: no
    working ``nvidia-smi``); raises :class:`VariantError` when none fits."""
    requested = (requested or 'auto').strip().lower() or 'auto'
    if requested not in VARIANTS:
        raise VariantError(f'{SWITCH}={requested!r}: choose one of {", ".join(VARIANTS)}.')
    if requested == 'cpu':
        return _pinned('cpu')
    driver = gpus.driver if gpus else None
    if requested == 'auto':
        if driver is None or driver >= CUDA_VARIANTS[DEFAULT_BUILD][1]:
            return Choice('default')
        requested = next((variant for variant in ('cu128', 'cu126') if driver >= CUDA_VARIANTS[variant][1]), 'cu126')
    choice = _pinned(requested)
    if driver is None:
        return choice
    release, full = CUDA_VARIANTS[requested]
    oldest = CUDA12_MINOR_COMPAT if release.startswith('12.') else full
    if driver < oldest:
        raise VariantError(
            f'the NVIDIA driver {driver_text(driver)} is too old for torch\'s CUDA {release} build ({requested} needs '
            f'>= {driver_text(oldest)}; {requirements_text()} for full support): update the driver, or install the '
            f'CPU build ({SWITCH}=cpu).')
    if driver < full:
        choice.notes.append(f'the NVIDIA driver {driver_text(driver)} runs torch\'s CUDA {release} build through '
                            f'CUDA minor-version compatibility (full support from {driver_text(full)}): kernels '
                            'compiled at run time from PTX cannot load; update the driver if one fails.')
    return choice


def read_nvidia_smi() -> Optional[Gpus]:
    """The GPUs and driver ``nvidia-smi`` reports, or None without a working ``nvidia-smi`` (none on PATH, no driver
    loaded, no GPU)."""
    try:
        result = subprocess.run(['nvidia-smi', '--query-gpu=name,driver_version', '--format=csv,noheader'],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [line.rsplit(',', 1) for line in result.stdout.splitlines() if line.count(',') >= 1]
    if result.returncode != 0 or not rows:
        return None
    return Gpus(tuple(name.strip() for name, _ in rows), parse_driver(rows[0][1]))


def shell_assignments(choice: Choice) -> str:
    import shlex
    return '\n'.join(f'{key}={shlex.quote(value)}' for key, value in
                     (('TORCH_VARIANT', choice.variant), ('TORCH_INDEX_URL', choice.index_url),
                      ('TORCH_LOCAL', choice.local)))


def visibility_problem(gpus: Optional[Gpus], torch_version: str, torch_cuda: Optional[str], torch_sees_gpu: bool,
                       env: Mapping[str, str]) -> Optional[str]:
    """Why torch does not use the GPUs ``nvidia-smi`` lists, or None (no GPU listed, torch sees one, or the CPU build
    was asked for)."""
    requested = env.get(SWITCH, 'auto').strip().lower()
    if gpus is None or torch_sees_gpu or requested == 'cpu':
        return None
    what = f'{len(gpus.names)} GPU{"s" if len(gpus.names) > 1 else ""} ({gpus.names[0]}, driver ' \
           f'{driver_text(gpus.driver)})'
    hidden = env.get('CUDA_VISIBLE_DEVICES')
    if hidden is not None and not re.search(r'\d|GPU-|MIG-', hidden):
        return (f'nvidia-smi lists {what} but CUDA_VISIBLE_DEVICES={hidden!r} hides them from torch: unset it, or '
                f'install the CPU build ({SWITCH}=cpu).')
    if not torch_cuda:
        build = f'torch {torch_version} is a CPU-only build'
    else:
        build = f'torch {torch_version} (CUDA {torch_cuda}) cannot use them'
        release = CUDA_VARIANTS.get('cu' + torch_cuda.replace('.', ''))
        oldest = (CUDA12_MINOR_COMPAT if torch_cuda.startswith('12.') else release[1]) if release else None
        if oldest and gpus.driver >= oldest:  # the driver runs this build: the GPUs are not reachable
            return (f'nvidia-smi lists {what} but {build}, although the driver runs CUDA {torch_cuda}: check that '
                    'this process may open /dev/nvidia* (e.g. that the job has GPUs allocated).')
    try:
        fix = choose('auto', gpus)
        variant = DEFAULT_BUILD if fix.variant == 'default' else fix.variant
        remedy = f'install the build for this driver: {SWITCH}={variant} bash tools/setup_env.sh'
    except VariantError:
        remedy = 'update the driver'
    return f'nvidia-smi lists {what} but {build}: {remedy} (minimum drivers: {requirements_text()}).'


def main(argv: List[str]) -> int:
    mode = argv[1] if len(argv) > 1 else ''
    try:
        if mode == 'choose':
            choice = choose(os.environ.get(SWITCH, 'auto'), read_nvidia_smi())
            for note in choice.notes:
                print(f'[setup_env] note: {note}', file=sys.stderr)
            print(shell_assignments(choice))
            return 0
        if mode == 'check':
            import warnings
            with warnings.catch_warnings():  # torch warns about an old driver; the message below says it
                warnings.simplefilter('ignore')
                import torch
                sees = bool(torch.version.cuda) and torch.cuda.is_available()
            problem = visibility_problem(read_nvidia_smi(), torch.__version__, torch.version.cuda, sees, os.environ)
            if problem:
                raise VariantError(problem)
            return 0
    except VariantError as error:
        print(f'[setup_env] {error}', file=sys.stderr)
        return 1
    print('usage: python tools/misc/torch_variant.py choose|check', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
