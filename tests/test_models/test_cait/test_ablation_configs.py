"""CaiT's ablation and transfer configs (paper Tables 1, 2, 7 and 8): each ablation config differs from the one it
follows in exactly the components its table row names, with the paper's values; the Table 8 rungs that become CaiT-S36
build the official model; the transfer configs carry Sec. 4.4.3's recipe on mmpretrain's datasets. Configs are only
parsed here (their models are built by tests/test_model_zoo.py and tests/test_configs.py)."""
import math
from functools import lru_cache
from pathlib import Path

import pytest
from mmengine.config import Config

from build_utils import build_on_meta

CAIT = Path(__file__).resolve().parents[3] / 'configs' / 'cait'
DEIT = 'deit-small_8xb128-300e_in1k.py'
_300 = '_8xb128-300e_in1k.py'
B = 'model.backbone.'
MISSING = object()
#: the RegNetY-16GF teacher config, as the distillation block names it (path resolved from its folder)
TEACHER = CAIT.parent / '_base_' / 'distillation' / '..' / 'teachers' / 'regnety-16gf_deit-in1k.py'
#: the variables a ``_base_`` block file defines for configs to take (not settings of the config)
BLOCK_VARIABLES = ('regnety_16gf_',)


@lru_cache(maxsize=None)
def _flat(name: str) -> dict:
    """The resolved config as ``{dotted key: value}`` (list items by index)."""
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f'{prefix}{key}.', item)
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
            for index, item in enumerate(value):
                walk(f'{prefix}{index}.', item)
        else:
            flat[prefix[:-1]] = value

    walk('', Config.fromfile(str(CAIT / name)).to_dict())
    return flat


def _changes(name: str, previous: str) -> dict:
    """``{key: value in name}`` of every key whose value differs from ``previous`` (MISSING where name lacks it)."""
    new, old = _flat(name), _flat(previous)
    return {key: new.get(key, MISSING) for key in new.keys() | old.keys()
            if new.get(key, MISSING) != old.get(key, MISSING) and not key.startswith(BLOCK_VARIABLES)}


def _test_resize(scale: int, crop: int = None) -> dict:
    """The changed test-time short side (and centre crop) of the test pipeline and the loaders that use it."""
    keys = {1: ('scale', scale), 2: ('crop_size', crop)}
    return {f'{prefix}.{index}.{key}': value
            for prefix in ('test_pipeline', 'val_dataloader.dataset.pipeline', 'test_dataloader.dataset.pipeline')
            for index, (key, value) in keys.items() if value is not None}


# Table 8, DeiT-S -> CaiT-S36: (config, previous rung, what the row changes)
T8 = 'deit-small_to-cait-{}' + _300
TABLE8 = [
    (T8.format('8-heads'), DEIT, {B + 'arch.num_heads': 8}),
    (T8.format('talking-heads'), T8.format('8-heads'), {B + 'attn_type': 'talking_heads'}),
    (T8.format('depth36'), T8.format('talking-heads'), {B + 'arch.num_layers': 36}),
    (T8.format('layerscale'), T8.format('depth36'),
     {B + 'residual_scale': 'layerscale', B + 'layer_scale_init_value': 1e-6}),
    (T8.format('dr0.2'), T8.format('layerscale'), {B + 'drop_path_rate': 0.2, B + 'drop_path_schedule': 'uniform'}),
    (T8.format('class-attention'), T8.format('dr0.2'), {B + 'cls_insert_layer': None}),
    ('deit-small_to-cait-400e_8xb128-400e_in1k.py', T8.format('class-attention'), {'train_cfg.max_epochs': 400}),
    ('deit-small_to-cait-test-256px_8xb128-400e_in1k.py', 'deit-small_to-cait-400e_8xb128-400e_in1k.py',
     _test_resize(292, 256)),  # a test config of the previous rung's model
    # the ↑384 rung is the S36↑384 fine-tuning stage tested at crop ratio 0.875, from the 400-epoch rung
    ('deit-small_to-cait-384px_8xb32-60e_in1k-384px.py', 'cait-s36_8xb32-60e_in1k-384px.py',
     {**_test_resize(438), 'load_from': 'work_dirs/deit-small_to-cait-400e_8xb128-400e_in1k/epoch_400.pth'}),
    ('deit-small_to-cait-dist-regnety-16gf_8xb32-60e_in1k-384px.py', 'deit-small_to-cait-384px_8xb32-60e_in1k-384px.py',
     {'model.type': 'DistillationClassifier', 'model.teacher.config': str(TEACHER),
      'model.teacher.checkpoint': 'https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth',
      'model.distillation.mode': 'hard', 'model.alpha': 0.5}),
    ('deit-small_to-cait-dist-crop1.0_8xb32-60e_in1k-384px.py',
     'deit-small_to-cait-dist-regnety-16gf_8xb32-60e_in1k-384px.py', _test_resize(384)),  # a test config
]

