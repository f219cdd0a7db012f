"""The distillation twins through the tools: the ResNet-18 teacher twin
(``configs/distillation/resnet18-nano-w16_1xb64-60e_shapes-64px.py``) trains briefly, then the CaiT tiny twin learns
from it with hard distillation (``configs/cait/cait-nano-p16_dist_1xb64-150e_shapes-64px.py``, the teacher's
checkpoint given on the command line): both loss terms are logged, the student learns to match its teacher (the
distillation term falls; in 12 epochs the tiny CaiT's label term is still on its plateau), the checkpoint holds the
student alone, and ``tools/test.py`` evaluates it in the distillation config and in the plain CaiT twin's config. The
comparison with and without the teacher (several seeds) is in ``configs/cait/README.md``."""
import json
import math
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch

from e2e_utils import data_options, run_command

TEACHER = 'configs/distillation/resnet18-nano-w16_1xb64-60e_shapes-64px.py'
STUDENT = 'configs/cait/cait-nano-p16_dist_1xb64-150e_shapes-64px.py'
PLAIN = 'configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py'
TEACHER_EPOCHS, STUDENT_EPOCHS = 8, 12
ALPHA = 0.5  # the twin's weight of the distillation term


def _short(epochs: int) -> List[str]:
    return [f'train_cfg.max_epochs={epochs}', f'train_cfg.val_interval={epochs}',
            f'default_hooks.checkpoint.interval={epochs}']


def _logged(work_dir: Path) -> Dict[str, List[float]]:
    (scalars, ) = work_dir.glob('*/vis_data/scalars.json')
    records = [json.loads(line) for line in scalars.read_text().splitlines()]
    return {key: [record[key] for record in records if key in record]
            for key in ('loss_cls', 'loss_distill', 'accuracy/top1')}


@pytest.mark.e2e
def test_a_cait_student_distils_a_resnet_teacher_through_the_tools(shapes_root, tmp_path):
    data = data_options(shapes_root, 'imagenet')
    teacher_dir, student_dir = tmp_path / 'teacher', tmp_path / 'student'
    run_command([sys.executable, 'tools/train.py', TEACHER, '--work-dir', str(teacher_dir), '--cfg-options', *data,
                 *_short(TEACHER_EPOCHS)])
    assert _logged(teacher_dir)['accuracy/top1'][-1] > 35.  # chance: 25
    teacher = teacher_dir / f'epoch_{TEACHER_EPOCHS}.pth'
    run_command([sys.executable, 'tools/train.py', STUDENT, '--work-dir', str(student_dir), '--cfg-options', *data,
                 *_short(STUDENT_EPOCHS), f'model.teacher.checkpoint={teacher}'])
    logged = _logged(student_dir)
    assert len(logged['loss_distill']) == len(logged['loss_cls']) > 5
    # alpha x the student's CE to the teacher's argmax: from alpha ln 4 (no knowledge of 4 classes) to well below it
    distill = logged['loss_distill']
    assert distill[0] > 0.95 * ALPHA * math.log(4) and np.mean(distill[-3:]) < 0.85 * ALPHA * math.log(4), distill
    student = student_dir / f'epoch_{STUDENT_EPOCHS}.pth'
    keys = torch.load(student, map_location='cpu', weights_only=False)['state_dict']
    assert not [key for key in keys if key.startswith('teacher.')] and any(key.startswith('backbone.') for key in keys)
    for config in (STUDENT, PLAIN):  # the student evaluates with or without its teacher's config
        result = run_command([sys.executable, 'tools/test.py', config, str(student), '--work-dir',
                              str(tmp_path / 'test'), '--cfg-options', *data, f'model.teacher.checkpoint={teacher}'
                              if config == STUDENT else 'model.head.topk=1'])
        assert f'accuracy/top1: {logged["accuracy/top1"][-1]:.4f}' in result.stdout + result.stderr, config
