"""An mmpretrain image classifier trained against a frozen teacher: DeiT's soft and hard distillation for any
student (Touvron et al., ICML 2021, Sec. 4; CaiT trained its released models with the hard form, Sec. 4.3).

``L = (1 - alpha) L_label(Z_s, y) + alpha L_distill(Z_d, Z_t)``, ``Z_t`` the teacher's logits on the same (mixed)
batch; ``L_label`` is the head's own loss (label smoothing, mixed targets), ``L_distill`` the
:class:`~.losses.DistillationLoss` (soft: ``tau^2 KL``; hard: CE to the teacher's argmax, with ``alpha = 1/2`` the
average of the two cross-entropies).

* **Single-head students** (CaiT, iLLaMA, VisionLLaMA, any ``ClsHead``): ``Z_d = Z_s``, both terms on the one head,
  as the CaiT paper distilled.
* **Dual-head students** (mmpretrain's ``DistilledVisionTransformer`` + ``DeiTClsHead``): the class head against the
  label, the distillation head (fed by the distillation token) against the teacher; inference averages both heads
  (``DeiTClsHead``'s forward).

The teacher is the ``teacher`` submodule, frozen (no gradient, always in eval mode, run under ``no_grad``) and left out
of the state dict, so checkpoints hold the student alone and a student checkpoint loads into this classifier or into a
plain ``ImageClassifier``. Its weights are read in :meth:`init_weights`, which the Runner calls before it resumes.
"""
from typing import Dict, List, Optional, Tuple

import torch
from mmengine.model import BaseModule
from mmpretrain.models import DeiTClsHead, ImageClassifier
from mmpretrain.structures import DataSample
from torch import Tensor

from mmcausal.registry import MODELS
from mmcausal.utils.validation import ConfigValueError
from .teacher import TeacherInputs, build_teacher, load_teacher_weights

TEACHER = 'teacher'


