"""DistillationClassifier: DeiT's soft and hard distillation (Touvron et al. 2021, eqs. 2 and 3) against formulas
written here, a frozen teacher (no gradient, eval mode, its own normalisation and size, read in ``init_weights``,
refused when it does not fit), single- and dual-head students, student-only checkpoints."""
import math

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.structures import DataSample

import fake_timm
from mmcausal.models.distillation import DistillationClassifier, DistillationLoss, TeacherInputs
from mmcausal.utils.checkpoint_coverage import CheckpointMismatchError
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import ConfigValueError

CLASSES = 4
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
STUDENT = dict(
    backbone=dict(type='CaiT', arch=dict(embed_dims=32, num_layers=1, num_heads=2), img_size=32, patch_size=16,
                  out_type='cls_token'),
    head=dict(type='LinearClsHead', num_classes=CLASSES, in_channels=32, loss=dict(type='CrossEntropyLoss')),
    data_preprocessor=dict(num_classes=CLASSES, mean=MEAN, std=STD, to_rgb=True))
TEACHER_MODEL = dict(
    type='ImageClassifier',
    backbone=dict(type='ResNet', depth=18, base_channels=4, out_indices=(3, )),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(type='LinearClsHead', num_classes=CLASSES, in_channels=32),
    data_preprocessor=dict(num_classes=CLASSES, mean=[127.5] * 3, std=[64.] * 3, to_rgb=False))


def _classifier(teacher=None, distillation=None, alpha=0.5, **student) -> DistillationClassifier:
    torch.manual_seed(0)
    config = {**STUDENT, **student}
    if teacher is None and distillation is not None:
        teacher = dict(model=TEACHER_MODEL)
    return DistillationClassifier(**config, teacher=teacher, distillation=distillation, alpha=alpha)


def _batch(size: int = 32, batch: int = 6):
    torch.manual_seed(1)
    images = torch.rand(batch, 3, size, size) * 255
    labels = torch.arange(batch) % CLASSES
    samples = [DataSample().set_gt_label(int(label)) for label in labels]
    return images, labels, samples


def _normalised(model, images):
    return model.data_preprocessor({'inputs': list(images), 'data_samples': None})['inputs']


@pytest.mark.parametrize('alpha', [0.5, 0.3])
def test_hard_distillation_with_a_teacher_equal_to_the_labels_is_cross_entropy(alpha):
    model = _classifier(distillation=dict(mode='hard'), alpha=alpha).train()
    images, labels, samples = _batch()
    inputs = _normalised(model, images)
    model.teacher_logits = lambda _inputs: 5. * F.one_hot(labels, CLASSES).float()
    losses = model.loss(inputs, samples)
    plain = F.cross_entropy(model(inputs, mode='tensor'), labels)
    assert set(losses) == {'loss_cls', 'loss_distill'}
    torch.testing.assert_close(losses['loss_cls'] + losses['loss_distill'], plain)
    torch.testing.assert_close(losses['loss_distill'], alpha * plain)


@pytest.mark.parametrize('reduction,divisor', [('batchmean', lambda b, k: b), ('numel', lambda b, k: b * k)])
def test_soft_distillation_is_the_tempered_kl(reduction, divisor):
    torch.manual_seed(2)
    student, teacher, tau = torch.randn(5, 7), torch.randn(5, 7), 3.
    p_teacher = torch.softmax(teacher / tau, 1)
    kl = (p_teacher * (p_teacher.log() - torch.log_softmax(student / tau, 1))).sum()
    expected = tau ** 2 * kl / divisor(5, 7)
    loss = DistillationLoss(mode='soft', tau=tau, kl_reduction=reduction)(student, teacher)
    torch.testing.assert_close(loss, expected)
    hard = DistillationLoss(mode='hard')(student, teacher)
    torch.testing.assert_close(hard, -torch.log_softmax(student, 1)[torch.arange(5), teacher.argmax(1)].mean())


def test_soft_distillation_weighs_the_label_and_the_teacher_terms():
    model = _classifier(distillation=dict(mode='soft', tau=3.), alpha=0.1).train()
    images, labels, samples = _batch()
    inputs = _normalised(model, images)
    losses = model.loss(inputs, samples)
    logits, teacher = model(inputs, mode='tensor'), model.teacher(model.teacher_inputs(inputs), mode='tensor')
    p_teacher = torch.softmax(teacher / 3., 1)
    kl = (p_teacher * (p_teacher.log() - torch.log_softmax(logits / 3., 1))).sum(1).mean()
    torch.testing.assert_close(losses['loss_cls'], 0.9 * F.cross_entropy(logits, labels))
    torch.testing.assert_close(losses['loss_distill'], 0.1 * 9. * kl)


