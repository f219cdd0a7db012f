"""How ``tools/setup_env.sh`` picks torch's build (``tools/misc/torch_variant.py``) and builds mmcv
(``tools/misc/mmcv_build_plan.py``), decided on fake hosts: CPU machines keep PyPI's torch, the CPU ops and their
cached wheel's name; GPU hosts get a torch build their driver runs, CUDA ops for their own GPUs, or a message that says
what is missing and how to proceed. The script itself runs on a copy of its files with a fake ``nvidia-smi``, a fake
interpreter (standard library only, plus a fake ``torch`` package), a fake ``uv`` and a fake ``pip``: nothing is
downloaded or installed."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'tools' / 'misc' / 'mmcv_build_plan.py'
_spec = importlib.util.spec_from_file_location('mmcv_build_plan', SCRIPT)
build_plan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_plan)
HostFacts, PlanError, plan_build = build_plan.HostFacts, build_plan.PlanError, build_plan.plan_build

GIB = 2**30
H100 = (9, 0)
HEADERS = ('cublas_v2.h', 'cublasLt.h', 'cusparse.h', 'cusolverDn.h')


def _toolkit(root: Path, headers=HEADERS, cudart: bool = True) -> str:
    """A fake CUDA toolkit: bin/nvcc, include/cuda_runtime.h and ``headers``, lib64/libcudart.so."""
    for folder in ('bin', 'include', 'lib64'):
        (root / folder).mkdir(parents=True)
    (root / 'bin' / 'nvcc').write_text('#!/bin/sh\n')
    for header in ('cuda_runtime.h', *headers):
        (root / 'include' / header).write_text('')
    if cudart:
        (root / 'lib64' / 'libcudart.so').write_text('')
    return str(root)


def _host(torch_version='2.14.1+cu130', torch_cuda='13.0', gpus=(), cuda_home=None, nvcc=(13, 0), include_dirs=(),
          cpus=16, memory=128 * GIB, **env) -> HostFacts:
    return HostFacts(torch_version, torch_cuda, tuple(gpus), cuda_home, nvcc if cuda_home else None,
                     tuple(include_dirs), cpus, memory, env)


# --- CPU hosts (CI) ---------------------------------------------------------------------------------------------
def test_cpu_host_builds_cpu_ops_under_the_unsuffixed_cache_name():
    plan = plan_build(_host(cpus=2, memory=23 * GIB))
    assert plan.ops == 'cpu' and plan.problem is None and plan.warnings == []
    assert plan.env == {'MMCV_WITH_OPS': '1', 'MAX_JOBS': '2'}


def test_a_cpu_only_torch_builds_cpu_ops():
    assert plan_build(_host(torch_version='2.14.1+cpu', torch_cuda=None, FORCE_CUDA='1')).ops == 'cpu'


@pytest.mark.parametrize('version, cxx20', [('2.11.0+cu130', False), ('2.13.1', False), ('2.14.1+cu130', True),
                                            ('2.15.0.dev20261101', True), ('3.0.0', True)])
def test_cxx20_patch_only_for_torch_headers_that_need_it(version, cxx20):
    assert plan_build(_host(torch_version=version)).cxx20 is cxx20


@pytest.mark.parametrize('cpus, memory, env, jobs', [(16, 128 * GIB, {}, '16'), (16, 16 * GIB, {}, '5'),
                                                     (2, 2 * GIB, {}, '1'), (16, 128 * GIB, {'MAX_JOBS': '3'}, '3')])
def test_max_jobs_from_cores_and_memory_unless_given(cpus, memory, env, jobs):
    assert plan_build(_host(cpus=cpus, memory=memory, **env)).env['MAX_JOBS'] == jobs


# --- GPU hosts --------------------------------------------------------------------------------------------------
def test_gpu_host_with_toolkit_builds_cuda_ops_for_its_gpu(tmp_path):
    home = _toolkit(tmp_path / 'cuda')
    plan = plan_build(_host(gpus=[H100], cuda_home=home))
    assert plan.problem is None and plan.ops == 'cu13.0-sm90'
    assert plan.env == {'MMCV_WITH_OPS': '1', 'MAX_JOBS': '16', 'FORCE_CUDA': '1', 'TORCH_CUDA_ARCH_LIST': '9.0',
                        'CUDA_HOME': home}


def test_arch_list_covers_each_visible_gpu_once(tmp_path):
    plan = plan_build(_host(gpus=[H100, (8, 0), H100], cuda_home=_toolkit(tmp_path / 'cuda')))
    assert plan.env['TORCH_CUDA_ARCH_LIST'] == '8.0;9.0' and plan.ops == 'cu13.0-sm80_sm90'


def test_a_given_arch_list_is_kept_and_names_the_wheel(tmp_path):
    plan = plan_build(_host(gpus=[H100], cuda_home=_toolkit(tmp_path / 'cuda'), TORCH_CUDA_ARCH_LIST='8.0;9.0+PTX'))
    assert plan.env['TORCH_CUDA_ARCH_LIST'] == '8.0;9.0+PTX' and plan.ops == 'cu13.0-sm80_sm90+PTX'


def test_gpu_host_without_nvcc_says_what_is_missing_and_how_to_proceed():
    plan = plan_build(_host(gpus=[H100]))
    assert plan.ops == 'cu13.0-sm90'  # a cached wheel of this variant still installs without a toolkit
    assert 'nvcc' in plan.problem and 'CUDA 13.0 toolkit' in plan.problem and 'CUDA_HOME' in plan.problem
    assert 'MMCAUSAL_MMCV_OPS=cpu' in plan.problem and 'detectors' in plan.problem


def test_cuda_home_without_nvcc_is_named(tmp_path):
    home = tmp_path / 'cuda'
    home.mkdir()
    plan = plan_build(HostFacts('2.11.0+cu130', '13.0', (H100,), str(home), None, (), 16, 128 * GIB, {}))
    assert f'{home}/bin/nvcc does not exist' in plan.problem


def test_nvcc_of_another_cuda_major_is_refused(tmp_path):
    plan = plan_build(_host(gpus=[H100], cuda_home=_toolkit(tmp_path / 'cuda'), nvcc=(12, 8)))
    assert 'CUDA 12.8' in plan.problem and 'CUDA 13.x toolkit' in plan.problem


def test_cuda_home_that_is_no_toolkit_root_is_named(tmp_path):
    (tmp_path / 'bin').mkdir()  # e.g. nvcc found on PATH as /usr/local/bin/nvcc -> CUDA_HOME=/usr/local
    (tmp_path / 'bin' / 'nvcc').write_text('')
    plan = plan_build(_host(gpus=[H100], cuda_home=str(tmp_path)))
    assert 'no include/cuda_runtime.h' in plan.problem


def test_toolkit_without_the_cuda_runtime_library_is_named(tmp_path):
    plan = plan_build(_host(gpus=[H100], cuda_home=_toolkit(tmp_path / 'cuda', cudart=False)))
    assert 'lib64/libcudart.so is missing' in plan.problem and 'MMCAUSAL_MMCV_OPS=cpu' in plan.problem


def test_library_headers_come_from_torchs_nvidia_packages(tmp_path):
    home = _toolkit(tmp_path / 'cuda', headers=('cublas_v2.h',))
    wheel_include = tmp_path / 'site' / 'nvidia' / 'cu13' / 'include'
    wheel_include.mkdir(parents=True)
    for header in HEADERS:
        (wheel_include / header).write_text('')
    other = tmp_path / 'site' / 'nvidia' / 'cudnn' / 'include'
    other.mkdir(parents=True)
    plan = plan_build(_host(gpus=[H100], cuda_home=home, include_dirs=[str(other), str(wheel_include)],
                            CPATH='/opt/include'))
    assert plan.problem is None
    assert plan.env['CPATH'] == f'{wheel_include}{os.pathsep}/opt/include'
    assert any(str(wheel_include) in warning for warning in plan.warnings)


def test_library_headers_found_nowhere_are_named(tmp_path):
    plan = plan_build(_host(gpus=[H100], cuda_home=_toolkit(tmp_path / 'cuda', headers=('cublas_v2.h',))))
    assert plan.problem.startswith('cublasLt.h, cusparse.h, cusolverDn.h (included by torch')


def test_cpu_ops_on_a_gpu_host_on_request_hide_the_gpu_and_warn():
    plan = plan_build(_host(gpus=[H100], MMCAUSAL_MMCV_OPS='cpu'))
    assert plan.ops == 'cpu' and plan.problem is None
    assert plan.env['CUDA_VISIBLE_DEVICES'] == '' and plan.env['FORCE_CUDA'] == '0'
    assert len(plan.warnings) == 1 and 'detectors' in plan.warnings[0] and 'not run on the GPU' in plan.warnings[0]


def test_cuda_ops_without_a_gpu_need_an_arch_list(tmp_path):
    with pytest.raises(PlanError, match='TORCH_CUDA_ARCH_LIST'):
        plan_build(_host(MMCAUSAL_MMCV_OPS='cuda'))
    with pytest.raises(PlanError, match='TORCH_CUDA_ARCH_LIST'):
        plan_build(_host(FORCE_CUDA='1'))
    plan = plan_build(_host(cuda_home=_toolkit(tmp_path / 'cuda'), MMCAUSAL_MMCV_OPS='cuda',
                            TORCH_CUDA_ARCH_LIST='9.0'))
    assert plan.ops == 'cu13.0-sm90' and plan.problem is None


@pytest.mark.parametrize('host, message', [
    (dict(MMCAUSAL_MMCV_OPS='gpu'), "MMCAUSAL_MMCV_OPS='gpu': choose one of auto, cpu, cuda"),
    (dict(torch_cuda=None, MMCAUSAL_MMCV_OPS='cuda'), 'is a CPU-only build')])
def test_impossible_settings_are_refused(host, message):
    with pytest.raises(PlanError, match=message):
        plan_build(_host(**host))


def test_nvcc_release_is_read_from_its_version_output():
    output = 'nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n'
    assert build_plan.nvcc_release(output) == (13, 0) and build_plan.nvcc_release('') is None


# --- what setup_env.sh reads ------------------------------------------------------------------------------------
def _bash(script: str) -> str:
    return subprocess.run(['bash', '-c', script], capture_output=True, text=True, check=True).stdout


def test_shell_assignments_survive_bash():
    plan = build_plan.BuildPlan('cu13.0-sm90', True, {'MAX_JOBS': '4', 'CPATH': "/a b/it's:/c"},
                                problem='no nvcc; set "CUDA_HOME"')
    out = _bash(build_plan.shell_assignments(plan) + '\nprintf "%s\\n" "$MMCV_OPS" "$MMCV_CXX20" '
                '"${#MMCV_BUILD_ENV[@]}" "${MMCV_BUILD_ENV[@]}" "$MMCV_BUILD_PROBLEM"')
    assert out.splitlines() == ['cu13.0-sm90', '1', '2', 'MAX_JOBS=4', "CPATH=/a b/it's:/c", 'no nvcc; set "CUDA_HOME"']


def _run_script(**env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ('MMCAUSAL_MMCV_OPS', 'FORCE_CUDA', 'MAX_JOBS')}
    return subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env={**clean, **env})


@pytest.mark.skipif(__import__('torch').cuda.is_available(), reason='checks a host without a GPU')
def test_script_on_this_cpu_host_keeps_the_cpu_wheel():
    result = _run_script()
    assert result.returncode == 0, result.stderr
    assert 'MMCV_OPS=cpu' in result.stdout.splitlines() and 'MMCV_BUILD_PROBLEM=\'\'' in result.stdout


def test_script_ends_an_impossible_setting_in_one_line():
    result = _run_script(MMCAUSAL_MMCV_OPS='gpu')
    assert result.returncode == 1 and result.stdout == ''
    assert result.stderr.strip().splitlines() == [
        "[setup_env] MMCAUSAL_MMCV_OPS='gpu': choose one of auto, cpu, cuda."]


# --- which torch build (tools/misc/torch_variant.py) ---------------------------------------------------------------
VARIANT_SCRIPT = ROOT / 'tools' / 'misc' / 'torch_variant.py'
_vspec = importlib.util.spec_from_file_location('torch_variant', VARIANT_SCRIPT)
torch_variant = importlib.util.module_from_spec(_vspec)
_vspec.loader.exec_module(torch_variant)
Gpus, VariantError, choose = torch_variant.Gpus, torch_variant.VariantError, torch_variant.choose


def _gpus(driver: str, count: int = 8) -> 'Gpus':
    return Gpus(('NVIDIA H100 80GB HBM3',) * count, torch_variant.parse_driver(driver))


@pytest.mark.parametrize('driver, variant', [('580.65.06', 'default'), ('590.44.01', 'default'), ('580.65.05', 'cu128'),
                                             ('570.26', 'cu128'), ('570.25.99', 'cu126'), ('560.28.03', 'cu126'),
                                             ('535.183.01', 'cu126'), ('525.60.13', 'cu126')])
def test_auto_takes_the_newest_build_the_driver_runs(driver, variant):
    choice = choose('auto', _gpus(driver))
    assert choice.variant == variant
    if variant == 'default':  # PyPI's build through the configured index: no index URL, no label
        assert (choice.index_url, choice.local) == ('', '')
    else:
        assert choice.index_url == f'https://download.pytorch.org/whl/{variant}' and choice.local == f'+{variant}'


def test_auto_without_nvidia_smi_keeps_the_default_build():
    assert choose('', None).variant == 'default' and choose('auto', None).notes == []


def test_a_driver_between_minor_compatibility_and_full_support_gets_a_note():
    assert choose('auto', _gpus('560.28.03')).notes == []
    notes = choose('auto', _gpus('535.183.01')).notes
    assert len(notes) == 1 and 'minor-version compatibility' in notes[0] and '560.28.03' in notes[0]


@pytest.mark.parametrize('requested, driver, message', [
    ('auto', '525.60.12', "driver 525.60.12 is too old for torch's CUDA 12.6 build (cu126 needs >= 525.60.13"),
    ('cu130', '570.86.15', "driver 570.86.15 is too old for torch's CUDA 13.0 build (cu130 needs >= 580.65.06"),
    ('cu128', '470.256.02', 'cu128 needs >= 525.60.13'),
    ('cu121', None, "MMCAUSAL_TORCH_CUDA='cu121': choose one of auto, cu126, cu128, cu130, cpu.")])
def test_builds_the_driver_cannot_run_are_refused(requested, driver, message):
    with pytest.raises(VariantError) as error:
        choose(requested, _gpus(driver) if driver else None)
    assert message in str(error.value)
    if driver:
        assert 'cu126 >= 560.28.03, cu128 >= 570.26, cu130 >= 580.65.06' in str(error.value)
        assert 'MMCAUSAL_TORCH_CUDA=cpu' in str(error.value)


@pytest.mark.parametrize('requested', ['cu126', 'cu128', 'cu130', 'cpu', ' CU128 '])
def test_an_explicit_build_comes_from_pytorchs_index(requested):
    variant = requested.strip().lower()
    for gpus in (None, _gpus('590.44.01')):
        choice = choose(requested, gpus)
        assert (choice.variant, choice.index_url, choice.local) == (
            variant, f'https://download.pytorch.org/whl/{variant}', f'+{variant}')


def test_the_cpu_build_is_allowed_on_any_driver():
    assert choose('cpu', _gpus('390.157')).variant == 'cpu'


@pytest.mark.parametrize('torch_version, torch_cuda, driver, expected', [
    ('2.14.1+cu130', '13.0', '570.86.15', 'torch 2.14.1+cu130 (CUDA 13.0) cannot use them: install the build for this '
     'driver: MMCAUSAL_TORCH_CUDA=cu128 bash tools/setup_env.sh'),
    ('2.14.1+cpu', None, '590.44.01', 'torch 2.14.1+cpu is a CPU-only build: install the build for this driver: '
     'MMCAUSAL_TORCH_CUDA=cu130 bash tools/setup_env.sh'),
    ('2.14.1+cu128', '12.8', '470.256.02', 'cannot use them: update the driver'),
    ('2.14.1+cu128', '12.8', '570.86.15', 'although the driver runs CUDA 12.8: check that this process may open '
     '/dev/nvidia*')])
def test_gpus_torch_cannot_use_are_explained(torch_version, torch_cuda, driver, expected):
    problem = torch_variant.visibility_problem(_gpus(driver), torch_version, torch_cuda, False, {})
    assert problem.startswith(f'nvidia-smi lists 8 GPUs (NVIDIA H100 80GB HBM3, driver {driver}) but ')
    assert expected in problem and '\n' not in problem


@pytest.mark.parametrize('gpus, sees, env', [(None, False, {}), ('570.86.15', True, {}),
                                             ('570.86.15', False, {'MMCAUSAL_TORCH_CUDA': 'cpu'})])
def test_no_problem_without_gpus_with_a_working_torch_or_when_cpu_was_asked_for(gpus, sees, env):
    assert torch_variant.visibility_problem(_gpus(gpus) if gpus else None, '2.14.1', '12.8', sees, env) is None


def test_gpus_hidden_on_purpose_are_named():
    problem = torch_variant.visibility_problem(_gpus('590.44.01'), '2.14.1', '13.0', False,
                                               {'CUDA_VISIBLE_DEVICES': ''})
    assert "CUDA_VISIBLE_DEVICES='' hides them" in problem


# --- setup_env.sh on fake hosts --------------------------------------------------------------------------------------
FAKE_PYTHON = r"""#!/usr/bin/env bash
# The interpreter of a fake environment: pip and venv are logged and emulated; the stack check and the scan build
# (stdin scripts importing mmcv / mmcausal) succeed; anything else runs on the real interpreter without its
# site-packages (-S), with the fake torch of $FAKE_SITE.
echo "python $*" >>"$FAKE_LOG"
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "$1" == --version ]]; then echo "Python 3.11.0"; exit 0; fi
if [[ "$1 $2" == "-m venv" ]]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
if [[ "$1 $2" == "-m compileall" ]]; then exit 0; fi
if [[ "$1 $2" == "-m pip" ]]; then
  shift 2
  [[ "$1" == --disable-pip-version-check ]] && shift
  case "$1" in
    config) exit 1 ;;
    download|wheel) echo "fake pip cannot $1" >&2; exit 3 ;;
    install)
      echo "pip $* | constraints: $(tr '\n' ' ' <"${PIP_CONSTRAINT:-/dev/null}")" >>"$FAKE_LOG"
      if [[ " $* " == *" uv=="* ]]; then
        printf '#!/usr/bin/env bash\necho "uv $*" >>"$FAKE_LOG"\n' >"$here/uv" && chmod +x "$here/uv"
      fi
      exit 0 ;;
  esac
  exit 0
