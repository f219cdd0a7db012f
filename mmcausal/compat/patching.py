"""How every shim of :mod:`mmcausal.compat` installs itself: marked, so that applying it twice is a no-op.

A module that did ``from x import name`` holds its own reference to ``name``, so a shim that replaces a function is
bound in every module that imports it (:func:`install`); a shim that replaces a method marks the new function
(:func:`mark_shim`) and sets it on the class.
"""
import importlib
from typing import Callable

#: the attribute that marks a function installed by a shim
SHIM_FLAG = '__mmcausal_shim__'


def is_shim(func: Callable) -> bool:
    """Whether ``func`` was installed by a shim (keeps every patch idempotent)."""
    return getattr(func, SHIM_FLAG, False)


def mark_shim(func: Callable) -> Callable:
    """``func``, marked as installed by a shim."""
    setattr(func, SHIM_FLAG, True)
    return func


def install(name: str, new: Callable, *modules: str) -> None:
    """Mark ``new`` as a shim and bind it to ``name`` in every listed module that has that name.

    A module that does not exist in the installed mmengine (e.g. ``mmengine._strategy`` before 0.8), or that no
    longer imports ``name``, is skipped: a shim never makes ``import mmcausal`` fail.
    """
    mark_shim(new)
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            setattr(module, name, new)
