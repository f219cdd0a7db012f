"""Tiny end-to-end runs of the three task configs on the embedded data: the loss falls and the metric is
computed and beats chance."""
import numpy as np
import pytest

from e2e_utils import history, last_metrics, load_config, train

pytestmark = pytest.mark.e2e


def _falls(losses, fraction=0.8):
    k = max(len(losses) // 5, 1)
    return np.mean(losses[-k:]) < fraction * np.mean(losses[:k])


def test_classification_shapes_learns(shapes_root, tmp_path):
    cfg = load_config('illama/illama-nano-p8_1xb32-30e_shapes-64px.py', shapes_root, tmp_path)
    runner = train(cfg)
    assert _falls(history(runner, 'train/loss'))
    top1 = last_metrics(runner)['accuracy/top1']
    assert top1 > 50.0, f'top-1 {top1:.1f} (chance 25)'
    alphas = history(runner, 'train/soft_mask_rate')
    assert alphas[0] == 1.0 and alphas[-1] == 0.0


def test_segmentation_shapes_learns(shapes_root, tmp_path):
    cfg = load_config('illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py', shapes_root, tmp_path)
    runner = train(cfg)
    assert _falls(history(runner, 'train/loss'))
    miou = last_metrics(runner)['mIoU']
    assert miou > 30.0, f'mIoU {miou:.1f}'


def test_detection_shapes_learns(shapes_root, tmp_path):
    cfg = load_config('illama/mask-rcnn_illama-nano-p16_sfp_1xb4-12e_shapes-128px.py', shapes_root, tmp_path)
    runner = train(cfg)
    assert _falls(history(runner, 'train/loss'))
    metrics = last_metrics(runner)
    assert metrics['coco/bbox_mAP'] > 0.05 and metrics['coco/segm_mAP'] > 0.05, metrics