fi
if [[ "$1" == - ]]; then
  code="$(cat)"
  if [[ "$code" == *"import mmdet"* || "$code" == *cpu_scan_extension* ]]; then
    echo "stack check or scan" >>"$FAKE_LOG"; exit 0
  fi
  shift
  PYTHONPATH="$FAKE_SITE" exec "$REAL_PYTHON" -S - "$@" <<<"$code"
fi
PYTHONPATH="$FAKE_SITE" exec "$REAL_PYTHON" -S "$@"
"""

FAKE_TORCH = """import os
__version__ = {version!r}


class version:
    cuda = {cuda!r}


class cuda:
    @staticmethod
    def is_available():
        return os.environ.get('FAKE_TORCH_SEES_GPUS') == '1'

    @staticmethod
    def device_count():
        return 8 if cuda.is_available() else 0

    @staticmethod
    def get_device_capability(index):
        return (9, 0)
"""


class FakeHost:
    """A copy of the set-up's files in ``tmp_path/root`` and a fake ``nvidia-smi``, interpreter, pip and uv."""

    def __init__(self, tmp_path: Path, driver: 'str | None', torch_version: 'str | None' = None,
                 torch_cuda: 'str | None' = '13.0', distribution: 'str | None' = None):
        self.root, self.bin, self.site, self.cache = (tmp_path / name for name in ('root', 'bin', 'site', 'cache'))
        self.log = tmp_path / 'calls.log'
        for relative in ('tools/setup_env.sh', 'tools/misc/mmcv_build_plan.py', 'tools/misc/torch_variant.py',
                         'pyproject.toml', *(f'requirements/{p.name}' for p in (ROOT / 'requirements').glob('*.txt'))):
            (self.root / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.root / relative).write_text((ROOT / relative).read_text())
        for folder in (self.bin, self.site, self.cache):
            folder.mkdir()
        self._script('python3-fake', FAKE_PYTHON)
        rows = f'NVIDIA H100 80GB HBM3, {driver}\\n' * 8 if driver else ''
        self._script('nvidia-smi', f'#!/usr/bin/env bash\nprintf "{rows}"\nexit {0 if driver else 9}\n')
        if torch_version:
            (self.site / 'torch' / 'utils').mkdir(parents=True)
            (self.site / 'torch' / '__init__.py').write_text(FAKE_TORCH.format(version=torch_version, cuda=torch_cuda))
            (self.site / 'torch' / 'utils' / '__init__.py').write_text('')
            (self.site / 'torch' / 'utils' / 'cpp_extension.py').write_text('CUDA_HOME = None\n')
            distribution = distribution or torch_version
            (self.site / f'torch-{distribution}.dist-info').mkdir()
            (self.site / f'torch-{distribution}.dist-info' / 'METADATA').write_text(
                f'Metadata-Version: 2.1\nName: torch\nVersion: {distribution}\n')

    def _script(self, name: str, text: str):
        (self.bin / name).write_text(text)
        (self.bin / name).chmod(0o755)

    def cached_wheel(self, torch_build: str, ops: str = '') -> Path:
        """A cached mmcv wheel, so that no compile is attempted."""
        tag = f'cp{sys.version_info[0]}{sys.version_info[1]}'
        folder = self.cache / 'wheels' / f'mmcv-2.1.0-torch{torch_build}-{tag}{ops}'
        folder.mkdir(parents=True)
        (folder / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').write_text('')
        return folder

    def run(self, *args: str, **env) -> subprocess.CompletedProcess:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(('MMCAUSAL_', 'PIP_', 'CUDA', 'TORCH_'))
                and k not in ('FORCE_CUDA', 'MAX_JOBS', 'PYTHONPATH', 'VIRTUAL_ENV')}
        env = {**keep, 'PATH': f'{self.bin}{os.pathsep}{os.environ["PATH"]}', 'PYTHON': str(self.bin / 'python3-fake'),
               'MMCAUSAL_CACHE': str(self.cache), 'HOME': str(self.site.parent), 'FAKE_LOG': str(self.log),
               'FAKE_SITE': str(self.site), 'REAL_PYTHON': sys.executable, **env}
        return subprocess.run(['bash', str(self.root / 'tools/setup_env.sh'), *args], capture_output=True, text=True,
                               env=env, timeout=120)

    def calls(self, prefix: str) -> List[str]:
        return [line for line in self.log.read_text().splitlines() if line.startswith(prefix)] \
            if self.log.exists() else []


