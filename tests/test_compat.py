"""Tests for mmcausal.compat: the shims for the pinned stack (config parser, package lookup, CPU gloo)."""
import importlib
import os
import os.path as osp
import socket
import subprocess
import sys

from mmengine.config import Config

import mmcausal  # noqa: F401  (applies the shims)

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


# --------------------------------------------------------------------------------------------------
# Config parser
# --------------------------------------------------------------------------------------------------
def test_stdlib_modules_are_builtin():
    from mmengine.config import config as config_module
    from mmengine.config import utils as config_utils
    for is_builtin in (config_utils._is_builtin_module, config_module._is_builtin_module):
        assert is_builtin('os') and is_builtin('math') and is_builtin('os.path')
        assert not is_builtin('numpy') and not is_builtin('mmengine.runner')


def test_old_style_config_with_import_before_base(tmp_path):
    (tmp_path / 'base.py').write_text('a = 1\n')
    cfg_file = tmp_path / 'cfg.py'
    cfg_file.write_text("import os\n_base_ = ['./base.py']\nb = os.path.join('x', 'y')\n")
    cfg = Config.fromfile(str(cfg_file))
    assert cfg.a == 1 and cfg.b == osp.join('x', 'y')


def test_package_base_config_without_pkg_resources(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'pkg_resources', None)  # any import of it now fails
    cfg_file = tmp_path / 'cfg.py'
    cfg_file.write_text("_base_ = ['mmseg::_base_/default_runtime.py']\n")
    cfg = Config.fromfile(str(cfg_file))
    assert cfg.default_scope == 'mmseg'


# --------------------------------------------------------------------------------------------------
# Distributed on CPU: init_dist('pytorch', backend='nccl') -> gloo; DDP wraps a CPU module
# --------------------------------------------------------------------------------------------------
GLOO_SCRIPT = """
import warnings
import torch
import torch.distributed as dist
import mmcausal  # noqa: F401
from mmengine.dist import init_dist
from mmengine.model import MMDistributedDataParallel
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    init_dist('pytorch', backend='nccl')
print('backend', dist.get_backend())
print('warned', any('gloo' in str(w.message) for w in caught))
model = MMDistributedDataParallel(torch.nn.Linear(2, 1), device_ids=[0])
out = model(torch.ones(3, 2)).sum()
out.backward()
print('ddp_ok', tuple(out.shape))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_init_dist_uses_gloo_on_cpu():
    env = dict(os.environ, RANK='0', WORLD_SIZE='1', LOCAL_RANK='0', MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(free_port()), CUDA_VISIBLE_DEVICES='', PYTHONPATH=REPO_ROOT)
    result = subprocess.run([sys.executable, '-c', GLOO_SCRIPT], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'backend gloo' in result.stdout
    assert 'warned True' in result.stdout
    assert 'ddp_ok ()' in result.stdout


# --------------------------------------------------------------------------------------------------
# Shims are guarded: they skip what the installed mmengine lacks or already fixes
# --------------------------------------------------------------------------------------------------
def test_import_survives_an_mmengine_without_strategies():
    """``mmengine._strategy.distributed`` (patched for init_dist) does not exist before mmengine 0.8."""
    script = ("import sys, mmengine.runner; sys.modules['mmengine._strategy.distributed'] = None\n"
              'import mmcausal\n'
              'from mmengine.dist import init_dist; from mmengine.runner import runner\n'
              "print(getattr(init_dist, '__mmcausal_shim__', False), runner.init_dist is init_dist)")
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ['True', 'True']


def test_fixed_upstream_config_check_is_left_alone(monkeypatch):
    from mmengine.config import utils as config_utils

    from mmcausal import compat

    def upstream_fixed(module_name: str) -> bool:
        return module_name.split('.')[0] in sys.stdlib_module_names

    monkeypatch.setattr(config_utils, '_is_builtin_module', upstream_fixed)
    compat.patch_builtin_module_check()
    assert config_utils._is_builtin_module is upstream_fixed


def test_checkpoint_shim_is_idempotent():
    from mmengine.runner import checkpoint as checkpoint_module

    from mmcausal.compat import checkpoint_loader as compat
    proxy = checkpoint_module.torch
    compat.patch_checkpoint_loading()
    assert checkpoint_module.torch is proxy and isinstance(proxy, compat._TorchWithSafeLoad)
    assert proxy.save is importlib.import_module('torch').save  # everything but load is torch's own
