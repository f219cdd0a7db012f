"""Helpers of the analysis tests: tiny randomly initialised backbones (no training) and the tools as modules."""
import importlib.util
from pathlib import Path

import torch
from mmengine.registry import init_default_scope

from mmcausal.registry import MODELS

ROOT = Path(__file__).resolve().parents[1]
ILLAMA_TWIN = str(ROOT / 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py')
DEFOCUS_VIT_TWIN = str(ROOT / 'configs/defocus/defocus-vit-nano-p8_1xb32-45e_shapes-64px.py')
MAMBA_TWIN = str(ROOT / 'configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py')
SMALL = dict(embed_dims=16, num_layers=2)


def build_backbone(kind: str, **options) -> torch.nn.Module:
    """A 2-block, 16-wide backbone on 16 px images with 4 px patches (a 4 x 4 grid) with the backbone's own init
    (the attention starts near uniform, as in training; the class tokens are not zero), in eval mode, seed 0.

    ``kind``: ``'causal'`` / ``'bidirectional'`` (iLLaMA, class token last), ``'mamba'``, ``'defocus_vit'``,
    ``'vision_llama'`` (no class token).
    """
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    settings = dict(img_size=16, patch_size=4)
    if kind in ('causal', 'bidirectional'):
        settings.update(type='ILLaMA', arch=dict(SMALL, num_heads=2), mask_mode=kind)
    elif kind == 'mamba':
        settings.update(type='DefocusMamba', arch=dict(SMALL, dt_rank=2), norm_group_size=0)
    elif kind == 'defocus_vit':
        settings.update(type='DefocusViT', arch=dict(SMALL, num_heads=2))
    else:
        settings.update(type='VisionLLaMA', arch=dict(SMALL, num_heads=2), with_cls_token=False,
                        out_type='avg_featmap', rope_anchor=4)
    model = MODELS.build({**settings, **options})
    model.init_weights()
    return model.eval()


def load_tool(name: str, folder: str = 'analysis_tools'):
    """``tools/<folder>/<name>.py`` as a module (its ``main(argv)`` runs in this process)."""
    spec = importlib.util.spec_from_file_location(f'{name}_tool', ROOT / 'tools' / folder / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