def test_setup_on_a_cpu_host_installs_pypis_torch_and_keeps_the_cpu_wheel(tmp_path):
    host = FakeHost(tmp_path, driver=None, torch_version='2.14.1+cu130', distribution='2.14.1')
    host.cached_wheel('2.14.1')  # the plain name of a CPU-ops wheel already in a cache
    result = host.run()
    assert result.returncode == 0, result.stdout + result.stderr
    torch_install = [call for call in host.calls('uv ') if 'torch.txt' in call]
    assert len(torch_install) == 1 and '--index-url' not in torch_install[0]
    assert any('mmcv-2.1.0-torch2.14.1-cp' in call for call in host.calls('uv '))
    assert result.stdout.splitlines()[-1] == f'[setup_env] ready: {host.root}/.venv'


def test_setup_on_a_cuda_12_8_driver_installs_the_cu128_build_and_its_cuda_ops_wheel(tmp_path):
    host = FakeHost(tmp_path, driver='570.86.15', torch_version='2.14.1+cu128', torch_cuda='12.8')
    wheel = host.cached_wheel('2.14.1+cu128', '-cu12.8-sm90')
    result = host.run(FAKE_TORCH_SEES_GPUS='1')
    assert result.returncode == 0, result.stdout + result.stderr
    torch_install = [call for call in host.calls('uv ') if 'torch==' in call]
    assert len(torch_install) == 1
    assert torch_install[0].endswith('--index-url https://download.pytorch.org/whl/cu128 torch==2.14.1+cu128 '
                                     'torchvision==0.29.1+cu128')
    assert any(str(wheel) in call for call in host.calls('uv '))
    assert 'cu128 build from https://download.pytorch.org/whl/cu128' in result.stdout
    # a second run with nothing changed returns at once
    again = host.run(FAKE_TORCH_SEES_GPUS='1')
    assert again.returncode == 0 and again.stdout.strip() == f'[setup_env] environment up to date ({host.root}/.venv)'


