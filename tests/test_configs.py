"""The full-size configs carry the paper recipes and build models that run (on small random inputs)."""
import re
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import PARAM_SCHEDULERS, init_default_scope

from build_utils import build_on_meta
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


# ---------------------------------------------------------------------------------------------- UperNet
# Official segmentation code (https://github.com/techmonsterwang/iLLaMA/tree/d27201c/segmentation:
# `configs/doit/upernet/upernet_doit_{tiny,base}_12_512_slide_160k_ade20k_ms.py`, `backbone/doit.py`).
@pytest.mark.parametrize('arch,width,drop_path', [('tiny', 192, 0.0), ('base', 768, 0.1)])
def test_upernet_model_is_the_official_one(arch, width, drop_path):
    model = _config(f'upernet_illama-{arch}-p16_8xb2-160k_ade20k-512x512.py').model
    backbone = model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size) == ('ILLaMA', arch, 512)
    assert backbone.mask_mode == 'official'  # post-softmax tril mask, as in classification
    assert tuple(backbone.out_indices) == (3, 5, 7, 11) and not backbone.final_norm
    assert backbone.drop_path_rate == drop_path
    assert (model.neck.type, list(model.neck.rescales), model.neck.embed_dim) == ('Feature2Pyramid', [4, 2, 1, 0.5],
                                                                                  width)
    head, aux = model.decode_head, model.auxiliary_head
    assert (head.type, list(head.in_channels), head.channels, tuple(head.pool_scales)) == \
        ('UPerHead', [width] * 4, width, (1, 2, 3, 6))
    assert (aux.type, aux.in_channels, aux.in_index, aux.channels, aux.loss_decode.loss_weight) == \
        ('FCNHead', width, 2, 256, 0.4)
    assert head.num_classes == aux.num_classes == 150
    assert (model.test_cfg.mode, tuple(model.test_cfg.crop_size), tuple(model.test_cfg.stride)) == \
        ('slide', (512, 512), (341, 341))


@pytest.mark.parametrize('arch,millions', [('tiny', 10.86), ('base', 163.22)])
def test_upernet_parameter_count_is_table_10(arch, millions):
    """Paper Table 10 counts the whole segmentor (backbone, fpn1..fpn4, UPerHead and the FCN auxiliary head)."""
    model = build_on_meta(_config(f'upernet_illama-{arch}-p16_8xb2-160k_ade20k-512x512.py'), 'mmseg')
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 2) == millions


def test_upernet_schedule_is_the_official_poly_with_warmup():
    """mmcv-1.x ``poly`` (power 1, min 0) over all 160k iterations with a 1500-iteration linear warm-up from 1e-6:
    lr(i) = lr * (1 - i / 160000) * (1 - (1 - i / 1500) * (1 - 1e-6)) during the warm-up."""
    cfg = _config('upernet_illama-base-p16_8xb2-160k_ade20k-512x512.py')
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=3e-5)
    schedulers = [PARAM_SCHEDULERS.build(dict(s), default_args=dict(optimizer=optimizer))
                  for s in cfg.param_scheduler]

    def official(i: int) -> float:
        warmup = 1 - (1 - i / 1500) * (1 - 1e-6) if i < 1500 else 1.
        return 3e-5 * (1 - i / 160000) * warmup

    for i in range(3001):
        if i in (0, 1, 750, 1499, 1500, 1501, 3000):
            assert optimizer.param_groups[0]['lr'] == pytest.approx(official(i), rel=1e-6, abs=1e-16), i
        for scheduler in schedulers:
            scheduler.step()


@pytest.mark.parametrize('arch', ['tiny', 'base'])
def test_upernet_multi_scale_flip_test(arch):
    """Table 10 is multi-scale + flip: the official MultiScaleFlipAug ratios 0.5..1.75 of (2048, 512) with
    SETR_Resize's short side >= 512 (so 0.5 and 0.75 run at 512), each scale with and without flip."""
    name = f'upernet_illama-{arch}-p16_8xb2-160k_ade20k-512x512'
    cfg, test_cfg = _config(f'{name}.py'), _config(f'{name}_ms-test.py')
    assert test_cfg.model.type == cfg.tta_model.type == 'SegTTAModel'
    assert test_cfg.model.module.to_dict() == cfg.model.to_dict()  # the trained segmentor, unchanged
    load, tta = test_cfg.test_dataloader.dataset.pipeline
    assert load.type == 'LoadImageFromFile' and tta.type == 'TestTimeAug'
    resizes, flips, *_ = tta.transforms
    assert [tuple(r.scale) for r in resizes] == [(2048, 512)] * 3 + [(2560, 640), (3072, 768), (3584, 896)]
    assert all(r.keep_ratio for r in resizes)
    assert [(f.type, f.prob) for f in flips] == [('RandomFlip', 0.), ('RandomFlip', 1.)]
    model = build_on_meta(test_cfg, 'mmseg')
    assert type(model).__name__ == 'SegTTAModel' and type(model.module).__name__ == 'EncoderDecoder'


def test_mask_rcnn_recipe():
    """Ours (the paper has no detection result): ViTDet-B's recipe on iLLaMA-B."""
    cfg = _config('mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py')
    model = cfg.model
    assert model.backbone.type == 'ILLaMA' and model.backbone.drop_path_rate == 0.1
    assert (model.neck.type, tuple(model.neck.scales), model.neck.num_outs) == ('SimpleFeaturePyramid',
                                                                                (4, 2, 1, 0.5), 5)
    assert cfg.image_size == (1024, 1024)
    assert [dict(a) for a in model.data_preprocessor.batch_augments] == [
        dict(type='BatchFixedSizePad', size=(1024, 1024), pad_mask=True)]
    assert model.rpn_head.num_convs == 2 and model.roi_head.bbox_head.type == 'Shared4Conv1FCBBoxHead'
    for norm_cfg in (model.roi_head.bbox_head.norm_cfg, model.roi_head.mask_head.norm_cfg):
        assert (norm_cfg.type, norm_cfg.eps) == ('mmpretrain.LN2d', 1e-6)


@pytest.mark.parametrize('name', ['illama/mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py',
                                  'vision_llama/vitdet_mask-rcnn_vision-llama-base-p16_sfp_16xb4-lsj-36e_coco.py'])
def test_fixed_size_detectors_are_tested_on_their_training_grid(name, tmp_path):
    """A detector trained on batches padded to one fixed size (ViTDet's recipe, position tables and RoPE of that
    grid) is tested at it: a 480 x 640 image reaches the backbone as 1024 x 1024, as every training batch does.
    (The shapes twins' images are all 128 x 128, their training size.)"""
    import mmcv
    import numpy as np
    from mmengine.dataset import Compose
    cfg = Config.fromfile(str(ILLAMA.parent / name))
    init_default_scope('mmdet')
    mmcv.imwrite(np.zeros((480, 640, 3), np.uint8), str(tmp_path / 'image.jpg'))
    sample = Compose(cfg.test_dataloader.dataset.pipeline)(dict(
        img_path=str(tmp_path / 'image.jpg'), img_id=0, instances=[], height=480, width=640))
    preprocessor = MODELS.build(cfg.model.data_preprocessor)
    test_inputs = preprocessor(dict(inputs=[sample['inputs']], data_samples=[sample['data_samples']]), False)
    training_size = tuple(cfg.model.data_preprocessor.batch_augments[0].size)
    assert tuple(test_inputs['inputs'].shape[-2:]) == training_size == (1024, 1024)


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


# ------------------------------------------------------------------------------- one recipe test per full config
# Every full (non-twin) config, built with its real optimizer-wrapper config, against the paper / official values:
# (scope, optimizer type, lr, weight decay, betas or momentum, layer decay, blocks, global batch, schedule as
# (type, begin, end) with `end` defaulting to the run length, run length, AMP). The multi-scale test configs
# (`*_ms-test.py`) are test-only and checked by test_upernet_multi_scale_flip_test.
ADAMW, ADAMW_MAE = (0.9, 0.999), (0.9, 0.95)


def _imagenet(warmup):  # iLLaMA Table 13: AdamW 4e-3 @ 4096, wd 0.05, cosine, 300 epochs, fp32 (official)
    return ('mmpretrain', 'AdamW', 4e-3, 0.05, ADAMW, None, 12, 4096,
            [('LinearLR', 0, warmup), ('CosineAnnealingLR', warmup, 300)], ('epochs', 300), False)


