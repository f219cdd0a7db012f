"""tools/analysis_tools/eval_resolutions.py: one checkpoint, several input sizes, 1D / 2D / AS2D RoPE.

The end-to-end tests train a tiny VisionLLaMA classifier briefly on the embedded shapes data (64 px, an 8x8
token grid), then evaluate it at 64/96/128 px under the three position schemes.
"""
import csv
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from e2e_utils import load_config, train
from mmcausal.analysis.resolution_eval import (
    RopeScheme,
    classify_batch,
    format_table,
    rope_backbone,
    rope_schemes,
    rope_settings,
)
from mmcausal.analysis.resolution_pipeline import (
    ResolutionEvalError,
    rescale_dataloader_cfg,
    rescale_pipeline,
    size_label,
)
from report_utils import assert_report_matches
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'tools/analysis_tools/eval_resolutions.py'
ILLAMA_CLS = ROOT / 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
EPOCHS = 12  # ~65 % top-1 (chance 25 %) in ~30 s on 2 CPU cores
# The iLLaMA shapes recipe with its backbone replaced (``_delete_``) by a tiny GAP VisionLLaMA (AS2DRoPE).
VISION_LLAMA_CFG = f"""
_base_ = {str(ILLAMA_CLS)!r}
model = dict(
    backbone=dict(_delete_=True, type='VisionLLaMA', arch=dict(embed_dims=64, num_layers=4, num_heads=4),
                  img_size=64, patch_size=8, rope_anchor=8, with_cls_token=False, out_type='avg_featmap',
                  final_norm=False),
    head=dict(in_channels=64))
custom_hooks = []  # the soft-mask hook is iLLaMA's
train_cfg = dict(max_epochs={EPOCHS}, val_interval={EPOCHS})
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=1, end={EPOCHS}, convert_to_iter_based=True),
]
default_hooks = dict(logger=dict(interval=13), checkpoint=dict(interval={EPOCHS}))
"""


