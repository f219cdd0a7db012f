"""What ``tools/analysis_tools/benchmark.py`` measures: the model a spec names, randomly initialised, and random
inputs of a size.

A spec is a config file, an upstream config (``mmpretrain::deit/deit-small_4xb256_in1k.py``) or either with
overrides after ``+`` (``configs/cait/cait-s24_8xb128-400e_in1k.py+model.backbone.attn_impl=explicit``), or a timm
model (``timm::cait_s24_224+drop_path_rate=0.1``: ``timm.create_model`` with those keyword arguments). A size is
``S`` or ``HxW``: images ``(batch, 3, H, W)``, or for a diffusion network latents on that grid.
"""
import argparse
import importlib
from typing import Tuple

import torch
from mmengine.config import Config, DictAction
from mmengine.hub import get_config
from mmengine.registry import init_default_scope
from mmpretrain.structures import DataSample


def load_spec_config(spec: str) -> Config:
    """The config named by ``spec`` (``path[+key=value ...]``), with the overrides merged."""
    name, *overrides = spec.split('+')
    cfg = get_config(name) if '::' in name else Config.fromfile(name)
    if overrides:
        options = argparse.ArgumentParser()
        options.add_argument('opts', nargs='+', action=DictAction)
        cfg.merge_from_dict(options.parse_args(overrides).opts)
    return cfg


class TimmModel(torch.nn.Module):
    """A timm model under the call of an mmpretrain classifier: ``forward(images, mode='tensor')`` -> its output."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, mode: str = 'tensor') -> torch.Tensor:
        return self.model(images)


def build_timm_model(spec: str, backbone_only: bool) -> torch.nn.Module:
    """``timm::NAME[+key=value ...]``: ``timm.create_model(NAME, pretrained=False, key=value, ...)`` (an independent
    implementation to measure beside ours); ``backbone_only``: without the classifier (``num_classes=0``, so a
    CaiT ends at its normed class feature, as our ``CaiT`` backbone with ``out_type='cls_token'``)."""
    try:
        import timm  # optional (requirements/optional.txt): only for these specs
    except ImportError:
        raise SystemExit(f'{spec} needs timm: pip install -r requirements/optional.txt') from None

    name, *overrides = spec[len('timm::'):].split('+')
    if not all('=' in override for override in overrides):
        raise SystemExit(f'{spec}: write each timm keyword argument as +key=value.')
    options = argparse.ArgumentParser()
    options.add_argument('opts', nargs='*', action=DictAction, default={})
    kwargs = dict(options.parse_args(overrides).opts, **(dict(num_classes=0) if backbone_only else {}))
    try:
        return TimmModel(timm.create_model(name, pretrained=False, **kwargs))
    except RuntimeError as error:
        if 'Unknown model' not in str(error):
            raise
        raise SystemExit(f'{spec}: timm has no model {name!r} (timm.list_models() lists them).') from None


def build_model(spec: str, backbone_only: bool) -> torch.nn.Module:
    """``model`` (or ``model.backbone``) of the config, randomly initialised (no pretrained weights loaded); a
    ``timm::`` spec builds that timm model (:func:`build_timm_model`)."""
    if spec.startswith('timm::'):
        return build_timm_model(spec, backbone_only)
    cfg = load_spec_config(spec)
    scope = cfg.get('default_scope', 'mmpretrain')
    init_default_scope(scope)
    models = importlib.import_module(f'{scope}.registry').MODELS  # the library's registry (it sees mmcausal's)
    if 'network' in cfg.model:  # a generation config (DiT / SiT): its diffusion network, or the whole sampler
        return models.build(cfg.model.network if backbone_only else cfg.model)
    model_cfg = cfg.model.backbone if backbone_only else cfg.model
    model_cfg.pop('init_cfg', None)
    if not backbone_only:
        model_cfg.backbone.pop('init_cfg', None)
    return models.build(model_cfg)


def is_diffusion_network(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a class-conditional diffusion network, called as ``model(x, t, y)``."""
    return hasattr(model, 'forward_with_cfg')


def is_generator(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a whole class-conditional generator (network, objective, sampler preset)."""
    return hasattr(model, 'sample_latents')


def parse_size(text: str) -> Tuple[int, int]:
    """``'224'`` -> ``(224, 224)``; ``'800x1216'`` -> ``(800, 1216)`` (H x W)."""
    parts = text.lower().split('x')
    if len(parts) > 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f'sizes are S or HxW with positive integers, got {text!r}')
    return int(parts[0]), int(parts[-1])


def example_inputs(model: torch.nn.Module, batch: int, size: Tuple[int, int], device: str) -> tuple:
    """Random ``(batch, 3, H, W)`` images; for a diffusion network random latents ``(batch, C, H, W)`` (``size`` is
    then the latent grid: 32 for 256 px images through the SD-VAE), timesteps in ``[0, 1000)`` (DDPM's; a SiT network
    reads ``t`` in ``[0, 1]``, which changes no cost) and labels; for a generator no images and ``batch`` data samples
    with balanced labels (it samples latents of the grid ``size``: its ``test_cfg.latent_size`` is set to it)."""
    if is_generator(model):
        model.test_cfg['latent_size'] = size
        classes = model.network.num_classes
        return None, [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(index % classes)
                      for index in range(batch)]
    if not is_diffusion_network(model):
        return (torch.randn(batch, 3, *size, device=device), )
    return (torch.randn(batch, model.in_channels, *size, device=device),
            torch.randint(0, 1000, (batch, ), device=device),
            torch.randint(0, model.num_classes, (batch, ), device=device))
