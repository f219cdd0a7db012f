"""One registration serves mmpretrain, mmseg and mmdet: every mmcausal name resolves to our class from
each library's registries, and none is shadowed by a library's own component."""
import importlib

import pytest
from mmengine.registry import HOOKS as ROOT_HOOKS
from mmengine.registry import MODELS as ROOT_MODELS
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS as ROOT_CONSTRUCTORS

import mmcausal  # noqa: F401

LIBRARIES = ('mmpretrain', 'mmseg', 'mmdet')
OUR_MODELS = {name: cls for name, cls in ROOT_MODELS.module_dict.items() if cls.__module__.startswith('mmcausal')}
OUR_MODELS['RMSNorm'] = ROOT_MODELS.get('RMSNorm')
OUR_HOOKS = {name: cls for name, cls in ROOT_HOOKS.module_dict.items() if cls.__module__.startswith('mmcausal')}
OUR_CONSTRUCTORS = {
    name: cls
    for name, cls in ROOT_CONSTRUCTORS.module_dict.items() if cls.__module__.startswith('mmcausal')
}


def test_components_are_registered():
    assert {'ILLaMA', 'VisionLLaMA', 'MAEVisionLLaMA', 'PyramidVisionLLaMA', 'SimpleFeaturePyramid',
            'RMSNorm'} <= set(OUR_MODELS)
    assert 'SoftMaskHook' in OUR_HOOKS
    assert 'LayerDecayOptimWrapperConstructor' in OUR_CONSTRUCTORS


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