def _mae(epochs, arch):  # VisionLLaMA D.3 / MAE: 1.5e-4 per 256 x 4096, (0.9, 0.95), wd 0.05, 40 warm-up epochs
    return ('mmpretrain', 'AdamW', 1.5e-4 * 4096 / 256, 0.05, ADAMW_MAE, None, dict(base=12, large=24)[arch], 4096,
            [('LinearLR', 0, 40), ('CosineAnnealingLR', 40, epochs)], ('epochs', epochs), True)


def _linear(arch):  # VisionLLaMA Table 14 / MAE: LARS 0.1 per 256 x 16384, wd 0, momentum 0.9, 10 + 80 epochs
    return ('mmpretrain', 'LARS', 0.1 * 16384 / 256, 0.0, 0.9, None, dict(base=12, large=24)[arch], 16384,
            [('LinearLR', 0, 10), ('CosineAnnealingLR', 10, 90)], ('epochs', 90), True)


def _upernet_illama():  # official iLLaMA UperNet: AdamW 3e-5, wd 0.05, layer decay 0.9, poly from 0, fp32
    return ('mmseg', 'AdamW', 3e-5, 0.05, ADAMW, 0.9, 12, 16, [('LinearLR', 0, 1501), ('PolyLR', 0, 160000)],
            ('iters', 160000), False)


def _pyramid_imagenet():  # deit/train_p_300.sh: AdamW 1e-3 @ 1024, wd 0.05 (none on 1-D), 5 + 295 epochs, AMP
    return ('mmpretrain', 'AdamW', 1e-3, 0.05, ADAMW, None, None, 1024,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 300)], ('epochs', 300), True)


# official twins_svt_lama_as-* configs:
def _pyramid_upernet():  # AdamW 6e-5, wd 0.01 (none on norms), 1500 warm-up, poly to 160k, AMP
    return ('mmseg', 'AdamW', 6e-5, 0.01, ADAMW, None, None, 16, [('LinearLR', 0, 1500), ('PolyLR', 1500, 160000)],
            ('iters', 160000), True)


# official twins Mask R-CNN config / paper D.8:
def _pyramid_mask_rcnn(epochs):  # AdamW 1e-4, wd 0.05 (none on norms), 1000 warm-up, AMP
    return ('mmdet', 'AdamW', 1e-4, 0.05, ADAMW, None, None, 16, [('LinearLR', 0, 1000), ('MultiStepLR', 0, epochs)],
            ('epochs', epochs), True)


def _cait_imagenet():  # CaiT Sec. 4.3: AdamW 1e-3 @ 1024, wd 0.05, 5 warm-up epochs + cosine, 400 epochs, fp16
    return ('mmpretrain', 'AdamW', 1e-3, 0.05, ADAMW, None, None, 1024,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 400)], ('epochs', 400), True)


def _deit():  # DeiT Table 9 / deit main.py: AdamW 5e-4 per 512 x 1024, wd 0.05, 5 warm-up + cosine, 300 epochs, AMP
    return ('mmpretrain', 'AdamW', 1e-3, 0.05, ADAMW, None, None, 1024,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 300)], ('epochs', 300), True)


def _generation(kilo_iters):  # DiT / SiT train.py: AdamW 1e-4, wd 0, no scheduler, 8 x 32, iterations, fp32 default
    return ('mmpretrain', 'AdamW', 1e-4, 0.0, ADAMW, None, None, 256, [], ('iters', kilo_iters * 1000), False)


# ours, reading the deit maintainers' M48↑448 recipe (https://github.com/facebookresearch/deit/issues/108): batch 256,
# lr 5e-6 taken at that batch (2.5e-6 if it was deit's --lr, scaled by batch / 512; the config states both),
def _cait_finetune():  # wd 0.05, 60 epochs, 5 warm-up, x 0.5 every 10, fp16
    return ('mmpretrain', 'AdamW', 5e-6, 0.05, ADAMW, None, None, 256, [('LinearLR', 0, 5), ('StepLR', 0, 60)],
            ('epochs', 60), True)


#: official recipes that decay biases and LayerScale (only norms are exempt): the pyramid dense runs
#: (official mmseg / mmdet configs)
DECAY_BIASES = {f'pyramid_vision_llama/upernet_pyramid-vision-llama-{a}_8xb2-160k_ade20k-512x512.py'
                for a in ('small', 'base', 'large')} | {
    'pyramid_vision_llama/mask-rcnn_pyramid-vision-llama-base_fpn_8xb2-ms-crop-3x_coco.py',
    'pyramid_vision_llama/mask-rcnn_pyramid-vision-llama-base_fpn_8xb2-1x_coco.py'}


def _defocus(lr, epochs, warmup, layers, batch):  # released yaml: AdamW wd 0.05, warm-up + per-step cosine, bf16 AMP
    return ('mmpretrain', 'AdamW', lr, 0.05, ADAMW, None, layers, batch,
            [('LinearLR', 0, warmup), ('CosineAnnealingLR', warmup, epochs)], ('epochs', epochs), True)


#: official recipes that clip gradients (the De-focus code: max norm 10); every other recipe does not clip
CLIP_GRAD = {'defocus/defocus-mamba-base_8xb64-300e_in1k.py': dict(max_norm=10.0),
             'defocus/defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py': dict(max_norm=10.0),
             'defocus/defocus-mamba-large_8xb32-fsdp-20e_in21k-pre_in1k-384px.py': dict(max_norm=10.0),
             # the paper-derived ViT / RetNet take the released Mamba recipe (no code exists for them)
             'defocus/defocus-vit-base_8xb64-300e_in1k.py': dict(max_norm=10.0),
             'defocus/defocus-retnet-base_8xb64-300e_in1k.py': dict(max_norm=10.0),
             'defocus/defocus-mamba-large_64xb64-90e_in21k-192px.py': dict(max_norm=10.0)}
#: paper Table 4: the De-focus Mamba-B ablations keep the released base recipe (their rows:
#: tests/test_models/test_defocus/test_ablation_configs.py)
DEFOCUS_ABLATIONS = sorted(str(p.relative_to(ROOT / 'configs'))
                           for p in (ROOT / 'configs' / 'defocus').glob('defocus-mamba-base_ablation-*.py'))
CLIP_GRAD.update({name: dict(max_norm=10.0) for name in DEFOCUS_ABLATIONS})
#: the De-focus DINO configs (released detection/configs/dino/) -> their lr steps; they clip at 0.1, decay every
#: parameter (no norm / bias exemption) and multiply the lr of names containing backbone / sampling_offsets /
#: reference_points by 0.1
DEFOCUS_DINO = {'defocus/dino-4scale_defocus-mamba-base-p16_sfp_8xb2-12e_coco.py': [11],
                'defocus/dino-4scale_defocus-mamba-base-p16_sfp_8xb2-36e_coco.py': [27, 33]}
CLIP_GRAD.update({name: dict(max_norm=0.1, norm_type=2) for name in DEFOCUS_DINO})
DECAY_ALL = set(DEFOCUS_DINO)
LR_MULT = {name: {'backbone': 0.1, 'sampling_offsets': 0.1, 'reference_points': 0.1} for name in DEFOCUS_DINO}