# Table 1: depth -> (adjusted uniform d_r of the "adjust [d_r]" column, LayerScale eps of the Sec. 2 rule)
TABLE1_ROWS = {12: (0.05, 0.1), 18: (0.1, 0.1), 24: (0.2, 1e-5), 36: (0.25, 1e-6)}


def _table1():
    rungs = []
    for depth, (rate, eps) in TABLE1_ROWS.items():
        base = f'deit-small-depth{depth}_dr0.05{_300}'
        changes = {B + 'drop_path_rate': 0.05, B + 'drop_path_schedule': 'uniform'}
        if depth != 12:
            changes[B + 'arch.num_layers'] = depth
        rungs.append((base, DEIT, changes))
        row = base
        if depth != 12:
            row = f'deit-small-depth{depth}_dr{rate:g}{_300}'
            rungs.append((row, base, {B + 'drop_path_rate': rate}))
        scalar, layerscale = {B + 'residual_scale': 'scalar'}, {B + 'residual_scale': 'layerscale'}
        for method, changes in (('rezero', {**scalar, B + 'layer_scale_init_value': 0.}),
                                ('t-fixup', {**scalar, B + 'layer_scale_init_value': 1., B + 'branch_init': 't-fixup'}),
                                ('fixup', {**scalar, B + 'layer_scale_init_value': 1., B + 'branch_init': 'fixup'}),
                                ('scalar-eps', {**scalar, B + 'layer_scale_init_value': eps}),
                                ('layerscale', {**layerscale, B + 'layer_scale_init_value': eps})):
            rungs.append((f'deit-small-depth{depth}_{method}{_300}', row, changes))
    return rungs


def _table2():
    rungs = [(f'deit-small_avg-pool{_300}', DEIT, {B + 'cls_insert_layer': None, B + 'out_type': 'avg_featmap'})]
    rungs += [(f'deit-small_cls-insert{k}{_300}', DEIT, {B + 'cls_insert_layer': k}) for k in (2, 4, 8, 10, 11)]
    for sa, ca in ((9, 3), (10, 2), (11, 1), (12, 1), (12, 2), (12, 3)):
        changes = {B + 'cls_insert_layer': None, B + 'arch.num_cls_layers': ca}
        if sa != 12:
            changes[B + 'arch.num_layers'] = sa
        rungs.append((f'deit-small_sa{sa}-ca{ca}{_300}', DEIT, changes))
    return rungs


RUNGS = TABLE8 + _table1() + _table2()


def test_every_ablation_config_is_a_rung():
    assert sorted(name for name, _, _ in RUNGS) == sorted(p.name for p in CAIT.glob('deit-small*.py') if p.name != DEIT)


def test_each_rung_changes_exactly_its_row():
    """One test for all rungs (each config is parsed once): the keys that differ from the previous rung, and their
    values, are the row's."""
    wrong = {name: (_changes(name, previous), expected) for name, previous, expected in RUNGS
             if _changes(name, previous) != expected}
    assert wrong == {}


def test_deit_small_is_deit():
    """The first rung: DeiT-S (width 384, 12 blocks, 6 heads, plain attention, no LayerScale, class token at layer 0,
    linear drop path 0.1), 300 epochs, tested at crop ratio 0.875 (short side 256); only those keys differ from the
    CaiT-S24 base."""
    assert _changes(DEIT, 'cait-s24_8xb128-400e_in1k.py') == {
        B + 'arch': MISSING, B + 'arch.embed_dims': 384, B + 'arch.num_layers': 12, B + 'arch.num_heads': 6,
        B + 'attn_type': 'multi_head', B + 'residual_scale': 'none', B + 'cls_insert_layer': 0,
        B + 'drop_path_schedule': 'linear', 'train_cfg.max_epochs': 300, **_test_resize(256)}
    assert _flat(DEIT)[B + 'drop_path_rate'] == 0.1


def test_rungs_that_become_cait_s36_build_the_official_model():
    """From the class-attention rung on, the model is CaiT-S36: the parameters of cait-s36_8xb128-400e_in1k.py (the
    official registration's 68,220,712 with the head), and at 384 px those of the S36↑384 config."""
    shapes = {}
    for name in (T8.format('class-attention'), 'cait-s36_8xb128-400e_in1k.py',
                 'deit-small_to-cait-384px_8xb32-60e_in1k-384px.py', 'cait-s36_8xb32-60e_in1k-384px.py'):
        model = build_on_meta(Config.fromfile(str(CAIT / name)))
        shapes[name] = {k: tuple(v.shape) for k, v in model.named_parameters()}
    rung, s36, rung384, s36_384 = shapes.values()
    assert rung == s36 and rung384 == s36_384
    assert sum(math.prod(shape) for shape in rung.values()) == 68_220_712