def test_setup_stops_when_nvidia_smi_sees_gpus_that_torch_cannot_use(tmp_path):
    host = FakeHost(tmp_path, driver='590.44.01', torch_version='2.14.1+cpu', torch_cuda=None)
    host.cached_wheel('2.14.1+cpu')
    result = host.run()
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        '[setup_env] nvidia-smi lists 8 GPUs (NVIDIA H100 80GB HBM3, driver 590.44.01) but torch 2.14.1+cpu is a '
        'CPU-only build: install the build for this driver: MMCAUSAL_TORCH_CUDA=cu130 bash tools/setup_env.sh '
        '(minimum drivers: cu126 >= 560.28.03, cu128 >= 570.26, cu130 >= 580.65.06).']
    assert not any('.whl' in call for call in host.calls('uv '))  # no CPU-ops mmcv was installed for it
    assert 'compiling mmcv' not in result.stdout and 'ready' not in result.stdout


def test_a_ready_environment_is_not_up_to_date_once_torch_loses_the_gpus(tmp_path):
    host = FakeHost(tmp_path, driver='570.86.15', torch_version='2.14.1+cu128', torch_cuda='12.8')
    host.cached_wheel('2.14.1+cu128', '-cu12.8-sm90')
    assert host.run(FAKE_TORCH_SEES_GPUS='1').returncode == 0
    result = host.run(FAKE_TORCH_SEES_GPUS='0')  # e.g. a node whose driver was downgraded
    assert result.returncode == 1 and 'up to date' not in result.stdout
    assert 'although the driver runs CUDA 12.8' in result.stderr