RECIPES = {
    'defocus/defocus-mamba-base_8xb64-300e_in1k.py': _defocus(5e-4, 300, 20, 24, 512),
    'defocus/defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py': _defocus(2e-5 * 256 / 512, 20, 2, 48, 256),
    # the sharded (FSDP) variants of the Large models keep their recipes (tests/test_engine/test_sharded_training.py)
    'defocus/defocus-mamba-large_8xb32-fsdp-20e_in21k-pre_in1k-384px.py': _defocus(2e-5 * 256 / 512, 20, 2, 48, 256),
    'defocus/defocus-vit-base_8xb64-300e_in1k.py': _defocus(5e-4, 300, 20, 12, 512),
    'defocus/defocus-retnet-base_8xb64-300e_in1k.py': _defocus(5e-4, 300, 20, 12, 512),
    # paper Table 7 / the released defocus_mamba_large_22k.yaml: 1.25e-4 x 4096 / 512
    'defocus/defocus-mamba-large_64xb64-90e_in21k-192px.py': _defocus(1e-3, 90, 5, 48, 4096),
    **{name: _defocus(5e-4, 300, 20, 24, 512) for name in DEFOCUS_ABLATIONS},
    # released DINO recipe: AdamW 2e-4, wd 1e-4, 8 x 2 images, lr x 0.1 at the steps, fp32
    **{name: ('mmdet', 'AdamW', 2e-4, 1e-4, ADAMW, None, 24, 16, [('MultiStepLR', 0, epochs)], ('epochs', epochs),
              False) for name, epochs in zip(DEFOCUS_DINO, (12, 36))},
    **{f'pyramid_vision_llama/pyramid-vision-llama-{a}_8xb128-300e_in1k.py': _pyramid_imagenet()
       for a in ('small', 'base', 'large')},
    **{f'pyramid_vision_llama/upernet_pyramid-vision-llama-{a}_8xb2-160k_ade20k-512x512.py': _pyramid_upernet()
       for a in ('small', 'base', 'large')},
    'pyramid_vision_llama/mask-rcnn_pyramid-vision-llama-base_fpn_8xb2-ms-crop-3x_coco.py': _pyramid_mask_rcnn(36),
    'pyramid_vision_llama/mask-rcnn_pyramid-vision-llama-base_fpn_8xb2-1x_coco.py': _pyramid_mask_rcnn(12),
    'illama/illama-tiny-p16_32xb128_in1k.py': _imagenet(5),
    'illama/illama-small-p16_32xb128_in1k.py': _imagenet(5),
    'illama/illama-base-p16_32xb128_in1k.py': _imagenet(50),
    # Table 18: the same recipes from LLaMA-2 weight selection (only the backbone's init differs)
    'illama/illama-tiny-p16_llama2-ws_32xb128_in1k.py': _imagenet(5),
    'illama/illama-small-p16_llama2-ws_32xb128_in1k.py': _imagenet(5),
    'illama/illama-base-p16_llama2-ws_32xb128_in1k.py': _imagenet(50),
    'illama/upernet_illama-tiny-p16_8xb2-160k_ade20k-512x512.py': _upernet_illama(),
    'illama/upernet_illama-base-p16_8xb2-160k_ade20k-512x512.py': _upernet_illama(),
    # ours (no paper result): ViTDet-B's recipe, mmdet's LSJ 100 epochs = 25 x a 4x repeated dataset
    'illama/mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py':
        ('mmdet', 'AdamW', 1e-4, 0.1, ADAMW, 0.7, 12, 64, [('LinearLR', 0, 250), ('MultiStepLR', 0, 25)],
         ('epochs', 25), True),
    'vision_llama/mae_vision-llama-base-p16_8xb512-amp-coslr-800e_in1k.py': _mae(800, 'base'),
    'vision_llama/mae_vision-llama-base-p16_8xb512-amp-coslr-1600e_in1k.py': _mae(1600, 'base'),
    'vision_llama/mae_vision-llama-large-p16_8xb512-amp-coslr-800e_in1k.py': _mae(800, 'large'),
    'vision_llama/mae_vision-llama-large-p16_8xb512-amp-coslr-1600e_in1k.py': _mae(1600, 'large'),
    'vision_llama/mae_vision-llama-large-p16_8xb512-amp-fsdp-coslr-800e_in1k.py': _mae(800, 'large'),
    'vision_llama/mae_vision-llama-large-p16_8xb512-amp-fsdp-coslr-1600e_in1k.py': _mae(1600, 'large'),
    # Table 15 (MAE's per-256 base lr 1e-3): Large 4e-3 = official; Base 2e-3 = the official Base config
    'vision_llama/vision-llama-base-p16_8xb128-coslr-100e_in1k.py':
        ('mmpretrain', 'AdamW', 2e-3, 0.05, ADAMW, 0.45, 12, 1024,
         [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 100)], ('epochs', 100), None),
    'vision_llama/vision-llama-large-p16_8xb128-coslr-50e_in1k.py':
        ('mmpretrain', 'AdamW', 1e-3 * 1024 / 256, 0.05, ADAMW, 0.45, 24, 1024,
         [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 50)], ('epochs', 50), None),
    'vision_llama/vision-llama-base-p16_8xb2048-linear-coslr-90e_in1k.py': _linear('base'),
    'vision_llama/vision-llama-large-p16_8xb2048-linear-coslr-90e_in1k.py': _linear('large'),
    'vision_llama/upernet_vision-llama-base-p16_8xb2-160k_ade20k-512x512.py':
        ('mmseg', 'AdamW', 6e-5, 0.05, ADAMW, 0.65, 12, 16, [('LinearLR', 0, 1500), ('PolyLR', 1500, 160000)],
         ('iters', 160000), True),
    'vision_llama/vitdet_mask-rcnn_vision-llama-base-p16_sfp_16xb4-lsj-36e_coco.py':
        ('mmdet', 'AdamW', 1e-4, 0.1, ADAMW, 0.7, 12, 64, [('LinearLR', 0, 1000), ('MultiStepLR', 0, 66536)],
         ('iters', 66536), True),
    **{f'cait/cait-{a}_8xb128-400e_in1k.py': _cait_imagenet() for a in ('xxs24', 'xxs36', 's24')},
    **{f'cait/cait-{a}_8xb32-60e_in1k-384px.py': _cait_finetune() for a in ('xxs24', 'xxs36', 'xs24', 's24', 's36')},
    'cait/cait-m36_32xb8-60e_in1k-384px.py': _cait_finetune(),
    **{f'cait/cait-{a}_dist-regnety-16gf_8xb128-400e_in1k.py': _cait_imagenet() for a in ('xxs24', 's24')},
    'cait/cait-m36_dist-regnety-16gf_8xb128-400e_in1k.py': _cait_imagenet(),
    **{f'cait/cait-{a}_dist-regnety-16gf_8xb32-60e_in1k-384px.py': _cait_finetune() for a in ('xxs24', 's24')},
    'cait/cait-m36_dist-regnety-16gf_32xb8-60e_in1k-384px.py': _cait_finetune(),
    **{f'distillation/deit-{a}_dist-regnety-16gf_8xb128-300e_in1k.py': _deit() for a in ('small', 'base')},
    'cait/cait-m48_32xb8-60e_in1k-448px.py': _cait_finetune(),
    'cait/cait-m48_32xb8-fsdp-60e_in1k-448px.py': _cait_finetune(),
    # ours: the iLLaMA-S recipe (Table 13) with a CaiT class-attention tail as the pooling
    'cait/illama-small-p16_ca-pool_32xb128_in1k.py': _imagenet(5),
    # ours (no paper result): the VisionLLaMA UperNet recipe with mmseg's 24-block layer decay (BEiT-L's 0.95)
    'cait/upernet_cait-s24_8xb2-160k_ade20k-512x512.py':
        ('mmseg', 'AdamW', 6e-5, 0.05, ADAMW, 0.95, 24, 16, [('LinearLR', 0, 1500), ('PolyLR', 1500, 160000)],
         ('iters', 160000), True),
    # DiT / SiT and their VisionLLaMA variants (dit/train.py, sit/train.py): AdamW 1e-4 constant, wd 0, batch 256, fp32
    # (the official fp16 AMP is --amp); the rest of these recipes: tests/test_generation_configs.py
    **{str(path.relative_to(ROOT / 'configs')): _generation(2400 if '-2400k_' in path.name else 400)
       for folder in ('dit_llama', 'sit_llama') for path in (ROOT / 'configs' / folder).glob('*.py')
       if '_shapes-' not in path.name},  # the CPU twins: tests/test_generation_twins.py
}

# iLLaMA's LLaMAfication ladder (paper Table 17; tests/test_models/test_illama/test_llamafication.py) trains every rung
# on the basic recipe of Table 12 (the Table 13 recipe with 50 warm-up epochs); the last Tiny rung takes the 5 warm-up
# epochs of the iLLaMA-T config with its soft mask.
ILLAMA_LADDER = ('vit', 'swiglu', 'rmsnorm', 'causal', 'ps-cls', 'rope', 'rope-lpe', 'aug', 'softmask')


def _illama_in21k(layers):  # iLLaMA Table 13, ImageNet-21K: AdamW 1e-3 @ 4096, wd 0.01, 5 + 85 epochs, fp32
    return ('mmpretrain', 'AdamW', 1e-3, 0.01, ADAMW, None, layers, 4096,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 90)], ('epochs', 90), False)


def _illama_finetune(lr, layers):  # iLLaMA Table 14: AdamW @ 512, wd 1e-8, 30 epochs, no warm-up, cosine, fp32
    return ('mmpretrain', 'AdamW', lr, 1e-8, ADAMW, None, layers, 512, [('CosineAnnealingLR', 0, 30)],
            ('epochs', 30), False)


