"""One registration serves mmpretrain, mmseg and mmdet: every mmcausal name resolves to our class from
each library's registries, and none is shadowed by a library's own component."""
import importlib

import pytest
from mmengine.registry import HOOKS as ROOT_HOOKS
from mmengine.registry import MODELS as ROOT_MODELS
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS as ROOT_CONSTRUCTORS

from mmcausal.engine import LayerDecayOptimWrapperConstructor, SoftMaskHook
from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers import RMSNorm
from mmcausal.models.necks import SimpleFeaturePyramid
from mmcausal.models.vision_llama import MAEVisionLLaMA, PyramidVisionLLaMA, VisionLLaMA

LIBRARIES = ('mmpretrain', 'mmseg', 'mmdet')
# what must be registered, named by the classes themselves (never read back from the registries under test)
EXPECTED_MODELS = {cls.__name__: cls for cls in (ILLaMA, VisionLLaMA, MAEVisionLLaMA, PyramidVisionLLaMA,
                                                 SimpleFeaturePyramid, RMSNorm)}
EXPECTED_HOOKS = {'SoftMaskHook': SoftMaskHook}
EXPECTED_CONSTRUCTORS = {'LayerDecayOptimWrapperConstructor': LayerDecayOptimWrapperConstructor}
# everything else mmcausal registers, found in the root registries
OUR_MODELS = {**{name: cls for name, cls in ROOT_MODELS.module_dict.items() if cls.__module__.startswith('mmcausal')},
              **EXPECTED_MODELS}
OUR_HOOKS = {**{name: cls for name, cls in ROOT_HOOKS.module_dict.items() if cls.__module__.startswith('mmcausal')},
             **EXPECTED_HOOKS}
OUR_CONSTRUCTORS = {
    **{name: cls for name, cls in ROOT_CONSTRUCTORS.module_dict.items() if cls.__module__.startswith('mmcausal')},
    **EXPECTED_CONSTRUCTORS
}


@pytest.mark.parametrize('registry,expected', [(ROOT_MODELS, EXPECTED_MODELS), (ROOT_HOOKS, EXPECTED_HOOKS),
                                               (ROOT_CONSTRUCTORS, EXPECTED_CONSTRUCTORS)],
                         ids=['models', 'hooks', 'constructors'])
def test_components_are_registered(registry, expected):
    for name, cls in expected.items():
        assert registry.get(name) is cls, f'{name} is not registered as {cls.__module__}.{cls.__qualname__}'


@pytest.mark.parametrize('library', LIBRARIES)
def test_names_resolve_to_mmcausal_from_every_library(library):
    registry = importlib.import_module(f'{library}.registry')
    importlib.import_module(f'{library}.models')
    for name, cls in OUR_MODELS.items():
        assert registry.MODELS.get(name) is cls, f'{library} resolves {name} to something else'
    for name, cls in OUR_HOOKS.items():
        assert registry.HOOKS.get(name) is cls, f'{library} resolves {name} to something else'
    for name, cls in OUR_CONSTRUCTORS.items():
        assert registry.OPTIM_WRAPPER_CONSTRUCTORS.get(name) is cls, f'{library} resolves {name} elsewhere'
