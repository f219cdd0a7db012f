"""Build a config's model without weights (shared by the config and model-zoo tests); the registered backbones
(shared by the backbone contract tests)."""
from typing import List, Optional

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from torch import nn

import fake_timm
from mmcausal.registry import MODELS


def build_on_meta(cfg: Config, scope: Optional[str] = None) -> nn.Module:
    """Build ``cfg.model`` (no pretrained init) on the meta device: full-size models without memory or init.

    A test-time-augmentation wrapper (``model.module``) is built around its model. ``scope`` defaults to the
    config's ``default_scope``. Without timm, a timm network (a distillation teacher) is :mod:`fake_timm`'s. A model
    whose construction reads a tensor's value (mmpretrain's ResNet) is built on the CPU.
    """
    model = cfg.model.get('module', cfg.model)
    if 'backbone' in model:  # a generative model has none (its network has no pretrained init)
        model.backbone.init_cfg = None
    init_default_scope(scope or cfg.default_scope)
    with fake_timm.installed():  # a distillation teacher may be a timm network
        try:
            with torch.device('meta'):
                return MODELS.build(cfg.model)
        except RuntimeError as error:  # mmpretrain's ResNet reads its drop-path rates with .item(): small, on the CPU
            if 'meta tensors' not in str(error):
                raise
            return MODELS.build(cfg.model)


def registered_backbones() -> List[str]:
    """Names of every backbone class mmcausal registers in MMEngine's root ``MODELS`` (after ``import mmcausal``)."""
    return sorted(name for name, cls in MODELS.module_dict.items()
                  if cls.__module__.startswith('mmcausal') and issubclass(cls, BaseBackbone))