def test_setup_stops_before_anything_when_the_driver_is_too_old(tmp_path):
    host = FakeHost(tmp_path, driver='470.256.02')
    result = host.run()
    assert result.returncode == 1 and result.stdout == ''
    assert len(result.stderr.strip().splitlines()) == 1
    assert 'driver 470.256.02 is too old' in result.stderr
    assert not (host.root / '.venv').exists() and host.calls('uv ') == []


def test_an_explicit_cpu_build_on_a_gpu_host_is_taken(tmp_path):
    host = FakeHost(tmp_path, driver='590.44.01', torch_version='2.14.1+cpu', torch_cuda=None)
    host.cached_wheel('2.14.1+cpu')
    result = host.run(MMCAUSAL_TORCH_CUDA='cpu')
    assert result.returncode == 0, result.stdout + result.stderr
    assert any(call.endswith('--index-url https://download.pytorch.org/whl/cpu torch==2.14.1+cpu '
                             'torchvision==0.29.1+cpu') for call in host.calls('uv '))


def test_into_current_env_keeps_its_torch_and_installs_the_projects_mmcv_build(tmp_path):
    host = FakeHost(tmp_path, driver='560.35.03', torch_version='2.14.1+cu126', torch_cuda='12.6')
    wheel = host.cached_wheel('2.14.1+cu126', '-cu12.6-sm90')
    result = host.run('--into-current-env', FAKE_TORCH_SEES_GPUS='1')
    assert result.returncode == 0, result.stdout + result.stderr
    installs = [call.split(' | constraints: ') for call in host.calls('pip install')]
    assert all('torch==2.14.1+cu126' in constraints and 'setuptools>=77.0.3,<82' in constraints
               for _, constraints in installs)
    commands = [command for command, _ in installs]
    requirements = host.root / 'requirements'
    assert commands == [
        f'pip install -q -r {requirements}/build.txt',
        f'pip install -q --force-reinstall --no-deps {wheel}/mmcv-2.1.0-cp311-cp311-linux_x86_64.whl',
        f'pip install -q -r {requirements}/runtime.txt onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0',
        f'pip install -q --no-deps --no-build-isolation -e {host.root}']
    assert host.calls('uv ') == [] and not (host.root / '.venv').exists()


def test_into_current_env_without_torch_says_what_to_install(tmp_path):
    host = FakeHost(tmp_path, driver=None)
    result = host.run('--into-current-env')
    assert result.returncode == 1
    assert 'has no torch: install torch >= 2.6' in result.stdout and host.calls('pip ') == []


def test_unknown_options_are_refused():
    result = subprocess.run(['bash', str(ROOT / 'tools/setup_env.sh'), '--into-venv'], capture_output=True, text=True)
    assert result.returncode == 2 and 'unknown option --into-venv' in result.stdout
