"""The supervised plain VisionLLaMA configs (paper Table 2) follow the official DeiT-III scripts, and each Table 7
ablation config changes its default only by the row's switch. (Optimizer, schedule and batch: test_configs.py.)"""
from pathlib import Path

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope

from build_utils import build_on_meta
from mmcausal.models.layers import RMSNorm
from mmcausal.models.vision_llama.rope_variants import HeadwiseRoPEAttention, PartialGridRoPE

FOLDER = Path(__file__).resolve().parents[1] / 'configs' / 'vision_llama'
#: arch -> stage-1 config, its size, drop path, LAMB lr, fine-tune config (None: one stage)
MODELS = {
    'small': ('vision-llama-small-p16_deit3_8xb256-800e_in1k.py', 224, 0.05, 4e-3, None),
    'base': ('vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py', 192, 0.2, 3e-3,
             'vision-llama-base-p16_deit3-ft_8xb64-20e_in1k.py'),
    'large': ('vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py', 128, 0.45, 3e-3,
              'vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py'),
}
#: Table 7 row -> the backbone arguments it changes (on VisionLLaMA-L)
ROWS = {
    'gelu': dict(ffn_type='gelu'),
    'rmsnorm': dict(norm_cfg=dict(type='RMSNorm', eps=1e-6)),
    'rope25': dict(rope_ratio=0.25),
    'rope50': dict(rope_ratio=0.5),
    'theta100': dict(rope_theta=100.),
    'theta1000': dict(rope_theta=1000.),
    'theta100000': dict(rope_theta=100000.),
    'rope-per-head': dict(rope_shared=False),
    'gap': dict(with_cls_token=False, out_type='avg_featmap', final_norm=False),
}


def _config(name: str) -> Config:
    return Config.fromfile(str(FOLDER / name))


def _types(pipeline) -> list:
    return [step['type'] for step in pipeline]


@pytest.mark.parametrize('arch', sorted(MODELS))
def test_stage_one_is_the_official_deit3_recipe(arch):
    name, size, drop_path, lr, _ = MODELS[arch]
    cfg = _config(name)
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.layout, backbone.rope_mode) == \
        ('VisionLLaMA', arch, 'official_deit', '2d')
    assert backbone.img_size == size and backbone.drop_path_rate == drop_path
    assert cfg.model.head.loss == dict(type='CrossEntropyLoss', use_sigmoid=True)  # BCE, no label smoothing
    assert cfg.model.train_cfg.augments == [dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]
    train = cfg.train_dataloader.dataset.pipeline
    assert _types(train) == ['LoadImageFromFile', 'RandomResizedCrop', 'RandomFlip', 'RandomChoice', 'ColorJitter',
                             'PackInputs']  # 3-Augment: no RandAugment, no random erasing
    assert train[1]['scale'] == size and train[4]['brightness'] == train[4]['saturation'] == 0.3
    assert [t[0]['type'] for t in train[3]['transforms']] == ['RandomGrayscale', 'Solarize', 'GaussianBlur']
    test = cfg.val_dataloader.dataset.pipeline
    assert test[1]['scale'] == test[2]['crop_size'] == size  # crop ratio 1.0 at the training size
    assert cfg.train_dataloader.sampler == dict(type='RepeatAugSampler', num_repeats=3, shuffle=True)
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.lr, optimizer.eps, optimizer.max_grad_norm) == (lr, 1e-8, 1.0)
    assert cfg.optim_wrapper.paramwise_cfg.custom_keys == {'.cls_token': dict(decay_mult=0.0)}
    warmup, cosine = cfg.param_scheduler
    assert warmup.start_factor * lr == pytest.approx(1e-6) and cosine.eta_min == 1e-5
    model = build_on_meta(cfg)
    assert [layer.drop_path_rate for layer in model.backbone.layers] == [drop_path] * len(model.backbone.layers)


def test_three_augment_runs_on_an_image():
    init_default_scope('mmpretrain')
    pipeline = Compose(_config(MODELS['base'][0]).train_dataloader.dataset.pipeline[1:-1])
    image = np.random.default_rng(0).integers(0, 256, (240, 320, 3), dtype=np.uint8)
    for _ in range(6):
        assert pipeline(dict(img=image.copy()))['img'].shape == (192, 192, 3)


