"""The frozen teacher of a distillation run: built from any classifier config, fed the student's (mixed) batch in its
own normalisation and resolution, its weights read from a checkpoint when the model is initialised.

A teacher is given as ``dict(config=..., checkpoint=..., input_size=None)``:

* ``config``: a config file of a classifier (``configs/...py`` or ``mmpretrain::resnet/resnet50_8xb32_in1k.py``);
  its ``model`` and its ``data_preprocessor`` (mean, std, channel order) are used. Or ``model=dict(...)`` instead
  (with its normalisation in ``model.data_preprocessor``).
* ``checkpoint``: the teacher's weights: a Runner checkpoint of that config (``state_dict``), a research file
  (``model``, ``module.`` keys: deit's teachers) or a bare state dict; every weight must load. It is read in
  :func:`load_teacher_weights`, so a model builds without the file (to inspect a config, to test a student).
* ``input_size``: the teacher's input ``(H, W)`` (or one int), the student's batch resized to it (bicubic); ``None``
  feeds the student's size.
"""
import os.path as osp
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.config import Config, ConfigDict
from mmengine.hub import get_config
from torch import Tensor, nn

from mmcausal.utils.checkpoint_coverage import CheckpointMismatchError
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import ConfigValueError

TEACHER_KEYS = ('config', 'model', 'checkpoint', 'input_size')


def teacher_model_config(teacher: dict) -> ConfigDict:
    """The teacher's model config (with its ``data_preprocessor``) from ``teacher``'s ``config`` file or ``model``."""
    unknown = sorted(set(teacher) - set(TEACHER_KEYS))
    if unknown:
        raise ConfigValueError(f'Unknown teacher setting(s) {unknown}; a teacher takes {list(TEACHER_KEYS)}.')
    if ('config' in teacher) == ('model' in teacher):
        raise ConfigValueError('A teacher needs exactly one of config= (a classifier config file) and model= (a '
                               'model dict).')
    if 'model' in teacher:
        return ConfigDict(teacher['model'])
    path = teacher['config']
    config = get_config(path) if '::' in path else Config.fromfile(path)  # 'mmpretrain::resnet/...' : a library's
    model = ConfigDict(config.model)
    if 'data_preprocessor' not in model and 'data_preprocessor' in config:
        model.data_preprocessor = config.data_preprocessor
    return model


def build_teacher(teacher: dict) -> nn.Module:
    """The teacher model of ``teacher`` (see the module), frozen: no parameter requires a gradient, in eval mode."""
    from mmpretrain.registry import MODELS as CLASSIFIERS  # mmpretrain's types, then mmcausal's (the root's)
    config = teacher_model_config(teacher)
    try:
        model = CLASSIFIERS.build(config)
    except ImportError as error:  # a teacher from another library (TimmClassifier: timm)
        raise UserInputError(f'The teacher ({config.type}) cannot be built: {error} (the optional requirements: '
                             'pip install -r requirements/optional.txt).') from error
    model._is_init = True  # its weights come from its checkpoint: no init of its own (a Pretrained file, say)
    return model.requires_grad_(False).eval()


def _normalisation(preprocessor: Optional[nn.Module], channels: int) -> Tuple[Tensor, Tensor, bool]:
    """``(mean, std, to_rgb)`` of an mmpretrain data preprocessor; identity when it does not normalise."""
    if preprocessor is not None and not hasattr(preprocessor, 'to_rgb'):
        raise ConfigValueError(f'A distillation classifier reads mmpretrain ClsDataPreprocessor settings (mean, std, '
                               f'to_rgb); got {type(preprocessor).__name__}.')
    to_rgb = bool(getattr(preprocessor, 'to_rgb', False))
    if getattr(preprocessor, '_enable_normalize', False):
        return preprocessor.mean.flatten().float(), preprocessor.std.flatten().float(), to_rgb
    return torch.zeros(channels), torch.ones(channels), to_rgb