RECIPES.update({
    **{f'illama/illama-{size}-p16_llamafication-{rung}_32xb128_in1k.py':
       _imagenet(5 if (size, rung) == ('tiny', 'softmask') else 50)
       for size in ('tiny', 'base') for rung in ILLAMA_LADDER},
    'illama/illama-base-p16_32xb128_in21k.py': _illama_in21k(12),
    'illama/illama-large-p16_32xb128_in21k.py': _illama_in21k(24),
    'illama/illama-base-p16_in21k-pre_8xb64_in1k.py': _illama_finetune(8e-5, 12),
    'illama/illama-base-p16_in21k-pre_8xb64_in1k-384px.py': _illama_finetune(1.1e-4, 12),
    'illama/illama-large-p16_in21k-pre_8xb64_in1k.py': _illama_finetune(6e-5, 24),
    'illama/illama-large-p16_in21k-pre_8xb64_in1k-384px.py': _illama_finetune(3.5e-5, 24),
    'illama/illama-base-p16_8xb64_in1k-384px.py': _illama_finetune(8e-5, 12),
})


def _illama_qat(lr):  # iLLaMA Table 15 (8-bit QAT): Table 13's recipe, base lr 3e-3 (T) / 4e-3 (S), 5 warm-up epochs
    return ('mmpretrain', 'AdamW', lr, 0.05, ADAMW, None, 12, 4096,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 300)], ('epochs', 300), False)


RECIPES.update({'illama/illama-tiny-p16_qat-w8a8_32xb128_in1k.py': _illama_qat(3e-3),
                'illama/illama-small-p16_qat-w8a8_32xb128_in1k.py': _illama_qat(4e-3)})


@pytest.mark.parametrize('arch', ['tiny', 'small'])
def test_qat_configs_quantize_at_8_bits_from_the_full_precision_model(arch):
    cfg = _config(f'illama-{arch}-p16_qat-w8a8_32xb128_in1k.py')
    full = _config(f'illama-{arch}-p16_32xb128_in1k.py')
    assert cfg.model.backbone.qat == dict(bits=8)
    assert cfg.load_from == f'checkpoints/illama-{arch}-p16_in1k.pth'
    # Table 15 keeps the rest of the from-scratch recipe (drop path, mixup / cutmix, soft mask)
    assert cfg.model.backbone.drop_path_rate == full.model.backbone.drop_path_rate
    assert cfg.model.train_cfg == full.model.train_cfg and cfg.custom_hooks == full.custom_hooks


def _cifar_transfer():  # iLLaMA Table 16, official main_soft_transfer.py: AdamW 2e-3 @ 1024, wd 0.05, 50 + 250, fp16
    return ('mmpretrain', 'AdamW', 2e-3, 0.05, ADAMW, None, None, 1024,
            [('LinearLR', 0, 50), ('CosineAnnealingLR', 50, 300)], ('epochs', 300), True)


RECIPES.update({f'illama/{model}-tiny-p16_in1k-pre_4xb256-300e{soft}_{data}.py': _cifar_transfer()
                for model, soft in (('vit', ''), ('illama', ''), ('illama', '-soft-mask'))
                for data in ('cifar10', 'cifar100')})


def _deit3(lr, layers):  # official deit/train_plain_800.sh: LAMB (unscaled lr) @ 2048, wd 0.05, 5 + 795 epochs, fp16
    return ('mmpretrain', 'Lamb', lr, 0.05, ADAMW, None, layers, 2048,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 800)], ('epochs', 800), True)


def _deit3_ft(layers):  # the official 224 px fine-tune: AdamW 1e-5 @ 512, wd 0.1, 5 + 15 epochs, fp16
    return ('mmpretrain', 'AdamW', 1e-5, 0.1, ADAMW, None, layers, 512,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, 20)], ('epochs', 20), True)


#: VisionLLaMA paper Table 7 rows on VisionLLaMA-L (two stages each); (f) GAP also on S and B
VISION_LLAMA_ABLATIONS = ('gelu', 'rmsnorm', 'rope25', 'rope50', 'theta100', 'theta1000', 'theta100000',
                          'rope-per-head', 'gap')
RECIPES.update({
    'vision_llama/vision-llama-small-p16_deit3_8xb256-800e_in1k.py': _deit3(4e-3, 12),
    'vision_llama/vision-llama-small-p16_deit3-gap_8xb256-800e_in1k.py': _deit3(4e-3, 12),
    **{f'vision_llama/vision-llama-base-p16_deit3{tag}_8xb256-800e_in1k-192px.py': _deit3(3e-3, 12)
       for tag in ('', '-gap')},
    **{f'vision_llama/vision-llama-base-p16_deit3{tag}-ft_8xb64-20e_in1k.py': _deit3_ft(12) for tag in ('', '-gap')},
    **{f'vision_llama/vision-llama-large-p16_deit3{tag}_8xb256-800e_in1k-128px.py': _deit3(3e-3, 24)
       for tag in ('', *(f'-{row}' for row in VISION_LLAMA_ABLATIONS))},
    **{f'vision_llama/vision-llama-large-p16_deit3{tag}-ft_8xb64-20e_in1k.py': _deit3_ft(24)
       for tag in ('', *(f'-{row}' for row in VISION_LLAMA_ABLATIONS))},
    # Table 7(g): Pyramid VisionLLaMA-S + LPE / + PEG on the pyramid recipe
    **{f'vision_llama/pyramid-vision-llama-small-{pe}_8xb128-300e_in1k.py': _pyramid_imagenet()
       for pe in ('lpe', 'peg')},
})


# CaiT's ablations (paper Tables 1, 2 and 8: DeiT's recipe, which is CaiT's, for 300 epochs; the 400-epoch rungs and the
# ↑384 rung as the CaiT configs they follow) and transfer (Table 7, Sec. 4.4.3: the ImageNet recipe with lr / 100 for
# CIFAR, / 10 otherwise, 1000 epochs, 360 for iNaturalist); tests/test_models/test_cait/test_ablation_configs.py
# checks what each config changes.
def _cait_epochs(epochs, lr=1e-3):
    return ('mmpretrain', 'AdamW', lr, 0.05, ADAMW, None, None, 1024,
            [('LinearLR', 0, 5), ('CosineAnnealingLR', 5, epochs)], ('epochs', epochs), True)


RECIPES.update({
    **{str(p.relative_to(ROOT / 'configs')): _cait_epochs(300) for p in (ROOT / 'configs/cait').glob('deit-small*.py')
       if '-300e_' in p.name},
    'cait/deit-small_to-cait-400e_8xb128-400e_in1k.py': _cait_epochs(400),
    'cait/deit-small_to-cait-test-256px_8xb128-400e_in1k.py': _cait_epochs(400),
    'cait/deit-small_to-cait-384px_8xb32-60e_in1k-384px.py': _cait_finetune(),
    'cait/deit-small_to-cait-dist-regnety-16gf_8xb32-60e_in1k-384px.py': _cait_finetune(),
    'cait/deit-small_to-cait-dist-crop1.0_8xb32-60e_in1k-384px.py': _cait_finetune(),
    'cait/cait-s36_8xb128-400e_in1k.py': _cait_imagenet(),
    'cait/cait-m36_8xb128-400e_in1k.py': _cait_imagenet(),
    **{f'cait/cait-{a}-in1k-pre_8xb128-{e}e_{data}.py': _cait_epochs(e, lr) for a in ('s36', 'm36')
       for data, e, lr in (('cifar10', 1000, 1e-5), ('cifar100', 1000, 1e-5), ('flowers102', 1000, 1e-4),
                           ('stanford-cars', 1000, 1e-4), ('inat2018', 360, 1e-4), ('inat2019', 360, 1e-4))},
})


