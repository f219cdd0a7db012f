"""DeiT's distillation objectives (Touvron et al., "Training data-efficient image transformers & distillation through
attention", ICML 2021, Sec. 4), as a loss module the distillation classifier weighs against the label loss.

With student logits ``Z_s``, teacher logits ``Z_t``, softmax ``psi``, temperature ``tau`` and weight ``lambda``:

* soft (DeiT eq. 2):  ``L = (1 - lambda) CE(psi(Z_s), y) + lambda tau^2 KL(psi(Z_t / tau) || psi(Z_s / tau))``
* hard (DeiT eq. 3):  ``L = 1/2 CE(psi(Z_s), y) + 1/2 CE(psi(Z_s), argmax_c Z_t(c))`` (``lambda = 1/2``)

This module computes the distillation term alone (the KL or the CE to the teacher's argmax); the classifier adds the
label term and the weights.
"""
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.validation import ConfigValueError, check_choice

#: how the soft term's summed KL is divided: per image as the paper's KL (``'batchmean'``), or by the number of
#: logits as deit's ``DistillationLoss`` does (``'numel'``: ``batch x classes``, a ``1 / classes`` smaller term)
KL_REDUCTIONS = ('batchmean', 'numel')
MODES = ('soft', 'hard')


@MODELS.register_module()
class DistillationLoss(nn.Module):
    """The distillation term of DeiT: a temperature-scaled KL to the teacher's distribution or a CE to its argmax.

    Args:
        mode: ``'soft'`` (KL at temperature ``tau``) or ``'hard'`` (CE to the teacher's argmax; ``tau`` unused).
        tau: the soft term's temperature (DeiT's soft distillation: 3.0).
        kl_reduction: one of :data:`KL_REDUCTIONS`; ``'numel'`` reproduces the deit code's scale.
    """

    def __init__(self, mode: str = 'hard', tau: float = 1.0, kl_reduction: str = 'batchmean') -> None:
        super().__init__()
        self.mode = check_choice('DistillationLoss mode', mode, MODES, ConfigValueError)
        self.kl_reduction = check_choice('DistillationLoss kl_reduction', kl_reduction, KL_REDUCTIONS,
                                         ConfigValueError)
        if tau <= 0:
            raise ConfigValueError(f'DistillationLoss tau must be positive, got {tau}.')
        self.tau = float(tau)

    def forward(self, student_logits: Tensor, teacher_logits: Tensor) -> Tensor:
        """The distillation term for logits ``(B, K)`` of the student and the teacher (a scalar)."""
        if self.mode == 'hard':
            return F.cross_entropy(student_logits, teacher_logits.argmax(dim=1))
        tau = self.tau
        kl = F.kl_div(F.log_softmax(student_logits.float() / tau, dim=1),
                      F.log_softmax(teacher_logits.float() / tau, dim=1), reduction='sum', log_target=True)
        divisor = student_logits.shape[0] if self.kl_reduction == 'batchmean' else student_logits.numel()
        return kl * (tau * tau) / divisor

    def extra_repr(self) -> str:
        return f'mode={self.mode!r}, tau={self.tau}, kl_reduction={self.kl_reduction!r}'
