"""A stand-in for timm (which the tests never import): ``create_model`` with the surface mmpretrain's
``TimmClassifier`` uses, so configs whose distillation teacher is a timm network (RegNetY-16GF) build without it."""
import importlib.util
import sys
import types
from contextlib import contextmanager
from typing import Iterator

from mmpretrain.models import TimmClassifier
from torch import nn

#: the names of the models created, in order
created = []


def create_model(model_name: str, pretrained: bool = False, checkpoint_path: str = '', num_classes: int = 1000,
                 **kwargs) -> nn.Module:
    """A small convolutional classifier with ``num_classes`` outputs; the name is recorded in :data:`created`."""
    created.append(model_name)
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, num_classes))


@contextmanager
def installed() -> Iterator[None]:
    """Inside the block ``import timm`` gives this stand-in (and mmpretrain takes it as installed), unless timm is
    installed."""
    if importlib.util.find_spec('timm') is not None:
        yield
        return
    module, models = types.ModuleType('timm'), types.ModuleType('timm.models')
    module.create_model = models.create_model = create_model
    module.models = models
    saved = {name: sys.modules.get(name) for name in ('timm', 'timm.models')}
    sys.modules.update({'timm': module, 'timm.models': models})
    # mmpretrain's @require('timm') replaced the constructor with an ImportError when it found no timm at import
    refusing = TimmClassifier.__init__
    TimmClassifier.__init__ = getattr(refusing, '__wrapped__', refusing)
    try:
        yield
    finally:
        TimmClassifier.__init__ = refusing
        for name, value in saved.items():
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = value