# De-focus Table 9 (OpenCLIP's recipe): AdamW 5e-4, betas (0.9, 0.98), wd 0.1, batch 32768, 32 epochs of 400M
# pairs, 20k warm-up iterations, cosine per iteration to the end, bf16 AMP
_CLIP_ITERS = 32 * (400_000_000 // 32768)
RECIPES.update({
    f'defocus/clip_{tower}_128xb256-32e_laion400m.py':
    ('mmpretrain', 'AdamW', 5e-4, 0.1, (0.9, 0.98), None, None, 32768,
     [('LinearLR', 0, 20000), ('CosineAnnealingLR', 20000, _CLIP_ITERS)], ('epochs', 32), True)
    for tower in ('defocus-mamba-base-p32', 'vit-base-p32')
})


@pytest.mark.parametrize('tower,params', [('defocus-mamba-base-p32', 161.9e6), ('vit-base-p32', 151.3e6)])
def test_clip_configs_have_the_papers_parameter_count(tower, params):
    """Table 3: 161.9M for De-focus Mamba-B/32, 151.3M for the ViT-B/32 baseline (OpenCLIP's), to the paper's 0.1M;
    no weight decay on the temperature (OpenCLIP's rule), OpenCLIP's eps, ImageNet zero-shot with OpenAI's 80
    templates."""
    cfg = Config.fromfile(str(ROOT / f'configs/defocus/clip_{tower}_128xb256-32e_laion400m.py'))
    model = build_on_meta(cfg, 'mmpretrain')
    assert round(sum(p.numel() for p in model.parameters()) / 1e5) == round(params / 1e5)
    assert cfg.optim_wrapper.paramwise_cfg.custom_keys['logit_scale'] == dict(decay_mult=0.0)
    assert cfg.optim_wrapper.optimizer.eps == 1e-6 and cfg.train_dataloader.drop_last
    assert (cfg.model.text_prototype, cfg.model.text_prompt, len(model.prompt)) == ('imagenet', 'openai_imagenet', 80)


def test_every_full_config_has_a_recipe_test():
    found = {str(p.relative_to(ROOT / 'configs')) for p in (ROOT / 'configs').glob('*/*.py')
             if '_shapes-' not in p.name and not p.name.endswith('_ms-test.py')}  # twins: *_shapes-*
    assert found == set(RECIPES)


def _expected_layer_scale(name: str, rate: float, num_layers: int) -> float:
    """BEiT / ViTDet layer ids from the parameter name: stem 0, block i -> i + 1, the rest L + 1."""
    parts = name.split('.')
    if parts[1] in ('patch_embed', 'cls_token', 'pos_embed'):
        layer_id = 0
    elif parts[1] == 'layers':
        layer_id = int(parts[2]) + 1
    else:
        layer_id = num_layers + 1
    return rate**(num_layers + 1 - layer_id)


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_full_config_recipe(name):
    scope, opt_type, lr, wd, betas, layer_decay, num_layers, batch, schedule, length, amp = RECIPES[name]
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    gpus, per_gpu = map(int, re.search(r'_(\d+)xb(\d+)', name).groups())
    assert cfg.train_dataloader.batch_size == per_gpu and gpus * per_gpu == batch
    unit, steps = length
    assert cfg.train_cfg[f'max_{unit}'] == steps
    assert [(s.type, s.get('begin', 0), s.get('end', steps)) for s in cfg.param_scheduler] == schedule
    assert cfg.optim_wrapper.get('clip_grad') == CLIP_GRAD.get(name)
    wrapper_cfg = cfg.optim_wrapper.to_dict()
    if amp is not None:
        assert (wrapper_cfg.get('type', 'OptimWrapper') == 'AmpOptimWrapper') == amp
    # The real constructor and optimizer from the config; only the wrapper class is swapped, because mmengine's
    # AmpOptimWrapper asserts a GPU when it is constructed (its param groups are the OptimWrapper's).
    wrapper_cfg['type'] = 'OptimWrapper'
    wrapper_cfg.pop('loss_scale', None)
    wrapper_cfg.pop('dtype', None)
    model = build_on_meta(cfg, scope)
    optimizer = build_optim_wrapper(model, wrapper_cfg).optimizer
    assert type(optimizer).__name__ == opt_type
    assert optimizer.defaults['lr'] == pytest.approx(lr) and optimizer.defaults['weight_decay'] == wd
    if opt_type in ('AdamW', 'Lamb'):
        assert tuple(optimizer.defaults['betas']) == betas
    else:
        assert optimizer.defaults['momentum'] == betas

    names = {id(p): n for n, p in model.named_parameters()}
    # a distillation teacher's parameters never have a gradient, so the optimizer never changes them
    groups = [(names[id(p)], g) for g in optimizer.param_groups for p in g['params']
              if not names[id(p)].startswith('teacher.')]
    in_groups = [n for n, _ in groups]
    assert len(in_groups) == len(set(in_groups))  # no parameter twice
    assert {n for n, p in model.named_parameters() if p.requires_grad} <= set(in_groups)
    for param_name, group in groups:
        scale = 1.0
        if layer_decay is not None and param_name.startswith('backbone.'):
            scale = _expected_layer_scale(param_name, layer_decay, num_layers)
        scale *= next((mult for key, mult in LR_MULT.get(name, {}).items() if key in param_name), 1.0)
        assert group['lr'] == pytest.approx(lr * scale), param_name
        param = model.get_parameter(param_name)
        if name in DECAY_ALL:
            assert group['weight_decay'] == wd, param_name
        elif param.ndim == 1 and (name not in DECAY_BIASES or 'norm' in param_name):  # norms (and biases) exempt
            assert group['weight_decay'] == 0.0, param_name
        elif param_name.endswith(('qkv.weight', 'w12.weight')):
            assert group['weight_decay'] == wd, param_name
    if layer_decay is not None:  # the deepest ids really are scaled
        assert any(g['lr'] == pytest.approx(lr * layer_decay**(num_layers + 1)) for n, g in groups
                   if n.startswith('backbone.patch_embed'))
    if name in LR_MULT:  # substrings; the released 'reference_points' (Deformable DETR's) matches nothing in DINO
        assert {key for key in LR_MULT[name] if any(key in n for n, _ in groups)} == {'backbone', 'sampling_offsets'}


# the ablations share the base's optimizer settings (checked in test_full_config_recipe); some have no A_log
@pytest.mark.parametrize('name', sorted(set(CLIP_GRAD) - set(DEFOCUS_DINO) - set(DEFOCUS_ABLATIONS)))
def test_defocus_no_decay_set_is_the_official_rule(name):
    """The official optimizer exempts 1-D parameters, biases, cls_token / pos_embed, names containing 'decay',
    'alpha', 'beta' or 'gamma' and any name with a capital 'A' or 'D' (the released utils/config.py / main.py)."""
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    wrapper_cfg = dict(cfg.optim_wrapper.to_dict(), type='OptimWrapper')  # AmpOptimWrapper needs a GPU
    wrapper_cfg.pop('dtype', None)
    wrapper_cfg.pop('loss_scale', None)
    model = build_on_meta(cfg, 'mmpretrain')
    optimizer = build_optim_wrapper(model, wrapper_cfg).optimizer
    names = {id(p): n for n, p in model.named_parameters()}
    no_decay = {names[id(p)] for g in optimizer.param_groups for p in g['params'] if g['weight_decay'] == 0}

    def official_exempt(param_name, param):
        short = param_name.split('.', 1)[1]  # the official model has no backbone. / head. prefix
        return (param.ndim == 1 or short.endswith('.bias') or short in ('cls_token', 'pos_embed')
                or any(word in short for word in ('decay', 'alpha', 'beta', 'gamma'))
                or 'A' in short or 'D' in short)

    assert no_decay == {n for n, p in model.named_parameters() if official_exempt(n, p)}
    assert any(n.endswith('A_log' if 'mamba' in name else 'decay.log_rate') for n in no_decay)


def test_defocus_in21k_pretraining_recipe():
    """Paper Table 7 / the released defocus_mamba_large_22k.yaml on mmpretrain's ImageNet21k layout (optimizer and
    schedule: test_full_config_recipe)."""
    cfg = Config.fromfile(str(ROOT / 'configs/defocus/defocus-mamba-large_64xb64-90e_in21k-192px.py'))
    dataset = cfg.train_dataloader.dataset
    assert (dataset.type, dataset.data_root, dataset.split) == ('ImageNet21k', 'data/imagenet21k', 'train')
    assert cfg.model.head.num_classes == cfg.data_preprocessor.num_classes == 21841  # the released 22K head
    backbone, head = cfg.model.backbone, cfg.model.head
    assert (backbone.arch, backbone.img_size) == ('large', 192)
    assert not {'delta_scale_factor', 'rope_scale_factor'} & set(backbone)  # 1.0: the training resolution
    assert backbone.with_cp and (head.hidden_dims, head.aux_loss) == (3072, 'per_token')
    assert [step.type for step in dataset.pipeline] == ['LoadImageFromFile', 'RandomResizedCrop', 'RandomFlip',
                                                        'PackInputs']  # no RandAugment, jitter or erasing
    assert dataset.pipeline[1].scale == 192 and cfg.train_dataloader.sampler.type == 'DefaultSampler'
    assert [(a.type, a.alpha) for a in cfg.model.train_cfg.augments] == [('Mixup', 0.8)]
    assert cfg.model.train_cfg.probs == [0.5] and head.loss.label_smooth_val == 0.1
    assert [(h.type, h.get('start'), h.get('end'), h.get('momentum')) for h in cfg.custom_hooks] == [
        ('DropPathScheduleHook', 0.1, 0.5, None), ('EMAHook', None, None, 1e-4)]
    warmup, cosine = cfg.param_scheduler
    assert warmup.start_factor * 1e-3 == pytest.approx(5e-7 * 8) and cosine.eta_min == pytest.approx(5e-6 * 8)
    assert all(cfg.get(key) is None for key in ('val_dataloader', 'val_cfg', 'val_evaluator', 'test_dataloader',
                                                'test_cfg', 'test_evaluator'))
    finetune = Config.fromfile(str(ROOT / 'configs/defocus/defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py'))
    assert finetune.load_from == 'checkpoints/defocus-mamba-large_22kto1k.pth'  # the released 22K weights


#: the released DINO recipe: DETR multi-scale augmentation (shorter side 480-800 step 32, max 1333; or 400/500/600
#: -> crop 384-600)
DETR_SCALES = [(side, 1333) for side in range(480, 801, 32)]


@pytest.mark.parametrize('name', sorted(DEFOCUS_DINO))
def test_defocus_dino_recipe(name):
    """The released De-focus Mamba-B + DINO recipe; optimizer groups: test_full_config_recipe."""
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    model = cfg.model
    backbone = model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size, backbone.patch_size) == ('DefocusMamba', 'base', 224, 16)
    assert backbone.patch_rearrange is True
    assert (backbone.delta_scale_factor, backbone.rope_scale_factor) == (4.57, 20.0)
    assert dict(backbone.final_norm_cfg) == dict(type='LN', eps=1e-5)
    assert (backbone.drop_path_rate, backbone.out_type) == (0.5, 'featmap')
    assert (backbone.init_cfg.type, backbone.init_cfg.prefix) == ('Pretrained', 'backbone.')
    neck = model.neck
    assert (neck.type, neck.in_channels, neck.out_channels, tuple(neck.scales), neck.num_outs, neck.norm_eps) == (
        'SimpleFeaturePyramid', 768, 256, (4, 2, 1, 0.5), 4, 1e-5)  # P2-P5, LN2d eps as released (mmcv's 1e-5)
    # mmdet's improved DINO-4scale, as the official base
    assert (model.type, model.num_queries, model.get('num_feature_levels', 4)) == ('DINO', 900, 4)
    assert model.with_box_refine and model.as_two_stage and model.data_preprocessor.pad_size_divisor == 1
    for coder in (model.encoder, model.decoder):
        assert coder.num_layers == 6 and coder.layer_cfg.ffn_cfg.feedforward_channels == 2048
    assert model.encoder.layer_cfg.self_attn_cfg.num_levels == model.decoder.layer_cfg.cross_attn_cfg.num_levels == 4
    assert (model.positional_encoding.offset, model.positional_encoding.temperature) == (-0.5, 10000)
    head = model.bbox_head
    assert [head[k].loss_weight for k in ('loss_cls', 'loss_bbox', 'loss_iou')] == [2.0, 5.0, 2.0]
    assert (model.dn_cfg.label_noise_scale, model.dn_cfg.box_noise_scale, model.dn_cfg.group_cfg.num_dn_queries) == (
        0.5, 1.0, 300)
    assert model.test_cfg.max_per_img == 300
    # optimizer (groups, decay and lr multipliers of the built model: test_full_config_recipe)
    optim = cfg.optim_wrapper
    assert optim.get('type', 'OptimWrapper') == 'OptimWrapper'  # fp32
    assert (optim.optimizer.type, optim.optimizer.lr, optim.optimizer.weight_decay) == ('AdamW', 2e-4, 1e-4)
    assert dict(optim.clip_grad) == dict(max_norm=0.1, norm_type=2)
    assert set(optim.paramwise_cfg) == {'custom_keys'}  # no norm / bias / layer-wise rules
    assert {k: dict(v) for k, v in optim.paramwise_cfg.custom_keys.items()} == {
        k: dict(lr_mult=0.1) for k in ('backbone', 'sampling_offsets', 'reference_points')}
    (step, ) = cfg.param_scheduler
    assert (step.type, step.milestones, step.gamma, step.by_epoch) == ('MultiStepLR', DEFOCUS_DINO[name], 0.1, True)
    assert cfg.train_cfg.max_epochs == step.end == (12 if DEFOCUS_DINO[name] == [11] else 36)
    # data: DETR multi-scale augmentation with flips, test at (1333, 800)
    train = cfg.train_dataloader
    assert (train.batch_size, train.dataset.filter_cfg.filter_empty_gt) == (2, False)
    flip, choice = [t for t in train.dataset.pipeline if t.type in ('RandomFlip', 'RandomChoice')]
    assert flip.prob == 0.5
    (resize, ), (small, crop, resize_again) = choice.transforms
    assert [tuple(s) for s in resize.scales] == [tuple(s) for s in resize_again.scales] == DETR_SCALES
    assert [tuple(s) for s in small.scales] == [(400, 4200), (500, 4200), (600, 4200)]
    assert (crop.type, crop.crop_type, tuple(crop.crop_size)) == ('RandomCrop', 'absolute_range', (384, 600))
    (test_resize, ) = [t for t in cfg.test_dataloader.dataset.pipeline if t.type == 'Resize']
    assert tuple(test_resize.scale) == (1333, 800) and test_resize.keep_ratio