@MODELS.register_module()
class DistillationClassifier(ImageClassifier):
    """An ``ImageClassifier`` whose training loss distils a frozen ``teacher``.

    Args:
        backbone, neck, head, pretrained, train_cfg, data_preprocessor, init_cfg: as ``ImageClassifier`` (the student).
        teacher: the teacher, ``dict(config=... | model=..., checkpoint=..., input_size=None)`` (see
            :mod:`.teacher`); ``None`` only with ``distillation=None`` (DeiT's mode 'none': the plain classifier).
        distillation: the :class:`~.losses.DistillationLoss` config (``mode`` 'hard' or 'soft', ``tau``,
            ``kl_reduction``); ``None`` trains without a teacher.
        alpha: the weight ``alpha`` of the distillation term (DeiT: 0.5 for hard distillation; 0.1 for soft, with
            ``kl_reduction='numel'``, the scale of deit's code).
    """

    def __init__(self, backbone: dict, neck: Optional[dict] = None, head: Optional[dict] = None,
                 pretrained: Optional[str] = None, train_cfg: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None, init_cfg: Optional[dict] = None,
                 teacher: Optional[dict] = None, distillation: Optional[dict] = None, alpha: float = 0.5) -> None:
        super().__init__(backbone, neck=neck, head=head, pretrained=pretrained, train_cfg=train_cfg,
                         data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if (teacher is None) != (distillation is None):
            raise ConfigValueError('DistillationClassifier needs both teacher= and distillation= (or neither, to '
                                   'train without distillation).')
        if not 0. <= alpha <= 1.:
            raise ConfigValueError(f'DistillationClassifier alpha must lie in [0, 1], got {alpha}.')
        if not hasattr(self.head, '_get_loss'):
            raise ConfigValueError(f'DistillationClassifier needs a classification head (ClsHead), got '
                                   f'{type(self.head).__name__}.')
        if self.dual_head and distillation is None:
            raise ConfigValueError('A DeiTClsHead student needs a teacher: its distillation head learns only from it '
                                   '(without one, use a single-head ClsHead).')
        self.alpha = float(alpha)
        self.teacher_checkpoint = None if teacher is None else teacher.get('checkpoint')
        if teacher is None:
            self.teacher = self.teacher_inputs = self.distillation = None
            return
        self.teacher = build_teacher(teacher)
        self.teacher_inputs = TeacherInputs(self.data_preprocessor, getattr(self.teacher, 'data_preprocessor', None),
                                            teacher.get('input_size'))
        self.distillation = MODELS.build({'type': 'DistillationLoss', **distillation})
        self._register_state_dict_hook(_drop_teacher_weights)
        self.register_load_state_dict_post_hook(_teacher_weights_are_not_expected)

    @property
    def dual_head(self) -> bool:
        """Whether the head has a distillation head (``DeiTClsHead``): class and distillation logits differ."""
        return isinstance(self.head, DeiTClsHead)

    def init_weights(self) -> None:
        """Initialise the student (its ``init_cfg``) and load the teacher's checkpoint."""
        super().init_weights()
        if self.teacher is not None:
            load_teacher_weights(self.teacher, self.teacher_checkpoint)

    def train(self, mode: bool = True) -> 'DistillationClassifier':
        """Set the student's mode; the teacher stays in eval mode (batch norm statistics, dropout)."""
        super().train(mode)
        if self.teacher is not None:
            self.teacher.eval()
        return self

    @torch.no_grad()
    def teacher_logits(self, inputs: Tensor) -> Tensor:
        """The teacher's logits ``(B, K)`` for the student's batch ``(B, C, H, W)`` (normalised, possibly mixed)."""
        return self.teacher(self.teacher_inputs(inputs), mode='tensor')

    def student_logits(self, feats: Tuple[Tensor, ...]) -> Tuple[Tensor, Tensor]:
        """``(class logits, distillation logits)`` of the student's head; the same tensor for a single head."""
        if not self.dual_head:
            logits = self.head(feats)
            return logits, logits
        class_token, distillation_token = self.head.pre_logits(feats)
        return self.head.layers.head(class_token), self.head.layers.head_dist(distillation_token)

    def loss(self, inputs: Tensor, data_samples: List[DataSample]) -> Dict[str, Tensor]:
        """``loss_cls = (1 - alpha) L_label`` and ``loss_distill = alpha L_distill``. ``L_label`` is the head's own
        loss: every term it returns (an auxiliary loss, say) is weighted by ``1 - alpha``; its accuracies are kept."""
        feats = self.extract_feat(inputs)
        if self.dual_head:  # DeiTClsHead's loss would take the mean of the two heads: the class head alone here
            class_logits, distillation_logits = self.student_logits(feats)
            losses = self.head._get_loss(class_logits, data_samples)
        else:
            losses, distillation_logits = self.head.loss(feats, data_samples), self.head(feats)
        if 'loss' in losses:  # mmengine logs the sum of the terms as 'loss': the label term is 'loss_cls'
            losses['loss_cls'] = losses.pop('loss')
        if self.distillation is None:
            return losses
        weighted = {key: (1. - self.alpha) * value if 'loss' in key else value for key, value in losses.items()}
        distill = self.distillation(distillation_logits, self.teacher_logits(inputs))
        return {**weighted, 'loss_distill': self.alpha * distill}


def _drop_teacher_weights(module: BaseModule, state_dict: dict, prefix: str, _metadata) -> None:
    """State-dict hook: checkpoints hold the student alone (the teacher is read from its own file)."""
    for key in [key for key in state_dict if key.startswith(f'{prefix}{TEACHER}.')]:
        del state_dict[key]


def _teacher_weights_are_not_expected(module: BaseModule, incompatible_keys) -> None:
    """Load post-hook: a student checkpoint is complete without the teacher's weights (named as the modules hold
    them: a teacher's own state-dict hooks, as ``TimmClassifier``'s, rename only what it saves)."""
    named = (*module.teacher.named_parameters(), *module.teacher.named_buffers())
    teacher_keys = {f'{TEACHER}.{name}' for name, _ in named}
    missing = incompatible_keys.missing_keys
    missing[:] = [key for key in missing if not _is_teacher_key(key, teacher_keys)]


def _is_teacher_key(key: str, teacher_keys: set) -> bool:
    start = key.find(f'{TEACHER}.')
    return start >= 0 and (start == 0 or key[start - 1] == '.') and key[start:] in teacher_keys