# Table 7 and Sec. 4.4.3: dataset -> (mmpretrain dataset type, classes, lr factor, epochs, training / test split)
TRANSFER = {
    'cifar10': ('CIFAR10', 10, 1 / 100, 1000, ('train', 'test')),
    'cifar100': ('CIFAR100', 100, 1 / 100, 1000, ('train', 'test')),
    'flowers102': ('Flowers102', 102, 1 / 10, 1000, ('trainval', 'test')),  # 2,040 training images (Table 6)
    'stanford-cars': ('StanfordCars', 196, 1 / 10, 1000, ('train', 'test')),
    'inat2018': ('CustomDataset', 8142, 1 / 10, 360, ('meta/train.txt', 'meta/val.txt')),
    'inat2019': ('CustomDataset', 1010, 1 / 10, 360, ('meta/train.txt', 'meta/val.txt')),
}


def _steps(cfg: dict, loader: str) -> dict:
    """``{transform type: its key prefix}`` of a loader's pipeline."""
    prefix = f'{loader}.dataset.pipeline.'
    return {value: key[:-len('.type')] for key, value in cfg.items()
            if key.startswith(prefix) and key.endswith('.type')}


@pytest.mark.parametrize('arch,width,drop_path', [('s36', 384, 0.2), ('m36', 768, 0.3)])
def test_transfer_recipe(arch, width, drop_path):
    """The ImageNet recipe of the model (Table 4 drop path) from its 224 px ImageNet checkpoint, lr / 100 (CIFAR) or
    / 10 with the whole schedule scaled alike, 1000 or 360 epochs, 224 px tested at crop ratio 0.875, the dataset's
    classes on mmpretrain's dataset classes; optimizer groups: tests/test_configs.py."""
    assert sorted(p.name for p in CAIT.glob(f'cait-{arch}-in1k-pre_*.py')) == sorted(
        f'cait-{arch}-in1k-pre_8xb128-{epochs}e_{data}.py' for data, (*_, epochs, _) in TRANSFER.items())
    for data, (dataset_type, classes, factor, epochs, splits) in TRANSFER.items():
        name = f'cait-{arch}-in1k-pre_8xb128-{epochs}e_{data}.py'
        cfg = _flat(name)
        assert (cfg[B + 'arch'], cfg[B + 'drop_path_rate'], cfg[B + 'img_size']) == (arch, drop_path, 224), name
        assert (cfg[B + 'init_cfg.type'], cfg[B + 'init_cfg.checkpoint'], cfg[B + 'init_cfg.prefix']) == (
            'Pretrained', f'work_dirs/cait-{arch}_8xb128-400e_in1k/epoch_400.pth', 'backbone.'), name
        assert (cfg['model.head.in_channels'], cfg['model.head.num_classes']) == (width, classes), name
        assert cfg['data_preprocessor.num_classes'] == classes, name
        assert cfg['optim_wrapper.optimizer.lr'] == pytest.approx(1e-3 * factor), name
        assert cfg['param_scheduler.0.start_factor'] == pytest.approx(1e-3), name  # warm-up from 1e-6 x factor
        assert cfg['param_scheduler.1.eta_min'] == pytest.approx(1e-5 * factor), name
        assert cfg['train_cfg.max_epochs'] == epochs and cfg.get('load_from') is None, name
        for loader, split in zip(('train_dataloader', 'val_dataloader'), splits):
            assert cfg[f'{loader}.dataset.type'] == dataset_type, name
            key = 'ann_file' if dataset_type == 'CustomDataset' else 'split'
            assert cfg[f'{loader}.dataset.{key}'] == split, name
        test = _steps(cfg, 'test_dataloader')
        assert (cfg[test['ResizeEdge'] + '.scale'], cfg[test['CenterCrop'] + '.crop_size']) == (256, 224), name
        train = _steps(cfg, 'train_dataloader')
        assert cfg[train['RandomResizedCrop'] + '.scale'] == 224 and 'RandAugment' in train, name
        # CIFAR's arrays are RGB (no file loading, no channel swap); the others load BGR files
        in_memory = dataset_type.startswith('CIFAR')
        assert ('LoadImageFromFile' in train) != in_memory and cfg['data_preprocessor.to_rgb'] != in_memory, name