def test_defocus_dino_detector_runs():
    """The full-size detector on a small non-square image: 2 x 2 sections of 224 px, P2-P5 at strides 4-32."""
    model = _build(Config.fromfile(str(ROOT / 'configs' / sorted(DEFOCUS_DINO)[0])), 'mmdet')
    with torch.no_grad():
        features = model.extract_feat(torch.randn(1, 3, 256, 320))
    assert [tuple(f.shape) for f in features] == [(1, 256, 64, 80), (1, 256, 32, 40), (1, 256, 16, 20),
                                                  (1, 256, 8, 10)]


# ------------------------------------------------------------------------------------------------------------ CaiT
# Paper Table 4 (uniform drop path d_r; LayerScale init as the official code) and the released archs (cait_models.py);
# the ↑ configs keep each model's d_r except M48 (0.3 in the deit maintainers' M48↑448 recipe).
CAIT = ROOT / 'configs' / 'cait'
#: config -> (arch, img_size, width, drop path, LayerScale init of the built model)
CAIT_IN1K = {
    'cait-xxs24_8xb128-400e_in1k.py': ('xxs24', 224, 192, 0.05, 1e-5),
    'cait-xxs36_8xb128-400e_in1k.py': ('xxs36', 224, 192, 0.1, 1e-5),  # the code's 1e-5; the paper says 1e-6
    'cait-s24_8xb128-400e_in1k.py': ('s24', 224, 384, 0.1, 1e-5),
    'cait-s36_8xb128-400e_in1k.py': ('s36', 224, 384, 0.2, 1e-6),  # the 224 px stages of S36↑384 / M36↑384
    'cait-m36_8xb128-400e_in1k.py': ('m36', 224, 768, 0.3, 1e-6),
    'cait-xxs24_8xb32-60e_in1k-384px.py': ('xxs24', 384, 192, 0.05, 1e-5),
    'cait-xxs36_8xb32-60e_in1k-384px.py': ('xxs36', 384, 192, 0.1, 1e-5),
    'cait-xs24_8xb32-60e_in1k-384px.py': ('xs24', 384, 288, 0.05, 1e-5),
    'cait-s24_8xb32-60e_in1k-384px.py': ('s24', 384, 384, 0.1, 1e-5),
    'cait-s36_8xb32-60e_in1k-384px.py': ('s36', 384, 384, 0.2, 1e-6),
    'cait-m36_32xb8-60e_in1k-384px.py': ('m36', 384, 768, 0.3, 1e-6),
    'cait-m48_32xb8-60e_in1k-448px.py': ('m48', 448, 768, 0.3, 1e-6),
    'cait-m48_32xb8-fsdp-60e_in1k-448px.py': ('m48', 448, 768, 0.3, 1e-6),
    # hard distillation from RegNetY-16GF (paper Sec. 4.3): the released (Υ) models' training
    'cait-xxs24_dist-regnety-16gf_8xb128-400e_in1k.py': ('xxs24', 224, 192, 0.05, 1e-5),
    'cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py': ('s24', 224, 384, 0.1, 1e-5),
    'cait-m36_dist-regnety-16gf_8xb128-400e_in1k.py': ('m36', 224, 768, 0.3, 1e-6),
    'cait-xxs24_dist-regnety-16gf_8xb32-60e_in1k-384px.py': ('xxs24', 384, 192, 0.05, 1e-5),
    'cait-s24_dist-regnety-16gf_8xb32-60e_in1k-384px.py': ('s24', 384, 384, 0.1, 1e-5),
    'cait-m36_dist-regnety-16gf_32xb8-60e_in1k-384px.py': ('m36', 384, 768, 0.3, 1e-6),
}
#: where a distilled ↑384 run starts: the released (distilled) 224 px weights, converted, or the distilled 224 px run
CAIT_DIST_START = {'xxs24': 'checkpoints/cait-xxs24_in1k-224px.pth', 's24': 'checkpoints/cait-s24_in1k-224px.pth',
                   'm36': 'work_dirs/cait-m36_dist-regnety-16gf_8xb128-400e_in1k/epoch_400.pth'}