def test_the_teacher_gets_no_gradient_stays_in_eval_mode_and_keeps_its_statistics():
    model = _classifier(distillation=dict(mode='hard')).train()
    model.teacher.requires_grad_(True)  # even so, the teacher runs without building a graph
    assert not model.teacher_logits(torch.rand(2, 3, 32, 32)).requires_grad
    model.teacher.requires_grad_(False)
    assert not model.teacher.training and all(not module.training for module in model.teacher.modules())
    statistics = {key: value.clone() for key, value in model.teacher.state_dict().items() if 'running' in key}
    images, _, samples = _batch()
    sum(model.loss(_normalised(model, images), samples).values()).backward()
    assert all(parameter.grad is None for parameter in model.teacher.parameters())
    assert all(parameter.grad is not None for parameter in model.backbone.parameters() if parameter.requires_grad)
    for key, value in statistics.items():
        assert torch.equal(model.teacher.state_dict()[key], value), key  # batch norm in eval mode: no update


def test_the_teacher_sees_the_image_in_its_own_normalisation_and_size():
    model = _classifier(distillation=dict(mode='hard'), teacher=dict(model=TEACHER_MODEL, input_size=(40, 48)))
    images, _, _ = _batch()
    rgb = images.flip(1)  # the files are BGR; the student converts to RGB, the teacher does not
    student_inputs = (rgb - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    torch.testing.assert_close(_normalised(model, images), student_inputs)
    expected = F.interpolate((images - 127.5) / 64., size=(40, 48), mode='bicubic', align_corners=False)
    torch.testing.assert_close(model.teacher_inputs(student_inputs), expected, atol=1e-4, rtol=1e-5)
    assert TeacherInputs(model.data_preprocessor, model.data_preprocessor)(student_inputs).equal(student_inputs)


@pytest.mark.parametrize('teacher', [dict(model=TEACHER_MODEL), dict(model=dict(type='TimmClassifier',
                                                                            model_name='regnety_160', num_classes=4))],
                         ids=['ImageClassifier', 'TimmClassifier'])
def test_checkpoints_hold_the_student_alone_and_load_back_strictly(teacher):
    with fake_timm.installed():  # TimmClassifier renames its keys when it saves: the teacher's keys are not expected
        model = _classifier(distillation=dict(mode='hard'), teacher=teacher)
    state = model.state_dict()
    assert state and not any(key.startswith('teacher.') for key in state)
    assert model.load_state_dict(state, strict=True).missing_keys == []
    plain = _classifier()  # no teacher: the plain classifier of the same student
    assert set(plain.state_dict()) == set(state)
    plain.load_state_dict(state, strict=True)


def test_the_teacher_checkpoint_is_read_at_initialisation(tmp_path):
    source = _classifier(distillation=dict(mode='hard')).teacher
    for parameter in source.parameters():
        torch.nn.init.normal_(parameter)
    runner_file, deit_file = tmp_path / 'epoch_30.pth', tmp_path / 'teacher.pth'
    torch.save({'meta': {}, 'state_dict': source.state_dict()}, runner_file)
    torch.save({'model': {f'module.{key}': value for key, value in source.state_dict().items()}}, deit_file)
    for file in (runner_file, deit_file):
        model = _classifier(distillation=dict(mode='hard'), teacher=dict(model=TEACHER_MODEL, checkpoint=str(file)))
        assert not torch.equal(model.teacher.head.fc.weight, source.head.fc.weight)  # built without the file
        model.init_weights()
        for key, value in source.state_dict().items():
            assert torch.equal(model.teacher.state_dict()[key], value), key


def test_a_teacher_checkpoint_that_does_not_fit_is_refused(tmp_path):
    other = dict(TEACHER_MODEL, head=dict(TEACHER_MODEL['head'], num_classes=CLASSES + 1))
    wrong = tmp_path / 'other.pth'
    torch.save({'state_dict': _classifier(distillation=dict(mode='hard'), teacher=dict(model=other))
                .teacher.state_dict()}, wrong)
    cases = [(str(wrong), CheckpointMismatchError, 'other shapes: head.fc.weight'),
             (str(tmp_path / 'absent.pth'), UserInputError, 'absent.pth\nThe teacher checkpoint does not exist'),
             (None, UserInputError, 'no checkpoint')]
    for checkpoint, error, message in cases:
        model = _classifier(distillation=dict(mode='hard'), teacher=dict(model=TEACHER_MODEL, checkpoint=checkpoint))
        with pytest.raises(error, match=message):
            model.init_weights()


def test_a_dual_head_student_trains_each_head_on_its_own_target_and_predicts_with_their_mean():
    model = _classifier(
        distillation=dict(mode='hard'),
        backbone=dict(type='DistilledVisionTransformer', arch=dict(embed_dims=32, num_layers=1, num_heads=2,
                                                                     feedforward_channels=64),
                      img_size=32, patch_size=16),
        head=dict(type='DeiTClsHead', num_classes=CLASSES, in_channels=32, loss=dict(type='CrossEntropyLoss'))).train()
    images, labels, samples = _batch()
    inputs = _normalised(model, images)
    heads = model.head.layers
    for name, trained, untouched in (('loss_cls', heads.head, heads.head_dist),
                                     ('loss_distill', heads.head_dist, heads.head)):
        model.zero_grad()
        model.loss(inputs, samples)[name].backward()
        assert trained.weight.grad.abs().sum() > 0 and untouched.weight.grad is None, name
    class_logits, distillation_logits = model.student_logits(model.extract_feat(inputs))
    torch.testing.assert_close(model(inputs, mode='tensor'), (class_logits + distillation_logits) / 2)
    losses = model.loss(inputs, samples)
    torch.testing.assert_close(losses['loss_cls'], 0.5 * F.cross_entropy(class_logits, labels))
    teacher_labels = model.teacher_logits(inputs).argmax(1)
    torch.testing.assert_close(losses['loss_distill'], 0.5 * F.cross_entropy(distillation_logits, teacher_labels))


def test_a_head_with_its_own_loss_keeps_every_term_weighted():
    """De-focus's head adds an auxiliary loss on the patch tokens: it is kept, weighted by 1 - alpha with the label
    term, and the distillation term is computed on the head's logits."""
    student = dict(backbone=dict(type='DefocusViT', arch=dict(embed_dims=32, num_layers=1, num_heads=2),
                                 img_size=32, patch_size=16, out_type='raw'),
                   head=dict(type='DefocusClsHead', num_classes=CLASSES, in_channels=32, aux_loss='per_token'))
    plain = _classifier(**student).train()
    distilled = _classifier(distillation=dict(mode='hard'), alpha=0.25, **student).train()
    images, labels, samples = _batch()
    inputs = _normalised(plain, images)
    expected = plain.head.loss(plain.extract_feat(inputs), samples)
    losses = distilled.loss(inputs, samples)
    assert set(losses) == {'loss_cls', 'loss_aux', 'loss_distill'}
    for key in ('loss_cls', 'loss_aux'):
        torch.testing.assert_close(losses[key], 0.75 * expected[key])
    teacher_labels = distilled.teacher_logits(inputs).argmax(1)
    logits = distilled(inputs, mode='tensor')
    torch.testing.assert_close(losses['loss_distill'], 0.25 * F.cross_entropy(logits, teacher_labels))


def test_a_teacher_config_of_a_library_is_read_from_its_package():
    model = _classifier(distillation=dict(mode='hard'),
                        teacher=dict(config='mmpretrain::resnet/resnet18_8xb32_in1k.py'))
    assert type(model.teacher.backbone).__name__ == 'ResNet' and model.teacher.backbone.depth == 18
    assert model.teacher.data_preprocessor.to_rgb and model.teacher_inputs.scale.flatten().tolist() == [1., 1., 1.]


def test_without_a_teacher_the_loss_is_the_plain_classifiers():
    model = _classifier().train()
    images, labels, samples = _batch()
    inputs = _normalised(model, images)
    losses = model.loss(inputs, samples)
    assert set(losses) == {'loss_cls'}
    torch.testing.assert_close(losses['loss_cls'], F.cross_entropy(model(inputs, mode='tensor'), labels))
    assert math.isclose(DistillationLoss(mode='hard').tau, 1.)


@pytest.mark.parametrize('settings,message', [
    (dict(teacher=dict(model=TEACHER_MODEL)), 'needs both teacher= and distillation='),
    (dict(distillation=dict(mode='hard'), alpha=1.5), 'alpha must lie in'),
    (dict(distillation=dict(mode='sharp')), "Unknown DistillationLoss mode 'sharp'"),
    (dict(distillation=dict(mode='soft', tau=0.)), 'tau must be positive'),
    (dict(distillation=dict(mode='hard'), teacher=dict(model=TEACHER_MODEL, checkpont='x.pth')), "'checkpont'"),
    (dict(distillation=dict(mode='hard'), teacher=dict(checkpoint='x.pth')), 'exactly one of config='),
    (dict(backbone=dict(type='DistilledVisionTransformer', arch='deit-tiny', img_size=32, patch_size=16),
          head=dict(type='DeiTClsHead', num_classes=CLASSES, in_channels=192)),
     'A DeiTClsHead student needs a teacher'),
])
def test_a_bad_distillation_setting_is_one_clear_error(settings, message):
    with pytest.raises(ConfigValueError, match=message):
        _classifier(**settings)
