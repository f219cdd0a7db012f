"""Checks of the installed stack that must run before anything imports mmpretrain (standard library only); importing
this module runs them (``mmcausal/__init__.py`` imports it first)."""
import importlib.metadata


def _major(distribution: str) -> int:
    """The major version of an installed distribution, ``-1`` if it is not installed."""
    try:
        return int(importlib.metadata.version(distribution).split('.')[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return -1


def refuse_transformers_5() -> None:
    """mmpretrain 1.x imports its multimodal models (BLIP, ...) whenever ``transformers>=4.28`` is installed, and their
    base classes are gone in transformers 5: ``import mmpretrain`` then fails deep inside BLIP with ``TypeError:
    NoneType takes no arguments``. An existing environment with transformers 5 gets this one line instead."""
    if _major('mmpretrain') == 1 and _major('transformers') >= 5:
        raise ImportError(f'mmpretrain {importlib.metadata.version("mmpretrain")} cannot be imported beside '
                          f'transformers {importlib.metadata.version("transformers")} (its multimodal models need '
                          'transformers 4): pip install "transformers>=4.28,<5", or uninstall transformers.')


refuse_transformers_5()
