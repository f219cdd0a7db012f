"""Feature extractors for the generation metrics: an mmpretrain classifier trained by ``tools/train.py`` (the CPU
twins' judge) and torchvision's Inception-v3 from a locally supplied weights file (nothing is downloaded).

Each extractor maps uint8 RGB images (N, H, W, 3) to :class:`ImageFeatures`: ``pool`` (N, D) for the Fréchet distance
and precision / recall, ``spatial`` (N, C, h, w) for the sFID-style distance and ``probs`` (N, K) for the Inception
Score and the accuracy against conditioning labels.
"""
import os.path as osp
from typing import Callable, List, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from mmcausal.utils.checkpoint_loading import load_checkpoint_file
from mmcausal.utils.errors import UserInputError

#: ADM's sFID keeps the first 7 channels of its spatial map; both extractors do the same.
SPATIAL_CHANNELS = 7
INCEPTION_SIZE = 299
TORCHVISION_INCEPTION_FILE = 'inception_v3_google-0cc3c7bd.pth'


class ExtractorError(UserInputError, ValueError):
    """The feature extractor named on the command line cannot be loaded."""


class ImageFeatures(NamedTuple):
    """``pool`` (N, D), ``spatial`` (N, C, h, w) and ``probs`` (N, K) of N images."""
    pool: Tensor
    spatial: Tensor
    probs: Tensor


def _as_batch(images: np.ndarray, device: torch.device) -> Tensor:
    """uint8 (N, H, W, 3) RGB -> uint8 (N, 3, H, W) RGB tensor on ``device``."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).to(device)


class JudgeFeatures:
    """Features of an mmpretrain ``ImageClassifier`` with a pooling neck (e.g. the twins' ``JudgeCNN``), rebuilt
    from the config that ``tools/train.py`` stores in its checkpoint's ``meta``: ``pool`` = the neck's output,
    ``spatial`` = the first 7 channels of the backbone's last map, ``probs`` = softmax of the head."""

    #: its classes are the dataset's, so its accuracy against the samples' conditioning labels is meaningful
    judges_labels = True

    def __init__(self, checkpoint: str, device: str = 'cpu') -> None:
        if not osp.isfile(checkpoint):
            raise ExtractorError(f'judge checkpoint {checkpoint} does not exist; train one with tools/train.py '
                                 'configs/generation_judge/judge-cnn-nano_1xb64-20e_shapes-32px.py.')
        state = load_checkpoint_file(checkpoint, map_location='cpu')
        cfg_text = state.get('meta', {}).get('cfg') if isinstance(state, dict) else None
        if not cfg_text or 'state_dict' not in state:
            raise ExtractorError(f'{checkpoint} holds no config in its meta or no state_dict; give a checkpoint '
                                 'written by tools/train.py (work_dirs/<config>/epoch_N.pth).')
        self.device = torch.device(device)
        self.model = self._build(Config.fromstring(cfg_text, '.py'), checkpoint)
        self.model.load_state_dict(state['state_dict'])
        self.model.to(self.device).eval()

    @staticmethod
    def _build(cfg: Config, checkpoint: str) -> nn.Module:
        from mmpretrain.models import ImageClassifier
        from mmpretrain.registry import MODELS
        model_cfg = cfg.model.to_dict()
        if cfg.get('data_preprocessor') is not None:  # what the Runner does with the top-level key
            model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor.to_dict())
        model = MODELS.build(model_cfg)
        if not isinstance(model, ImageClassifier) or model.neck is None:
            raise ExtractorError(f'{checkpoint} is not an image classifier with a pooling neck; a judge is an '
                                 'mmpretrain ImageClassifier (backbone, neck, head).')
        return model

    @torch.no_grad()
    def __call__(self, images: np.ndarray) -> ImageFeatures:
        # LoadImageFromFile gives BGR; the data preprocessor converts back (to_rgb) and normalises
        inputs = self.model.data_preprocessor(dict(inputs=_as_batch(images, self.device).flip(1)), False)['inputs']
        maps = self.model.extract_feat(inputs, stage='backbone')
        pooled = self.model.neck(maps)
        logits = self.model.head(pooled)
        return ImageFeatures(pooled[-1].flatten(1), maps[-1][:, :SPATIAL_CHANNELS], logits.softmax(dim=1))


