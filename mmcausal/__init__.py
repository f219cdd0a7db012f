"""mmcausal: LLaMA-style and causal vision backbones for OpenMMLab.

Importing the package (``custom_imports = dict(imports=['mmcausal'])`` in a config) first applies the
compatibility shims for the pinned OpenMMLab releases (:mod:`mmcausal.compat`) and then registers every
component (see :mod:`mmcausal.registry`); the classifiers and generators of the model zoo are then listed in
mmpretrain's model hub (``mmpretrain.list_models`` / ``get_model`` by metafile name, :mod:`mmcausal.model_zoo`).
"""
from . import stack_check  # noqa: F401  (refuses a stack mmpretrain cannot import in, before anything imports it)

# isort: split
from . import compat  # noqa: F401  (must run before anything builds a Runner)

# isort: split
from . import datasets, engine, evaluation, models  # noqa: F401
from .model_zoo import register_model_index

register_model_index()

__version__ = '0.1.0'