@pytest.mark.parametrize('arch', ['base', 'large'])
def test_fine_tune_is_the_official_224px_stage_two(arch):
    stage_one, _, drop_path, _, name = MODELS[arch]
    cfg = _config(name)
    assert cfg.load_from == f'work_dirs/{Path(stage_one).stem}/epoch_800.pth'
    assert cfg.model.backbone.img_size == 224 and cfg.model.backbone.drop_path_rate == drop_path
    assert cfg.model.head.loss == dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')
    train = cfg.train_dataloader.dataset.pipeline
    erasing = ['RandomErasing'] if arch == 'large' else []  # the Large command keeps main_b.py's --reprob 0.25
    assert _types(train) == ['LoadImageFromFile', 'RandomResizedCrop', 'RandomFlip', 'RandAugment', *erasing,
                             'PackInputs']
    assert (train[3]['magnitude_level'], train[3]['magnitude_std'], train[3]['policies']) == \
        (9, 0.5, 'timm_increasing')
    assert cfg.train_dataloader.sampler.type == 'DefaultSampler'  # no repeated augmentation
    assert cfg.val_dataloader.dataset.pipeline[2]['crop_size'] == 224
    assert sum(p.numel() for p in build_on_meta(cfg).parameters()) == \
        sum(p.numel() for p in build_on_meta(_config(stage_one)).parameters())


def _outside_the_model(cfg: Config) -> dict:
    return {key: value for key, value in cfg.to_dict().items() if key not in ('load_from', 'model')}


@pytest.mark.parametrize('row', sorted(ROWS))
def test_table7_row_changes_only_its_switch(row):
    default_pre, default_ft = MODELS['large'][0], MODELS['large'][4]
    pre = _config(f'vision-llama-large-p16_deit3-{row}_8xb256-800e_in1k-128px.py')
    ft = _config(f'vision-llama-large-p16_deit3-{row}-ft_8xb64-20e_in1k.py')
    for cfg, default in ((pre, _config(default_pre)), (ft, _config(default_ft))):
        assert _outside_the_model(cfg) == _outside_the_model(default)
        changed = {key: value for key, value in cfg.model.backbone.items() if default.model.backbone.get(key) != value}
        assert changed == ROWS[row]
        assert {k: v for k, v in cfg.model.items() if k != 'backbone'} == \
            {k: v for k, v in default.model.items() if k != 'backbone'}
    assert ft.load_from == f'work_dirs/{Path(pre.filename).stem}/epoch_800.pth'


@pytest.mark.parametrize('arch,stages', [('small', 1), ('base', 2)])
def test_gap_rows_of_small_and_base(arch, stages):
    suffix = {'small': '', 'base': '-192px'}[arch]
    names = [f'vision-llama-{arch}-p16_deit3-gap_8xb256-800e_in1k{suffix}.py',
             f'vision-llama-{arch}-p16_deit3-gap-ft_8xb64-20e_in1k.py'][:stages]
    for name, default in zip(names, (MODELS[arch][0], MODELS[arch][4])):
        cfg, default = _config(name), _config(default)
        changed = {key: value for key, value in cfg.model.backbone.items() if default.model.backbone.get(key) != value}
        assert changed == ROWS['gap'] and _outside_the_model(cfg) == _outside_the_model(default)
    assert (FOLDER / f'vision-llama-{arch}-p16_deit3-gap-ft_8xb64-20e_in1k.py').is_file() == (stages == 2)


def test_table7_switches_reach_the_built_model():
    built = {row: build_on_meta(_config(f'vision-llama-large-p16_deit3-{row}_8xb256-800e_in1k-128px.py')).backbone
             for row in ('gelu', 'rmsnorm', 'rope25', 'rope-per-head')}
    assert hasattr(built['gelu'].layers[0].ffn, 'layers')  # mmcv's GELU FFN, no w12
    assert isinstance(built['rmsnorm'].layers[0].norm1, RMSNorm) and isinstance(built['rmsnorm'].norm, RMSNorm)
    assert isinstance(built['rope25'].rope, PartialGridRoPE) and built['rope25'].rope.rotated == 16
    assert isinstance(built['rope-per-head'].layers[0].attn, HeadwiseRoPEAttention)
    assert built['rope-per-head'].rope.freqs_2d.shape == (1024 // 4, )  # one ladder over all channels
