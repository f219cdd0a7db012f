"""De-focus's classification head with the auxiliary token loss (paper Sec. 4.2 and the released code: ``head2`` in
``classification/models/defocus_attention_network.py``, the loss in ``classification/main.py``)."""
from typing import List, Optional, Tuple

import torch
from mmpretrain.models.heads import ClsHead
from mmpretrain.structures import DataSample
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import ConfigValueError, check_choice

AUX_LOSSES = ('per_token', 'pooled')
#: what the classifier ``fc`` reads (paper Table 4(c), "Loss" column)
FEATURES = ('cls', 'avg', 'cls_avg')


class HeadInputError(UserInputError, ValueError):
    """The head got features of the wrong kind (e.g. pooled vectors instead of the token sequence)."""


def build_classifier(in_channels: int, num_classes: int, hidden_dims: Optional[int]) -> nn.Module:
    """``Linear(D, C)``, or with ``hidden_dims`` the large models' ``Linear(D, H) -> Tanh -> Linear(H, C)``."""
    if hidden_dims is None:
        return nn.Linear(in_channels, num_classes)
    return nn.Sequential(nn.Linear(in_channels, hidden_dims), nn.Tanh(), nn.Linear(hidden_dims, num_classes))


@MODELS.register_module()
class DefocusClsHead(ClsHead):
    """Classify the class token; train with an auxiliary loss on the patch tokens.

    Takes the backbone's ``out_type='raw'`` tokens ``(B, N + 1, D)`` with the class token last. Prediction uses
    ``fc(f)`` only, with ``f`` the class token (``feature='cls'``, released), the mean of the patch tokens
    (``'avg'``) or both concatenated (``'cls_avg'``, ``fc`` of width ``2 D``). The training loss is
    ``(1 - w) CE(fc(f)) + w L_aux`` with ``w = aux_weight`` (0.5 in the official code) and

    * ``'per_token'`` (the released code): ``L_aux = mean_t CE(aux_fc(x_t))`` over every patch token, the (soft)
      target broadcast to each token;
    * ``'pooled'`` (the paper's text, "average pooling then FC"): ``L_aux = CE(aux_fc(mean_t x_t))``;
    * ``None``: no auxiliary loss (``w`` ignored, no ``aux_fc``).

    Args:
        num_classes: number of classes.
        in_channels: token width ``D``.
        aux_loss: ``'per_token' | 'pooled' | None``.
        aux_weight: ``w``.
        hidden_dims: hidden width of the MLP classifiers of the large models (``3 D``); None = linear.
        feature: ``'cls' | 'avg' | 'cls_avg'``, the input of ``fc`` (above; paper Table 4(c)).
        loss, topk, cal_acc, init_cfg: as :class:`mmpretrain.models.heads.ClsHead`.
    """

    def __init__(self, num_classes: int, in_channels: int, aux_loss: Optional[str] = 'per_token',
                 aux_weight: float = .5, hidden_dims: Optional[int] = None, feature: str = 'cls',
                 init_cfg: Optional[dict] = dict(type='TruncNormal', layer='Linear', std=.02), **kwargs) -> None:
        super().__init__(init_cfg=init_cfg, **kwargs)
        self.aux_loss = None if aux_loss is None else check_choice('aux_loss', aux_loss, AUX_LOSSES)
        if not 0. <= aux_weight <= 1.:
            raise ConfigValueError(f'DefocusClsHead aux_weight w weighs the loss as (1 - w) CE + w L_aux and must be '
                                   f'in [0, 1] (the official 0.5), got {aux_weight!r}.')
        self.aux_weight = aux_weight
        self.feature = check_choice('feature', feature, FEATURES)
        self.fc = build_classifier(2 * in_channels if feature == 'cls_avg' else in_channels, num_classes, hidden_dims)
        if self.aux_loss is not None:
            self.aux_fc = build_classifier(in_channels, num_classes, hidden_dims)

    @staticmethod
    def _tokens(feats: Tuple[Tensor, ...]) -> Tensor:
        """The last output, checked to be the ``(B, N + 1, D)`` token sequence."""
        tokens = feats[-1]
        if tokens.dim() != 3:
            raise HeadInputError(f'DefocusClsHead needs the token sequence (B, N + 1, D) with the class token last, '
                                 f'got a tensor of shape {tuple(tokens.shape)}; set out_type="raw" in the backbone.')
        return tokens

    def pre_logits(self, feats: Tuple[Tensor, ...]) -> Tensor:
        """The input of ``fc`` from the last output: the class token ``(B, D)``, the patch tokens' mean ``(B, D)``
        or both ``(B, 2 D)`` (``feature``)."""
        return self._feature(self._tokens(feats))

    def _feature(self, tokens: Tensor) -> Tensor:
        if self.feature == 'cls':
            return tokens[:, -1]
        pooled = tokens[:, :-1].mean(dim=1)
        return pooled if self.feature == 'avg' else torch.cat((tokens[:, -1], pooled), dim=-1)

    def forward(self, feats: Tuple[Tensor, ...]) -> Tensor:
        """Logits ``(B, num_classes)`` of ``fc(f)``."""
        return self.fc(self.pre_logits(feats))

    def loss(self, feats: Tuple[Tensor, ...], data_samples: List[DataSample], **kwargs) -> dict:
        """``loss_cls`` (the weighted term of ``fc(f)``) and, with an auxiliary loss, ``loss_aux``.

        No key is plain ``loss``: mmengine's ``parse_losses`` optimises and logs as ``loss`` the sum of every key
        containing ``'loss'``, and a head key of that name would overwrite the logged sum with one of its terms.
        """
        tokens = self._tokens(feats)
        cls_loss = self._get_loss(self.fc(self._feature(tokens)), data_samples, **kwargs)['loss']
        if self.aux_loss is None:
            return dict(loss_cls=cls_loss)
        patches = tokens[:, :-1]
        if self.aux_loss == 'pooled':
            aux = self._get_loss(self.aux_fc(patches.mean(dim=1)), data_samples, **kwargs)['loss']
        else:
            logits = self.aux_fc(patches)  # (B, N, C)
            aux = self._get_loss(logits.flatten(0, 1), data_samples, repeat=logits.shape[1], **kwargs)['loss']
        return dict(loss_cls=(1 - self.aux_weight) * cls_loss, loss_aux=self.aux_weight * aux)

    def _get_loss(self, cls_score: Tensor, data_samples: List[DataSample], repeat: int = 1, **kwargs) -> dict:
        """``ClsHead._get_loss`` for scores of ``repeat`` consecutive rows per sample (targets repeated)."""
        if repeat == 1:
            return super()._get_loss(cls_score, data_samples, **kwargs)
        if 'gt_score' in data_samples[0]:
            target = torch.stack([sample.gt_score for sample in data_samples])
        else:
            target = torch.cat([sample.gt_label for sample in data_samples])
        target = target.repeat_interleave(repeat, dim=0)
        return dict(loss=self.loss_module(cls_score, target, avg_factor=cls_score.size(0), **kwargs))