def _cait_config(name: str) -> Config:
    return Config.fromfile(str(CAIT / name))


def test_cait_configs_cover_the_released_models():
    assert {name for name in CAIT_IN1K} == {p.name for p in CAIT.glob('cait-*_in1k*.py')}


@pytest.mark.parametrize('name', sorted(CAIT_IN1K))
def test_cait_imagenet_recipe(name):
    """Model, data and schedule details of paper Sec. 4.3 / Table 4 (224 px) and the deit maintainers' M48↑448 recipe
    (the ↑ stage); the optimizer groups are checked by test_full_config_recipe and
    test_cait_no_decay_set_is_the_official_rule."""
    arch, size, width, drop_path, _ = CAIT_IN1K[name]
    cfg = _cait_config(name)
    model = cfg.model
    distilled = '_dist-' in name
    if distilled:  # DeiT hard distillation on the one head, alpha 0.5, from deit's RegNetY-16GF at the student's size
        assert (model.type, model.distillation, model.alpha) == ('DistillationClassifier', dict(mode='hard'), 0.5)
        teacher = Config.fromfile(model.teacher.config)
        assert (teacher.model.type, teacher.model.model_name, model.teacher.get('input_size')) == (
            'TimmClassifier', 'regnety_160', None)
        assert model.teacher.checkpoint == 'https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth'
    else:
        assert model.type == 'ImageClassifier'
    backbone = model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size, backbone.get('patch_size', 16)) == ('CaiT', arch, size, 16)
    assert (backbone.drop_path_rate, backbone.out_type) == (drop_path, 'cls_token')
    assert backbone.get('layer_scale_init_value') is None  # the arch's (official code) value
    assert model.neck is None
    head = model.head
    assert (head.type, head.num_classes, head.in_channels) == ('LinearClsHead', 1000, width)
    assert (head.loss.type, head.loss.label_smooth_val, head.loss.mode) == ('LabelSmoothLoss', 0.1, 'original')
    assert (head.init_cfg.type, head.init_cfg.std, head.init_cfg.bias) == ('TruncNormal', 0.02, 0.)
    assert [(a.type, a.alpha) for a in model.train_cfg.augments] == [('Mixup', 0.8), ('CutMix', 1.0)]
    # DeiT's data: repeated augmentation x3, RandAugment rand-m9-mstd0.5-inc1, erasing 0.25, bicubic, at `size`
    train = cfg.train_dataloader
    assert (train.sampler.type, train.sampler.num_repeats, train.sampler.shuffle) == ('RepeatAugSampler', 3, True)
    steps = {t.type: t for t in train.dataset.pipeline}
    crop, randaug, erase = steps['RandomResizedCrop'], steps['RandAugment'], steps['RandomErasing']
    assert (crop.scale, crop.backend, crop.interpolation) == (size, 'pillow', 'bicubic')
    assert (randaug.policies, randaug.num_policies, randaug.total_level, randaug.magnitude_level,
            randaug.magnitude_std) == ('timm_increasing', 2, 10, 9, 0.5)
    assert (erase.erase_prob, erase.mode, erase.min_area_ratio, erase.max_area_ratio) == (0.25, 'rand', 0.02, 1 / 3)
    assert steps['RandomFlip'].prob == 0.5
    # test: short side to `size`, center crop `size` (crop ratio 1.0), bicubic; ImageNet mean / std
    for loader in (cfg.val_dataloader, cfg.test_dataloader):
        load, resize, center, pack = loader.dataset.pipeline
        assert (resize.type, resize.scale, resize.edge, resize.backend, resize.interpolation) == (
            'ResizeEdge', size, 'short', 'pillow', 'bicubic')
        assert (center.type, center.crop_size) == ('CenterCrop', size)
    assert (list(cfg.data_preprocessor.mean), list(cfg.data_preprocessor.std)) == ([123.675, 116.28, 103.53],
                                                                                  [58.395, 57.12, 57.375])
    # fp16 AMP (dynamic loss scale), no clipping, deit's warm-up start 1e-6
    optim = cfg.optim_wrapper
    assert optim.type == 'AmpOptimWrapper' and optim.get('dtype') is None and optim.get('loss_scale') is None
    assert optim.optimizer.eps == 1e-8
    warmup, main = cfg.param_scheduler
    assert warmup.start_factor * optim.optimizer.lr == pytest.approx(1e-6)
    assert cfg.auto_scale_lr.base_batch_size == (1024 if size == 224 else 256)
    if size == 224:  # cosine to deit's --min-lr
        assert (main.eta_min, warmup.convert_to_iter_based, main.convert_to_iter_based) == (1e-5, True, True)
        assert cfg.get('load_from') is None
    else:  # the M48↑448 recipe: decay-epochs 10, decay-rate 0.5 (timm's step schedule, per epoch), from 224 px
        assert (main.step_size, main.gamma, main.by_epoch, main.get('convert_to_iter_based', False)) == (
            10, 0.5, True, False)
        # the sharded variant starts from it through the model's init (FSDPStrategy's load_from is sharded)
        sharded = cfg.get('runner_type') == 'FlexibleRunner'
        start = cfg.model.init_cfg.checkpoint if sharded else cfg.load_from
        undistilled = f'work_dirs/cait-{arch}_8xb128-400e_in1k/epoch_400.pth'
        assert start == (CAIT_DIST_START[arch] if distilled else undistilled)


@pytest.mark.parametrize('name,init', [('cait-xxs36_8xb128-400e_in1k.py', 1e-5), ('cait-s36_8xb32-60e_in1k-384px.py',
                                                                                  1e-6)])
def test_cait_layer_scale_init_is_the_official_code(name, init):
    """LayerScale starts at the official code's value in every SA and CA block (XXS36: 1e-5, the paper says 1e-6)."""
    assert CAIT_IN1K[name][-1] == init
    init_default_scope('mmpretrain')
    backbone = MODELS.build(_cait_config(name).model.backbone)
    scales = {n: p for n, p in backbone.named_parameters() if n.endswith(('ls1.weight', 'ls2.weight'))}
    assert len(scales) == 2 * (backbone.num_layers + 2)
    assert all(torch.equal(p, torch.full_like(p, init)) for p in scales.values())


@pytest.mark.parametrize('name', ['cait-s24_8xb128-400e_in1k.py', 'cait-m48_32xb8-60e_in1k-448px.py',
                                  'upernet_cait-s24_8xb2-160k_ade20k-512x512.py'])
def test_cait_no_decay_set_is_the_official_rule(name):
    """deit's optimiser (timm's create_optimizer with the model's no_weight_decay()): no weight decay on every 1-D
    parameter (norms, biases, LayerScale gammas), on pos_embed and on cls_token; every other parameter decays, the 2-D
    talking-heads mixers proj_l / proj_w included (deit's timm optimizer factory). The UperNet config applies the same
    rule."""
    cfg = _cait_config(name)
    scope = 'mmseg' if name.startswith('upernet') else 'mmpretrain'
    wrapper_cfg = dict(cfg.optim_wrapper.to_dict(), type='OptimWrapper')  # AmpOptimWrapper needs a GPU
    model = build_on_meta(cfg, scope)
    optimizer = build_optim_wrapper(model, wrapper_cfg).optimizer
    names = {id(p): n for n, p in model.named_parameters()}
    decay = {names[id(p)]: g['weight_decay'] for g in optimizer.param_groups for p in g['params']}
    assert set(decay) == set(names.values())

    def official_exempt(param_name, param):
        return param.ndim == 1 or param_name.endswith('.bias') or param_name.endswith(('.pos_embed', '.cls_token'))

    assert {n: w for n, w in decay.items()} == {n: 0.0 if official_exempt(n, p) else 0.05
                                                for n, p in model.named_parameters()}
    assert decay['backbone.pos_embed'] == decay['backbone.layers.0.ls1.weight'] == 0.0
    assert decay['backbone.layers.0.attn.proj_l.weight'] == decay['backbone.layers.0.attn.proj_w.weight'] == 0.05
    if scope == 'mmpretrain':
        assert decay['backbone.class_attn.cls_token'] == decay['backbone.class_attn.layers.1.ls2.weight'] == 0.0


