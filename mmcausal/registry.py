"""One registration for mmpretrain, mmsegmentation and mmdetection.

mmcausal registers its components in MMEngine's *root* registries (``mmengine.registry.MODELS``,
``HOOKS``, ``DATASETS``, ...), not in a registry of its own and not in the three libraries' registries.

Why this serves all three libraries: ``mmpretrain.registry.MODELS``, ``mmseg.registry.MODELS`` and
``mmdet.registry.MODELS`` are all children of ``mmengine.registry.MODELS``. ``Registry.get('ILLaMA')``
first looks in the registry of the active scope (``default_scope`` of the config, or the ``_scope_``
that ``mmdet::``/``mmseg::`` bases stamp on their dicts) and then walks up to the root, where it finds
our class. Components that build children (for example a neck building its norm layer) call
``MODELS.build`` on the root, which again resolves in the active scope, so nested mmdet/mmseg/mmpretrain
types keep working.

Consequence: a name registered here must not also exist in mmdet, mmseg or mmpretrain (the child
registry would win). ``tests/test_registry.py`` checks every mmcausal name from all three scopes.
"""
from mmengine.registry import (
    DATA_SAMPLERS,
    DATASETS,
    FUNCTIONS,
    HOOKS,
    LOOPS,
    METRICS,
    MODELS,
    OPTIM_WRAPPER_CONSTRUCTORS,
    TRANSFORMS,
)

__all__ = [
    'MODELS', 'HOOKS', 'DATASETS', 'DATA_SAMPLERS', 'FUNCTIONS', 'LOOPS', 'METRICS', 'TRANSFORMS',
    'OPTIM_WRAPPER_CONSTRUCTORS'
]
