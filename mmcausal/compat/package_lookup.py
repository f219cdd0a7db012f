"""mmengine looks packages up with ``importlib.metadata`` instead of ``pkg_resources``.

Patches: ``is_installed`` and ``get_installed_path`` as ``mmengine.utils.package_utils``, ``mmengine.utils``,
``mmengine.config.config`` and (``get_installed_path`` only) ``mmengine.hub.hub`` have them (mmengine 0.10.7
``utils/package_utils.py:17,48,85``).

Why: they import ``pkg_resources``, which setuptools >= 82 removed and setuptools 81 deprecates with a warning; they
resolve every ``_base_ = ['mmdet::...']``/``'mmseg::...'`` config (``config.py:1265-1271``), lazy-config imports and
``mmengine.hub``. setuptools is pinned below 82, so the shim only removes the deprecated path, and keeps those
configs working after a setuptools upgrade.

When it can go: with the first mmengine release after 0.10.7 (the lookup is fixed on mmengine's ``main`` branch, not
yet released); the shim already steps aside for a ``package_utils`` that does not mention ``pkg_resources``.
"""
import importlib.metadata
import importlib.util
import inspect
import os.path as osp

from .patching import install, is_shim


def _is_installed(package: str) -> bool:
    """``mmengine.utils.is_installed`` on ``importlib.metadata``."""
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def _get_installed_path(package: str) -> str:
    """``mmengine.utils.get_installed_path`` on ``importlib.metadata`` (same results)."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        if spec is None:
            raise
        if spec.origin is None:
            raise RuntimeError(f'{package} is a namespace package, which is invalid for '
                               '`get_install_path`')
        return osp.dirname(spec.origin)
    location = str(dist.locate_file(''))
    if osp.exists(osp.join(location, package)):
        return osp.join(location, package)
    top_level = (dist.read_text('top_level.txt') or '').split()
    if not top_level:
        raise ValueError(f'can not infer the module name of {package}')
    return osp.join(location, top_level[0])


def patch_package_lookup() -> None:
    """Replace mmengine's ``pkg_resources``-based package lookup with ``importlib.metadata`` (see the module)."""
    from mmengine.utils import package_utils

    if is_shim(package_utils.is_installed) or 'pkg_resources' not in inspect.getsource(package_utils):
        return  # already patched, or an mmengine with the upstream fix
    users = ('mmengine.utils.package_utils', 'mmengine.utils', 'mmengine.config.config')
    install('is_installed', _is_installed, *users)
    install('get_installed_path', _get_installed_path, *users, 'mmengine.hub.hub')