def test_cait_upernet_model():
    """Ours (no paper result): CaiT-S24 patch tokens of SA blocks 5/11/17/23 without the final norm,
    Feature2Pyramid, UPerHead (DeiT-S width 512) + FCN auxiliary head, from the converted S24_224 weights."""
    cfg = _cait_config('upernet_cait-s24_8xb2-160k_ade20k-512x512.py')
    model = cfg.model
    backbone = model.backbone
    assert (backbone.type, backbone.arch, backbone.img_size) == ('CaiT', 's24', 512)
    assert (tuple(backbone.out_indices), backbone.out_type, backbone.feature_norm) == ((5, 11, 17, 23), 'featmap',
                                                                                       'none')
    assert backbone.drop_path_rate == 0.1  # S24's Table 4 rate
    init = backbone.init_cfg
    assert (init.type, init.checkpoint, init.prefix) == ('Pretrained', 'checkpoints/cait-s24_in1k-dense.pth',
                                                         'backbone.')
    assert (model.neck.type, model.neck.embed_dim, list(model.neck.rescales)) == ('Feature2Pyramid', 384,
                                                                                  [4, 2, 1, 0.5])
    head, aux = model.decode_head, model.auxiliary_head
    assert (head.type, list(head.in_channels), head.channels, tuple(head.pool_scales)) == (
        'UPerHead', [384] * 4, 512, (1, 2, 3, 6))
    assert (aux.type, aux.in_channels, aux.in_index, aux.channels, aux.loss_decode.loss_weight) == (
        'FCNHead', 384, 2, 256, 0.4)
    assert head.num_classes == aux.num_classes == 150
    assert (model.test_cfg.mode, tuple(model.test_cfg.crop_size), tuple(model.test_cfg.stride)) == (
        'slide', (512, 512), (341, 341))
    assert cfg.get('fp16') is None and cfg.optim_wrapper.constructor == 'LayerDecayOptimWrapperConstructor'
    built = build_on_meta(cfg, 'mmseg')
    assert not hasattr(built.backbone, 'class_attn')  # dense use: no class stage, no final norm
    assert isinstance(built.backbone.norm, torch.nn.Identity)


def test_cait_full_size_models_run():
    classifier = _build(_cait_config('cait-xxs24_8xb128-400e_in1k.py'), 'mmpretrain')
    with torch.no_grad():
        assert classifier(torch.randn(1, 3, 224, 224), mode='tensor').shape == (1, 1000)
    segmentor = _build(_cait_config('upernet_cait-s24_8xb2-160k_ade20k-512x512.py'), 'mmseg')
    with torch.no_grad():  # the 32x32 table resized to the 8x10 grid; decode-head logits at stride 4
        assert segmentor(torch.randn(1, 3, 128, 160), mode='tensor').shape == (1, 150, 32, 40)


# ------------------------------------------------------------------------ iLLaMA ImageNet-21K and 384 px fine-tuning
# Paper Tables 13 / 14 and the official runs (https://github.com/techmonsterwang/iLLaMA/tree/d27201c/slurm: l6 / l9,
# nft3 / nft11, hft1 / hft7 / hft18).
@pytest.mark.parametrize('arch,params', [('base', 93_769_426), ('large', 320_131_282)])
def test_illama_in21k_pretraining_recipe(arch, params):
    cfg = _config(f'illama-{arch}-p16_32xb128_in21k.py')
    dataset = cfg.train_dataloader.dataset
    assert (dataset.type, dataset.data_root, dataset.split) == ('ImageNet21k', 'data/imagenet21k', 'train')
    assert cfg.model.head.num_classes == cfg.data_preprocessor.num_classes == 10450  # winter-21 ImageNet-21K-P
    backbone = cfg.model.backbone
    assert (backbone.arch, backbone.img_size, backbone.mask_mode, backbone.drop_path_rate) == \
        (arch, 224, 'official', 0.1)
    assert [(a.type, a.alpha) for a in cfg.model.train_cfg.augments] == [('Mixup', 0.8), ('CutMix', 1.0)]
    steps = {step.type: step for step in dataset.pipeline}
    assert steps['RandAugment'].magnitude_level == 9 and steps['RandAugment'].magnitude_std == 0.5
    assert steps['RandomErasing'].erase_prob == 0.25 and cfg.model.head.loss.label_smooth_val == 0.1
    hook = cfg.custom_hooks[0]
    assert (hook.type, hook.schedule, hook.cutoff, hook.start) == ('SoftMaskHook', 'constant', 30, 1.0)
    assert all(cfg.get(key) is None for key in ('val_dataloader', 'val_cfg', 'val_evaluator', 'test_dataloader',
                                                'test_cfg', 'test_evaluator'))  # the training set only (Sec. 4.2)
    assert sum(p.numel() for p in build_on_meta(cfg).parameters()) == params  # the official logs' n_parameters


#: config -> (arch, resolution, drop path, the 224 px model it starts from)
ILLAMA_FINETUNES = {
    'illama-base-p16_in21k-pre_8xb64_in1k.py': ('base', 224, 0.2, 'illama-base-p16_32xb128_in21k'),
    'illama-base-p16_in21k-pre_8xb64_in1k-384px.py': ('base', 384, 0.2, 'illama-base-p16_32xb128_in21k'),
    'illama-large-p16_in21k-pre_8xb64_in1k.py': ('large', 224, 0.3, 'illama-large-p16_32xb128_in21k'),
    'illama-large-p16_in21k-pre_8xb64_in1k-384px.py': ('large', 384, 0.3, 'illama-large-p16_32xb128_in21k'),
    'illama-base-p16_8xb64_in1k-384px.py': ('base', 384, 0.8, 'illama-base-p16_32xb128_in1k'),
}


@pytest.mark.parametrize('name', sorted(ILLAMA_FINETUNES))
def test_illama_finetune_recipe(name):
    arch, size, drop_path, start = ILLAMA_FINETUNES[name]
    cfg = _config(name)
    backbone = cfg.model.backbone
    assert (backbone.arch, backbone.img_size, backbone.drop_path_rate) == (arch, size, drop_path)
    # soft mask "constant, cutoff 0": the released code's causal attention (Eq. 2 at alpha = 0) from the first step
    assert backbone.mask_mode == 'official' and 'soft_mask_rate' not in backbone and cfg.custom_hooks == []
    assert cfg.model.get('train_cfg') is None and cfg.model.head.loss.label_smooth_val == 0.1  # no mixup / cutmix
    train, test = cfg.train_dataloader.dataset.pipeline, cfg.val_dataloader.dataset.pipeline
    steps = {step.type: step for step in train}
    assert steps['RandomResizedCrop'].scale == size and steps['RandAugment'].magnitude_level == 9
    assert steps['RandomErasing'].erase_prob == 0.25
    if size == 384:  # the official evaluation at 384 px resizes without cropping
        assert [(s.type, s.get('scale')) for s in test[1:-1]] == [('Resize', 384)]
    else:
        assert [(s.type, s.get('scale', s.get('crop_size'))) for s in test[1:-1]] == [('ResizeEdge', 256),
                                                                                      ('CenterCrop', 224)]
    if start.endswith('_in21k'):  # the 21K backbone; the 1K head starts fresh
        init = backbone.init_cfg
        assert (init.type, init.checkpoint, init.prefix) == ('Pretrained', f'work_dirs/{start}/epoch_90.pth',
                                                             'backbone.')
        assert cfg.get('load_from') is None
    else:  # the whole 1K classifier (the converted official iLLaMA-B weights), head included
        assert backbone.init_cfg is None and cfg.load_from == 'checkpoints/illama-base-p16_in1k.pth'