class TeacherInputs(nn.Module):
    """Turns the student's normalised batch into the teacher's: ``x_t = (x_s * std_s + mean_s [flipped] - mean_t) /
    std_t``, then resized to the teacher's input size.

    Args:
        student_preprocessor / teacher_preprocessor: the two data preprocessors (``ClsDataPreprocessor``).
        input_size: the teacher's ``(H, W)`` (or an int); ``None`` keeps the student's size.
        channels: image channels (3).
    """

    def __init__(self, student_preprocessor: Optional[nn.Module], teacher_preprocessor: Optional[nn.Module],
                 input_size: Optional[Union[int, Tuple[int, int]]] = None, channels: int = 3) -> None:
        super().__init__()
        student_mean, student_std, student_rgb = _normalisation(student_preprocessor, channels)
        teacher_mean, teacher_std, teacher_rgb = _normalisation(teacher_preprocessor, channels)
        self.flip_channels = student_rgb != teacher_rgb  # both read the same BGR files
        if self.flip_channels:
            student_mean, student_std = student_mean.flip(0), student_std.flip(0)
        # x_t = x_s * scale + shift
        self.register_buffer('scale', (student_std / teacher_std).view(1, -1, 1, 1), persistent=False)
        self.register_buffer('shift', ((student_mean - teacher_mean) / teacher_std).view(1, -1, 1, 1),
                             persistent=False)
        if isinstance(input_size, int):
            input_size = (input_size, input_size)
        self.input_size = None if input_size is None else tuple(input_size)

    def forward(self, inputs: Tensor) -> Tensor:
        """The teacher's batch ``(B, C, H_t, W_t)`` from the student's ``(B, C, H, W)``."""
        if self.flip_channels:
            inputs = inputs.flip(1)
        inputs = inputs * self.scale + self.shift
        if self.input_size is not None and tuple(inputs.shape[-2:]) != self.input_size:
            inputs = F.interpolate(inputs, size=self.input_size, mode='bicubic', align_corners=False)
        return inputs


def _teacher_state_dict(checkpoint: dict) -> dict:
    """The weights of a Runner checkpoint, a research file (``model``) or a bare state dict, without ``module.``."""
    for key in ('state_dict', 'model'):
        if isinstance(checkpoint.get(key), dict):
            checkpoint = checkpoint[key]
            break
    return {key[len('module.'):] if key.startswith('module.') else key: value for key, value in checkpoint.items()}


def load_teacher_weights(teacher: nn.Module, checkpoint: Optional[str]) -> None:
    """Load every weight of ``teacher`` from ``checkpoint`` (safe loading; a file that misses or adds a weight, or
    holds another shape, is refused: a teacher that did not load would teach noise)."""
    from mmengine.runner.checkpoint import CheckpointLoader  # mmcausal.compat makes its loads weights-only
    if checkpoint is None:
        raise UserInputError('The distillation teacher has no checkpoint: set model.teacher.checkpoint to the '
                             "trained teacher's weights.")
    if '://' not in checkpoint and not osp.isfile(checkpoint):
        raise UserInputError(f'not found: {checkpoint}\nThe teacher checkpoint does not exist: train the teacher '
                             'config first, or set model.teacher.checkpoint to its weights.')
    weights = _teacher_state_dict(CheckpointLoader.load_checkpoint(checkpoint, map_location='cpu'))
    own = teacher.state_dict()
    missing = [key for key in own if key not in weights]
    unexpected = [key for key in weights if key not in own]
    mismatched = [key for key in own if key in weights and tuple(weights[key].shape) != tuple(own[key].shape)]
    if missing or unexpected or mismatched:
        listed = [f'{name}: {", ".join(keys[:3])}{", ..." if len(keys) > 3 else ""}' for name, keys in
                  (('missing', missing), ('unexpected', unexpected), ('other shapes', mismatched)) if keys]
        raise CheckpointMismatchError('; '.join(listed) + f'\nin: {checkpoint}\nThe teacher checkpoint does not fit '
                                      f'the teacher ({type(teacher).__name__}): give the weights of '
                                      'model.teacher.config, or its config.')
    teacher.load_state_dict(weights, strict=True)
