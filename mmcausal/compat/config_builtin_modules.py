"""mmengine's config parser counts every standard-library module as built-in.

Patches: ``_is_builtin_module`` as ``mmengine.config.utils`` and ``mmengine.config.config`` (mmengine 0.10.7
``config/utils.py:159-185``) have it.

Why: it decides by the module's file location, but on CPython >= 3.11 ``os`` is frozen (origin ``'frozen'``) and in
a venv the standard library is outside ``sys.prefix``, so ``os``/``math`` count as third-party. An old-style config
with ``import os`` before ``_base_`` is then parsed as a lazy-import config and fails (``ConfigParsingError``). The
stock OpenMMLab tools parse the config before ``custom_imports`` runs, so for them a config still needs ``_base_``
before any ``import``.

When it can go: with the first mmengine release after 0.10.7 (the check is fixed on mmengine's ``main`` branch,
not yet released); the shim already steps aside for an mmengine that counts ``os``, ``math`` and ``os.path`` as
built-in.
"""
import functools
import sys

from .patching import install, is_shim


def patch_builtin_module_check() -> None:
    """Classify every standard-library module as built-in in mmengine's config parser (see the module)."""
    from mmengine.config import utils as config_utils

    original = config_utils._is_builtin_module
    if is_shim(original) or all(original(name) for name in ('os', 'math', 'os.path')):
        return  # already patched, or an mmengine with the upstream fix

    @functools.wraps(original)
    def _is_builtin_module(module_name: str) -> bool:
        return module_name.split('.')[0] in sys.stdlib_module_names or original(module_name)

    install('_is_builtin_module', _is_builtin_module, 'mmengine.config.utils', 'mmengine.config.config')
