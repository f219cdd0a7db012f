"""The full-size configs carry the paper recipes and build models that run (on small random inputs)."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmcausal.registry import MODELS

ROOT = Path(__file__).resolve().parents[1]
ILLAMA = ROOT / 'configs' / 'illama'

# Paper Table 13: arch, drop path, mixup, cutmix, warmup epochs, soft-mask schedule, cutoff.
IN1K_RECIPES = {
    'tiny': (0.0, 0.1, 0.1, 5, 'constant', 50),
    'small': (0.1, 0.5, 0.5, 5, 'linear', 50),
    'base': (0.4, 0.95, 1.0, 50, 'linear', 25),
}


def _config(name: str) -> Config:
    return Config.fromfile(str(ILLAMA / name))


@pytest.mark.parametrize('arch', list(IN1K_RECIPES))
def test_imagenet_recipes_follow_the_paper(arch):
    cfg = _config(f'illama-{arch}-p16_32xb128_in1k.py')
    drop_path, mixup, cutmix, warmup, schedule, cutoff = IN1K_RECIPES[arch]
    backbone = cfg.model.backbone
    assert (backbone.arch, backbone.mask_mode, backbone.drop_path_rate) == (arch, 'official', drop_path)
    assert [a.alpha for a in cfg.model.train_cfg.augments] == [mixup, cutmix]
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.weight_decay) == ('AdamW', 4e-3, 0.05)
    assert cfg.train_dataloader.batch_size * 32 == cfg.auto_scale_lr.base_batch_size == 4096
    assert cfg.param_scheduler[0].end == warmup and cfg.param_scheduler[1].type == 'CosineAnnealingLR'
    assert cfg.train_cfg.max_epochs == 300
    hook = cfg.custom_hooks[0]
    assert (hook.type, hook.schedule, hook.cutoff, hook.start) == ('SoftMaskHook', schedule, cutoff, 1.0)


@pytest.mark.parametrize('arch,width', [('tiny', 192), ('base', 768)])
def test_upernet_recipes_follow_the_paper(arch, width):
    cfg = _config(f'upernet_illama-{arch}-p16_8xb2-160k_ade20k-512x512.py')
    assert cfg.model.backbone.arch == arch and cfg.model.backbone.mask_mode == 'causal'
    assert cfg.model.neck.in_channels == [width] * 4 and cfg.model.decode_head.num_classes == 150
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.weight_decay) == ('AdamW', 6e-5, 0.01)
    assert cfg.train_cfg.max_iters == 160000 and cfg.crop_size == (512, 512)


def test_mask_rcnn_recipe():
    cfg = _config('mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py')
    assert cfg.model.backbone.type == 'ILLaMA' and cfg.model.neck.type == 'SimpleFeaturePyramid'
    assert cfg.image_size == (1024, 1024)
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.weight_decay) == ('AdamW', 1e-4, 0.1)


def _build(cfg: Config, scope: str):
    cfg.model.backbone.init_cfg = None
    init_default_scope(scope)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.eval()


def test_full_size_classifier_runs():
    model = _build(_config('illama-small-p16_32xb128_in1k.py'), 'mmpretrain')
    with torch.no_grad():
        assert model(torch.randn(2, 3, 224, 224), mode='tensor').shape == (2, 1000)


def test_full_size_segmentor_runs():
    model = _build(_config('upernet_illama-tiny-p16_8xb2-160k_ade20k-512x512.py'), 'mmseg')
    with torch.no_grad():
        # decode-head logits at stride 4 (mmseg resizes them only in predict mode)
        assert model(torch.randn(2, 3, 128, 160), mode='tensor').shape == (2, 150, 32, 40)


def test_full_size_detector_runs():
    model = _build(_config('mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py'), 'mmdet')
    with torch.no_grad():
        features = model.extract_feat(torch.randn(1, 3, 256, 192))
    assert [f.shape[-2:] for f in features] == [(64, 48), (32, 24), (16, 12), (8, 6), (4, 3)]
    assert all(f.shape[1] == 256 for f in features)
