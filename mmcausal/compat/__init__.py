"""Compatibility shims for the pinned stack (mmengine 0.10.7, mmcv 2.1, mmdet 3.3, torch 2.14, Python 3.11,
CPU-only hosts).

Importing this package applies every shim once (re-importing is a no-op). ``mmcausal/__init__.py`` imports it
first, so any entry point that imports mmcausal - its ``tools/``, or the stock OpenMMLab tools through a config's
``custom_imports = dict(imports=['mmcausal'])`` - gets them before a ``Runner`` is built. Each module holds one shim
and says what it patches, what breaks without it and when it can go:

=============================  ===================================================================================
module                         patches
=============================  ===================================================================================
:mod:`.checkpoint_loader`      ``torch`` and ``load_url`` in ``mmengine.runner.checkpoint``, scheme ``file://``
:mod:`.runner_checkpoint`      ``_load_checkpoint`` in ``mmengine.runner.runner``
:mod:`.load_state_dict`        ``load_state_dict`` in ``mmengine.runner.checkpoint`` and ``mmengine.runner``
:mod:`.cpu_init_dist`          ``init_dist`` in ``mmengine.dist(.utils)``, ``mmengine.runner.runner``,
                               ``mmengine._strategy.distributed``
:mod:`.cpu_ddp`                ``MMDistributedDataParallel.__init__``
:mod:`.cpu_fsdp`               ``MMFullyShardedDataParallel.__init__``
:mod:`.fsdp_optimizer_state`   ``FSDPStrategy.optim_state_dict``, ``.load_optim_state_dict``
:mod:`.fsdp_gradient_clipping` ``FSDPStrategy.build_optim_wrapper``
:mod:`.config_builtin_modules` ``_is_builtin_module`` in ``mmengine.config.utils`` and ``mmengine.config.config``
:mod:`.package_lookup`         ``is_installed``/``get_installed_path`` in ``mmengine.utils(.package_utils)``,
                               ``mmengine.config.config``, ``mmengine.hub.hub``
:mod:`.bf16_ops`               ``MultiScaleDeformableAttnFunction.apply``, ``NMSop.apply`` (mmcv),
                               ``SingleRoIExtractor.forward`` (mmdet)
:mod:`.deterministic_cublas`   ``set_random_seed`` in ``mmengine.runner(.utils)``, ``mmengine.runner.runner``
:mod:`.optimizer_param_groups` ``OptimWrapper.__init__``
:mod:`.transform_file_errors`  ``BaseTransform.__call__`` (mmcv data transforms)
:mod:`.mmpretrain_clip`        ``CLIPZeroShot``'s placeholder in ``mmpretrain.registry.MODELS`` (imported on use by
                               :mod:`mmcausal.models.clip`, not applied here)
=============================  ===================================================================================

Every shim marks what it installs (:mod:`.patching`), so applying it again changes nothing.
"""
from .bf16_ops import patch_ops_without_bf16
from .checkpoint_loader import patch_checkpoint_loading
from .config_builtin_modules import patch_builtin_module_check
from .cpu_ddp import patch_ddp_for_cpu
from .cpu_fsdp import patch_fsdp_for_cpu
from .cpu_init_dist import patch_init_dist_for_cpu
from .deterministic_cublas import patch_deterministic_cublas
from .fsdp_gradient_clipping import patch_fsdp_gradient_clipping
from .fsdp_optimizer_state import patch_fsdp_optimizer_state
from .load_state_dict import patch_checkpoint_coverage
from .optimizer_param_groups import patch_optimizer_param_groups
from .package_lookup import patch_package_lookup
from .runner_checkpoint import patch_runner_checkpoint_form
from .transform_file_errors import patch_transform_file_errors


def apply_all() -> None:
    """Apply every shim (idempotent)."""
    patch_checkpoint_loading()
    patch_runner_checkpoint_form()
    patch_checkpoint_coverage()
    patch_init_dist_for_cpu()
    patch_ddp_for_cpu()
    patch_fsdp_for_cpu()
    patch_fsdp_optimizer_state()
    patch_fsdp_gradient_clipping()
    patch_builtin_module_check()
    patch_package_lookup()
    patch_ops_without_bf16()
    patch_deterministic_cublas()
    patch_optimizer_param_groups()
    patch_transform_file_errors()


apply_all()

__all__ = [
    'apply_all', 'patch_checkpoint_loading', 'patch_runner_checkpoint_form', 'patch_checkpoint_coverage',
    'patch_init_dist_for_cpu', 'patch_ddp_for_cpu', 'patch_fsdp_for_cpu', 'patch_fsdp_optimizer_state',
    'patch_fsdp_gradient_clipping', 'patch_builtin_module_check', 'patch_package_lookup', 'patch_ops_without_bf16',
    'patch_deterministic_cublas', 'patch_optimizer_param_groups', 'patch_transform_file_errors'
]