class InceptionFeatures:
    """torchvision's Inception-v3 from a local weights file: ``pool`` = the 2048-d average pool (FID), ``spatial`` =
    the first 7 channels of ``Mixed_6d.branch1x1`` (17 x 17; the TF graph's ``mixed_6/conv`` that ADM's sFID uses,
    TF's ``mixed_k`` being torchvision's (k+1)-th Mixed block), ``probs`` = softmax of the 1000 logits (IS).

    The file is a torchvision state dict of ``inception_v3`` (``Inception_V3_Weights.IMAGENET1K_V1`` =
    ``inception_v3_google-0cc3c7bd.pth``, fetched on a connected machine and copied here). These are not the TF FID
    weights, so the numbers are for comparing runs of this tool; paper numbers come from the ADM TF evaluator.
    Images are resized to 299 px (bilinear) and scaled to [-1, 1], the input these weights expect.
    """

    judges_labels = False

    def __init__(self, path: str, device: str = 'cpu') -> None:
        from torchvision.models import inception_v3
        if not osp.isfile(path):
            raise ExtractorError(f'Inception weights {path} do not exist (nothing is downloaded): save torchvision\'s '
                                 f'Inception_V3_Weights.IMAGENET1K_V1 file ({TORCHVISION_INCEPTION_FILE}) there.')
        state = load_checkpoint_file(path, map_location='cpu')
        self.model = inception_v3(weights=None, aux_logits=True, init_weights=False, transform_input=False)
        if not isinstance(state, dict) or set(state) != set(self.model.state_dict()):
            raise ExtractorError(f'{path} is not a torchvision inception_v3 state dict (its keys differ); give '
                                 f'{TORCHVISION_INCEPTION_FILE}.')
        self.model.load_state_dict(state)
        self.device = torch.device(device)
        self.model.to(self.device).eval()

    @staticmethod
    def _capture(module: nn.Module, store: List[Tensor]) -> RemovableHandle:
        return module.register_forward_hook(lambda _module, _inputs, output: store.append(output))

    @torch.no_grad()
    def __call__(self, images: np.ndarray) -> ImageFeatures:
        x = _as_batch(images, self.device).float() / 127.5 - 1
        x = F.interpolate(x, size=(INCEPTION_SIZE, INCEPTION_SIZE), mode='bilinear', align_corners=False)
        spatial: List[Tensor] = []
        pooled: List[Tensor] = []
        hooks = [self._capture(self.model.Mixed_6d.branch1x1, spatial), self._capture(self.model.avgpool, pooled)]
        try:
            logits = self.model(x)
        finally:
            for hook in hooks:
                hook.remove()
        return ImageFeatures(pooled[0].flatten(1), spatial[0][:, :SPATIAL_CHANNELS], logits.softmax(dim=1))


def build_extractor(spec: str, device: str = 'cpu'):
    """``'judge:CKPT'`` -> :class:`JudgeFeatures`, ``'inception:PATH'`` -> :class:`InceptionFeatures`."""
    kind, _, path = spec.partition(':')
    extractors = dict(judge=JudgeFeatures, inception=InceptionFeatures)
    if kind not in extractors or not path:
        raise ExtractorError(f'--extractor must be judge:CKPT or inception:PATH, got {spec!r}.')
    return extractors[kind](path, device)


def extract_features(extractor: Callable[[np.ndarray], ImageFeatures], images: np.ndarray,
                     batch_size: int = 100) -> ImageFeatures:
    """:class:`ImageFeatures` of all ``images`` (N, H, W, 3) uint8, in batches, on the CPU."""
    parts = [extractor(images[start:start + batch_size]) for start in range(0, len(images), batch_size)]
    return ImageFeatures(*(torch.cat([getattr(p, field) for p in parts]).cpu() for field in ImageFeatures._fields))
