"""A detector that predicts nothing on a whole split says so in one line, and tools/test.py fails for it."""
import sys
from pathlib import Path

import pytest
import torch
from mmdet.structures import DetDataSample
from mmengine.config import Config
from mmengine.structures import InstanceData

from mmcausal.engine.hooks import EmptyDetectionsHook, find_score_threshold
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
DET = 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py'


def _samples(*counts: int) -> list:
    samples = []
    for count in counts:
        sample = DetDataSample()
        sample.pred_instances = InstanceData(bboxes=torch.zeros(count, 4), scores=torch.ones(count))
        samples.append(sample)
    return samples


class FakeRunner:
    cfg = Config(dict(model=dict(test_cfg=dict(rpn=dict(nms_pre=10), rcnn=dict(score_thr=0.05)))))


def test_hook_reports_only_a_split_without_any_prediction(caplog):
    hook, runner = EmptyDetectionsHook(), FakeRunner()
    hook.after_val_iter(runner, 0, outputs=_samples(0, 0))
    hook.after_val_iter(runner, 1, outputs=_samples(0))
    hook.after_val_epoch(runner, metrics={})
    assert hook.empty_splits == ['val']
    hook.after_val_iter(runner, 0, outputs=_samples(0, 2))
    hook.after_val_epoch(runner, metrics={})
    assert hook.empty_splits == []  # a later evaluation with predictions clears it
    hook.after_test_iter(runner, 0, outputs=[object()])  # not a detector: nothing counted, nothing said
    hook.after_test_epoch(runner, metrics={})
    assert hook.empty_splits == []


def test_score_threshold_is_found_for_two_and_one_stage_detectors():
    assert find_score_threshold(dict(rpn=dict(nms_pre=1), rcnn=dict(score_thr=0.05))) == (
        'model.test_cfg.rcnn.score_thr', 0.05)
    assert find_score_threshold(dict(score_thr=0.3, nms=None)) == ('model.test_cfg.score_thr', 0.3)
    assert find_score_threshold(dict(max_per_img=100)) is None


@pytest.mark.e2e
def test_test_tool_fails_when_nothing_is_detected(shapes_root, tmp_path):
    """An untrained detector with a threshold no score can pass: one line naming the split and threshold."""
    from mmdet.registry import MODELS
    from mmengine.registry import init_default_scope
    cfg = Config.fromfile(str(ROOT / DET))
    init_default_scope('mmdet')
    checkpoint = tmp_path / 'untrained.pth'
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict()}, checkpoint)
    coco = shapes_root / 'coco'
    result = run_python(
        [sys.executable, 'tools/test.py', DET, str(checkpoint), '--work-dir', str(tmp_path / 'work'), '--cfg-options',
         f'test_dataloader.dataset.data_root={coco}', 'test_dataloader.dataset.indices=4',
         f'test_evaluator.ann_file={coco}/annotations/instances_val2017.json', 'model.test_cfg.rcnn.score_thr=1.01'],
        cwd=ROOT, timeout=600)
    assert result.returncode == 1, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert ('test: the model predicted no object in any of the 4 images '
            '(above model.test_cfg.rcnn.score_thr=1.01)') in log
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith('EmptyDetections:') and 'Traceback' not in result.stderr
