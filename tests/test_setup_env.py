"""How ``tools/setup_env.sh`` builds mmcv (``tools/misc/mmcv_build_plan.py``), decided on fake hosts: CPU machines
keep the CPU ops and their cached wheel's name, GPU hosts get CUDA ops for their own GPUs or a message that says what
is missing and how to proceed."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

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