def _script():
    spec = importlib.util.spec_from_file_location('eval_resolutions_tool', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _data_option(shapes_root: Path) -> str:
    return f'val_dataloader.dataset.data_root={shapes_root / "imagenet"}'


@pytest.fixture(scope='module', autouse=True)
def _one_thread(single_thread):
    """Every test of this module runs the tiny model single-threaded."""


@pytest.fixture(scope='module')
def trained(shapes_root, tmp_path_factory):
    """(config path, checkpoint path, trained Runner) of the tiny VisionLLaMA classifier."""
    work = tmp_path_factory.mktemp('eval_resolutions')
    config = work / 'vision-llama-nano-p8_shapes-64px.py'
    config.write_text(VISION_LLAMA_CFG)
    runner = train(load_config(str(config), shapes_root, work / 'train'))
    return config, work / 'train' / f'epoch_{EPOCHS}.pth', runner


# ---------------------------------------------------------------------------------------------------- e2e
@pytest.mark.e2e
def test_table_over_sizes_and_rope_modes(trained, shapes_root, tmp_path):
    config, checkpoint, _ = trained
    out = tmp_path / 'results.json'
    result = run_python(
        [sys.executable, str(SCRIPT), str(config), str(checkpoint), '--sizes', '64', '96', '128',
         '--rope-modes', '1d', '2d', 'as2d', '--max-batches', '1', '--out', str(out), '--out-dir', str(tmp_path),
         '--work-dir', str(tmp_path / 'work'), '--cfg-options', _data_option(shapes_root)],
        cwd=ROOT, timeout=300, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout[result.stdout.index('| RoPE'):].splitlines()
    assert [cell.strip() for cell in table[0].split('|')[2:5]] == ['64*', '96', '128']
    assert [line.split('|')[1].strip() for line in table[2:5]] == ['1d', '2d', 'as2d']

    results = json.loads(out.read_text())
    top1 = results['top1']
    assert set(top1) == {'1d', '2d', 'as2d'}
    assert all(set(values) == {'64', '96', '128'} for values in top1.values())
    assert all(0. <= value <= 100. for values in top1.values() for value in values.values())
    assert results['num_samples'] == {'64': 64, '96': 64, '128': 64}  # one batch of 64 per size
    assert results['train_size'] == 64 and results['anchor'] == [8, 8]
    # At the training size the token grid is the anchor grid: AS2DRoPE is exactly 2D RoPE.
    assert top1['2d']['64'] == top1['as2d']['64']
    for mode, values in top1.items():  # the table prints what the JSON holds
        row = next(line for line in table if line.split('|')[1].strip() == mode)
        assert [cell.strip() for cell in row.split('|')[2:5]] == [f'{values[s]:.2f}' for s in ('64', '96', '128')]
    # --out-dir: the same numbers drawn and tabled
    assert (tmp_path / 'top1_vs_resolution.png').stat().st_size > 1000
    with open(tmp_path / 'top1_vs_resolution.csv') as file:
        rows = list(csv.DictReader(file))
    assert {(row['rope'], row['size']): float(row['top1']) for row in rows} == pytest.approx(
        {(mode, size): value for mode, values in top1.items() for size, value in values.items()}, abs=1e-4)


@pytest.mark.e2e
def test_non_square_sizes_and_as2d_scalings(trained, shapes_root, tmp_path):
    config, checkpoint, _ = trained
    out = tmp_path / 'results.json'
    result = run_python(
        [sys.executable, str(SCRIPT), str(config), str(checkpoint), '--sizes', '64', '48x96',
         '--rope-modes', '2d', 'as2d', '--as2d-scalings', 'isotropic', 'per_axis', '--max-batches', '1',
         '--out', str(out), '--work-dir', str(tmp_path / 'work'), '--cfg-options', _data_option(shapes_root)],
        cwd=ROOT, timeout=300, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results['sizes'] == [64, '48x96'] and results['num_samples'] == {'64': 64, '48x96': 64}
    top1 = results['top1']
    assert set(top1) == {'2d', 'as2d-isotropic', 'as2d-per_axis'}
    assert top1['2d']['64'] == top1['as2d-isotropic']['64'] == top1['as2d-per_axis']['64']  # at the anchor


@pytest.mark.e2e
def test_as2d_equals_2d_only_at_the_anchor(trained):
    config, _, runner = trained
    model = runner.model
    loader_cfg = Config.fromfile(str(config)).val_dataloader.to_dict()
    loader_cfg['dataset']['data_root'] = runner.cfg.val_dataloader.dataset.data_root
    loader_cfg.update(num_workers=0, persistent_workers=False, batch_size=8)
    logits = {}
    for size in (64, 128):
        batch = next(iter(Runner.build_dataloader(rescale_dataloader_cfg(loader_cfg, size))))
        for mode in ('1d', '2d', 'as2d'):
            logits[size, mode] = classify_batch(model, batch, mode, size=size)
    assert logits[64, '2d'].shape == (8, 4)
    assert torch.equal(logits[64, '2d'], logits[64, 'as2d'])
    assert not torch.allclose(logits[64, '1d'], logits[64, '2d'], atol=1e-4)
    assert not torch.allclose(logits[128, '2d'], logits[128, 'as2d'], atol=1e-4)
    # A larger anchor (16x16 tokens) at 128 px (16x16 tokens) makes AS2DRoPE integer positions again.
    anchored = classify_batch(model, batch, 'as2d', anchor=16, size=128)
    assert torch.allclose(anchored, logits[128, '2d'], atol=1e-6)
    # A non-square 48 x 96 batch (6 x 12 tokens): isotropic and per-axis AS2DRoPE differ.
    batch = next(iter(Runner.build_dataloader(rescale_dataloader_cfg(loader_cfg, (48, 96)))))
    iso, per_axis = (classify_batch(model, batch, 'as2d', size=(48, 96), as2d_scaling=scaling)
                     for scaling in ('isotropic', 'per_axis'))
    assert not torch.allclose(iso, per_axis, atol=1e-4)
    assert rope_backbone(model).rope_mode == 'as2d' and rope_backbone(model).rope_anchor == (8, 8)  # restored


# ---------------------------------------------------------------------------------------------------- unit
def test_rescale_keeps_the_resize_to_crop_ratio():
    pipeline = [dict(type='LoadImageFromFile'),
                dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
                dict(type='CenterCrop', crop_size=224), dict(type='PackInputs')]
    scaled = rescale_pipeline(pipeline, 448)
    assert scaled[1] == dict(type='ResizeEdge', scale=512, edge='short', backend='pillow', interpolation='bicubic')
    assert scaled[2] == dict(type='CenterCrop', crop_size=448)
    assert pipeline[1]['scale'] == 256  # the input is not modified


@pytest.mark.parametrize('pipeline,expected', [
    ([dict(type='LoadImageFromFile'), dict(type='PackInputs')],
     [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(96, 96), backend='pillow', interpolation='bicubic'),
      dict(type='PackInputs')]),
    ([dict(type='LoadImageFromFile'), dict(type='Resize', scale=384, interpolation='bicubic'), dict(type='PackInputs')],
     [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(96, 96), interpolation='bicubic'),
      dict(type='PackInputs')]),
    ([dict(type='LoadImageFromFile'), dict(type='ResizeEdge', scale=256), dict(type='PackInputs')],
     [dict(type='LoadImageFromFile'), dict(type='ResizeEdge', scale=96, edge='short'),
      dict(type='CenterCrop', crop_size=96), dict(type='PackInputs')]),
])
def test_rescale_makes_square_images(pipeline, expected):
    assert rescale_pipeline(pipeline, 96) == expected


@pytest.mark.parametrize('pipeline,expected', [
    # no resize: short side to max(H, W) = 96, centre crop (w, h) = (96, 48): never a stretch
    ([dict(type='LoadImageFromFile'), dict(type='PackInputs')],
     [dict(type='LoadImageFromFile'),
      dict(type='ResizeEdge', scale=96, edge='short', backend='pillow', interpolation='bicubic'),
      dict(type='CenterCrop', crop_size=(96, 48)), dict(type='PackInputs')]),
    # a stretching Resize becomes a short-edge resize + crop
    ([dict(type='LoadImageFromFile'), dict(type='Resize', scale=(64, 64), interpolation='bicubic'),
      dict(type='PackInputs')],
     [dict(type='LoadImageFromFile'), dict(type='ResizeEdge', scale=96, edge='short', interpolation='bicubic'),
      dict(type='CenterCrop', crop_size=(96, 48)), dict(type='PackInputs')]),
    # resize + crop: the 256/224 ratio applies to the longer side
    ([dict(type='ResizeEdge', scale=256, edge='short'), dict(type='CenterCrop', crop_size=224)],
     [dict(type='ResizeEdge', scale=110, edge='short'), dict(type='CenterCrop', crop_size=(96, 48))]),
])
def test_rescale_to_a_non_square_size_keeps_the_aspect(pipeline, expected):
    assert rescale_pipeline(pipeline, (48, 96)) == expected


def test_rope_schemes_and_sizes():
    assert rope_schemes(['2d', 'as2d'], ['isotropic', 'per_axis']) == [
        RopeScheme('2d', '2d'), RopeScheme('as2d-isotropic', 'as2d', 'isotropic'),
        RopeScheme('as2d-per_axis', 'as2d', 'per_axis')]
    assert rope_schemes(['as2d']) == [RopeScheme('as2d', 'as2d', None)]
    with pytest.raises(ValueError, match='Unknown as2d_scaling'):
        rope_schemes(['as2d'], ['diagonal'])
    assert [size_label(s) for s in (64, (64, 64), (48, 128))] == ['64', '64', '48x128']
    assert _script().parse_args([str(ILLAMA_CLS), str(ILLAMA_CLS), '--sizes', '64', '48x128']).sizes == [
        (64, 64), (48, 128)]


def test_format_table_with_non_square_sizes_and_long_labels():
    results = {'2d': {(64, 64): 80., (48, 128): 51.}, 'as2d-per_axis': {(64, 64): 80., (48, 128): 60.}}
    table = format_table(results, [(64, 64), (48, 128)], (64, 64)).splitlines()
    assert [c.strip() for c in table[0].split('|')[2:4]] == ['64*', '48x128']
    assert table[3].split('|')[1].strip() == 'as2d-per_axis' and table[3].split('|')[3].strip() == '60.00'


def test_rescale_reaches_wrapped_datasets():
    inner = dict(type='ImageNet', pipeline=[dict(type='CenterCrop', crop_size=32)])
    loader = dict(batch_size=2, dataset=dict(type='ConcatDataset', datasets=[inner, dict(inner)]))
    scaled = rescale_dataloader_cfg(loader, 48)
    assert [d['pipeline'][0]['crop_size'] for d in scaled['dataset']['datasets']] == [48, 48]
    assert inner['pipeline'][0]['crop_size'] == 32


def test_format_table_marks_the_training_size():
    table = format_table({'2d': {64: 80., 128: 51.}, 'as2d': {64: 80., 128: 77.5}}, [64, 128], 64).splitlines()
    assert '64*' in table[0] and len(table) == 4 and table[3].split('|')[3].strip() == '77.50'


# ---------------------------------------------------------------------------------------------------- errors
def test_unknown_rope_mode_is_rejected(capsys):
    with pytest.raises(SystemExit):
        _script().parse_args([str(ILLAMA_CLS), 'x.pth', '--rope-modes', '2d', '3d'])
    assert "invalid choice: '3d'" in capsys.readouterr().err
    backbone = torch.nn.Module()
    backbone.rope_mode, backbone.rope_anchor = 'as2d', (8, 8)
    with pytest.raises(ValueError, match="Unknown rope_mode '3d'"):
        with rope_settings(backbone, '3d'):
            pass
    assert backbone.rope_mode == 'as2d'


@pytest.mark.parametrize('args,message', [
    (['configs/illama/nope.py', 'x.pth'], 'config file not found'),
    ([str(ILLAMA_CLS), 'missing.pth'], 'checkpoint not found: missing.pth'),
])
def test_missing_files_are_reported(args, message, capsys):
    with pytest.raises(SystemExit):
        _script().parse_args(args)
    assert message in capsys.readouterr().err


def test_missing_dataset_is_reported(tmp_path):
    checkpoint = tmp_path / 'x.pth'
    torch.save({}, checkpoint)
    with pytest.raises(SystemExit) as exit_info:
        _script().main([str(ILLAMA_CLS), str(checkpoint), '--work-dir', str(tmp_path),
                        '--cfg-options', f'val_dataloader.dataset.data_root={tmp_path / "absent"}'])
    assert_report_matches(exit_info.value, 'DatasetNotFoundError: .*absent.*does not exist')


def test_backbone_without_rope_mode_is_rejected(shapes_root, tmp_path):
    checkpoint = tmp_path / 'x.pth'
    torch.save({}, checkpoint)
    with pytest.raises(SystemExit, match='needs a VisionLLaMA-style backbone.*ILLaMA'):
        _script().main([str(ILLAMA_CLS), str(checkpoint), '--work-dir', str(tmp_path),
                        '--cfg-options', _data_option(shapes_root)])
    with pytest.raises(ResolutionEvalError, match='VisionLLaMA-style'):
        rope_backbone(torch.nn.Linear(2, 2))
