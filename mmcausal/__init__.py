"""mmcausal: LLaMA-style and causal vision backbones for OpenMMLab.

Importing the package (``custom_imports = dict(imports=['mmcausal'])`` in a config) first applies the
compatibility shims for the pinned OpenMMLab releases (:mod:`mmcausal.compat`) and then registers every
component (see :mod:`mmcausal.registry`).
"""
from . import compat  # noqa: F401  (must run before anything builds a Runner)

# isort: split
from . import datasets, engine, evaluation, models  # noqa: F401

__version__ = '0.1.0'
