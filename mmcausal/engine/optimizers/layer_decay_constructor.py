"""Layer-wise learning-rate decay (BEiT, Bao et al. 2021; ViTDet) for any model with an mmcausal backbone."""
import logging
from typing import List, Optional

from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn

from mmcausal.registry import OPTIM_WRAPPER_CONSTRUCTORS
from mmcausal.utils.validation import ConfigValueError


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """``lr(p) = base_lr * layer_decay_rate ** (L - 1 - layer_id(p))`` on top of MMEngine's paramwise rules.

    ``layer_id`` comes from the backbone's ``get_layer_depth(name, 'backbone.')`` (stem 0, block ``i`` ->
    ``i + 1``, final norm ``L - 1``); parameters outside the backbone (necks, heads) keep the full rate. It
    works for mmpretrain classifiers, mmseg segmentors and mmdet detectors alike, because all of them
    keep their backbone at ``model.backbone``. Every other paramwise option (``custom_keys``,
    ``norm_decay_mult``, ``flat_decay_mult``, ...) is applied first, as by the default constructor.

    Config::

        optim_wrapper = dict(
            constructor='LayerDecayOptimWrapperConstructor',
            optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.1),
            paramwise_cfg=dict(layer_decay_rate=0.7, flat_decay_mult=0.))
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: Optional[dict] = None) -> None:
        # Kept in paramwise_cfg: with an empty one MMEngine skips add_params (one group for all).
        paramwise_cfg = dict(paramwise_cfg or {})
        paramwise_cfg.setdefault('layer_decay_rate', 1.0)
        self.layer_decay_rate = float(paramwise_cfg['layer_decay_rate'])
        if not 0. < self.layer_decay_rate <= 1.:
            raise ConfigValueError('LayerDecayOptimWrapperConstructor: paramwise_cfg.layer_decay_rate must be in '
                                   f'(0, 1], got {self.layer_decay_rate}.')
        super().__init__(optim_wrapper_cfg, paramwise_cfg)

    def add_params(self, params: List[dict], module: nn.Module, prefix: str = '', **kwargs) -> None:
        if prefix:  # the default constructor's recursion into children
            return super().add_params(params, module, prefix, **kwargs)
        first = len(params)
        super().add_params(params, module, prefix, **kwargs)
        backbone = getattr(module, 'backbone', None)
        if backbone is None or not hasattr(backbone, 'get_layer_depth'):
            raise TypeError(f'LayerDecayOptimWrapperConstructor needs `model.backbone.get_layer_depth` '
                            f'(mmcausal backbones have it); got {type(module).__name__}.')
        names = {id(param): name for name, param in module.named_parameters()}
        for group in params[first:]:
            name = names[id(group['params'][0])]
            if not name.startswith('backbone.'):
                continue
            layer_id, num_layers = backbone.get_layer_depth(name, 'backbone.')
            scale = self.layer_decay_rate**(num_layers - 1 - layer_id)
            group['lr'] = group.get('lr', self.base_lr) * scale
            group['lr_scale'] = scale
            print_log(f'layer decay -- {name}: layer {layer_id}/{num_layers - 1}, lr x {scale:.4g}',
                      logger='current', level=logging.DEBUG)
        print_log(f'layer decay {self.layer_decay_rate}: backbone lr x {self.layer_decay_rate}**(L - 1 - layer id) '
                  f'over {num_layers} layer ids (per-parameter scales at DEBUG level)', logger='current')
