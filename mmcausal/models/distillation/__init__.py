"""Knowledge distillation for any mmpretrain student: :class:`DistillationClassifier` (DeiT's soft and hard
distillation, single- and dual-head students) with a frozen teacher built from any classifier config
(:mod:`.teacher`) and the distillation term (:class:`DistillationLoss`). It takes a model of any family and imports
none."""
from .classifier import DistillationClassifier
from .losses import DistillationLoss
from .teacher import TeacherInputs, build_teacher, load_teacher_weights

__all__ = ['DistillationClassifier', 'DistillationLoss', 'TeacherInputs', 'build_teacher', 'load_teacher_weights']
