"""Feature extractors of the generation metrics, registered in torch-fidelity's registry so that its metric code and
its own tools (``fidelity --feature-extractor NAME``) run on them:

* ``inception-v3-compat-adm`` -- torch-fidelity's ``inception-v3-compat`` (the TF FID Inception-v3 the ADM evaluator
  runs, ported to PyTorch, with its TF-exact bilinear resize to 299 px) plus ADM's sFID map ``mixed_6/conv``;
* ``mmcausal-judge`` -- an mmpretrain classifier trained by ``tools/train.py`` (the CPU twins' JudgeCNN), rebuilt from
  the config stored in its checkpoint, which ``feature_extractor_weights_path`` names.

Each takes uint8 RGB images (N, 3, H, W) and gives a pooled vector (FID, KID, precision / recall), a spatial map
(sFID: the first 7 channels, flattened as ADM does, height x width x channel) and class logits (IS, accuracy).
Importing this module needs torch-fidelity (a one-line error names the install otherwise).
"""
import os.path as osp
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.config import Config
from torch import Tensor, nn
from torch.utils.data import Dataset

from mmcausal.utils.checkpoint_loading import load_checkpoint_file
from mmcausal.utils.errors import UserInputError
from .fidelity import torch_fidelity

_tf = torch_fidelity()
_registry = torch_fidelity('registry')
_inception = torch_fidelity('feature_extractor_inceptionv3')

#: ADM's sFID keeps the first 7 channels of its spatial map; both extractors do the same.
SPATIAL_CHANNELS = 7
#: torch-fidelity's port of the TF FID Inception weights (its download; give the local copy on offline machines)
INCEPTION_WEIGHTS_FILE = 'weights-inception-2015-12-05-6726825d.pth'
INCEPTION_WEIGHTS_URL = _inception.URL_INCEPTION_V3
INCEPTION = 'inception-v3-compat-adm'
JUDGE = 'mmcausal-judge'


class ExtractorError(UserInputError, ValueError):
    """The feature extractor named on the command line cannot be loaded."""


class ImageFeatures(NamedTuple):
    """``pool`` (N, D), ``spatial`` (N, h * w * 7) and ``logits`` (N, K) of N images."""
    pool: Tensor
    spatial: Tensor
    logits: Tensor


def _adm_spatial(feature_map: Tensor) -> Tensor:
    """(N, C, h, w) -> (N, h * w * 7): the first 7 channels in ADM's (TF's NHWC) order, so that the statistics match
    the ``mu_s`` / ``sigma_s`` of an ADM reference file."""
    return feature_map[:, :SPATIAL_CHANNELS].permute(0, 2, 3, 1).flatten(1).float()


class InceptionADM(_inception.FeatureExtractorInceptionV3):
    """torch-fidelity's ``inception-v3-compat`` with one more feature, ``'mixed_6/conv'``: the TF graph's tensor that
    ADM's sFID reads (the 1x1 branch of the 7th Inception block, ``Mixed_6d``; TF's ``mixed_k`` is the (k+1)-th
    block), 17 x 17, its first 7 channels. The other features are the library's, unchanged."""

    SPATIAL = 'mixed_6/conv'

    @staticmethod
    def get_provided_features_list() -> Tuple[str, ...]:
        return (*_inception.FeatureExtractorInceptionV3.get_provided_features_list(), InceptionADM.SPATIAL)

    @staticmethod
    def get_default_feature_layer_for_metric(metric: str) -> str:
        if metric == 'sfid':
            return InceptionADM.SPATIAL
        return _inception.FeatureExtractorInceptionV3.get_default_feature_layer_for_metric(metric)

    @staticmethod
    def can_be_compiled() -> bool:
        return False  # the forward hook below

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        requested = self.features_list
        if self.SPATIAL not in requested:
            return super().forward(x)
        maps = []
        hook = self.Mixed_6d.branch1x1.register_forward_hook(lambda _m, _i, output: maps.append(output))
        # the library's forward returns the features of self.features_list: ask it for the others only
        self.features_list = [name for name in requested if name != self.SPATIAL] or ['768']
        try:
            features = dict(zip(self.features_list, super().forward(x)))
        finally:
            self.features_list = requested
            hook.remove()
        features[self.SPATIAL] = _adm_spatial(maps[0])
        return tuple(features[name] for name in requested)


class JudgeExtractor(_tf.FeatureExtractorBase):
    """An mmpretrain ``ImageClassifier`` with a pooling neck (e.g. the twins' ``JudgeCNN``), rebuilt from the config
    that ``tools/train.py`` stores in the checkpoint ``feature_extractor_weights_path``: ``'pool'`` = the neck's
    output, ``'spatial'`` = the first 7 channels of the backbone's last map, ``'logits'`` = the head's logits."""

    #: its classes are the dataset's, so its accuracy against the samples' conditioning labels is meaningful
    judges_labels = True

    def __init__(self, name: str, features_list: Sequence[str], feature_extractor_weights_path: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__(name, list(features_list))
        checkpoint = feature_extractor_weights_path
        if checkpoint is None or not osp.isfile(checkpoint):
            raise ExtractorError(f'judge checkpoint {checkpoint} does not exist; train one with tools/train.py '
                                 'configs/generation_judge/judge-cnn-nano_1xb64-20e_shapes-32px.py.')
        state = load_checkpoint_file(checkpoint, map_location='cpu')
        cfg_text = state.get('meta', {}).get('cfg') if isinstance(state, dict) else None
        if not cfg_text or 'state_dict' not in state:
            raise ExtractorError(f'{checkpoint} holds no config in its meta or no state_dict; give a checkpoint '
                                 'written by tools/train.py (work_dirs/<config>/epoch_N.pth).')
        self.model = self._build(Config.fromstring(cfg_text, '.py'), checkpoint)
        self.model.load_state_dict(state['state_dict'])
        self.model.eval()

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

    @staticmethod
    def get_provided_features_list() -> Tuple[str, ...]:
        return 'pool', 'spatial', 'logits'

    @staticmethod
    def get_default_feature_layer_for_metric(metric: str) -> str:
        return dict(isc='logits', fid='pool', kid='pool', prc='pool', sfid='spatial')[metric]

    @staticmethod
    def can_be_compiled() -> bool:
        return False

    @staticmethod
    def get_dummy_input_for_compile() -> Tensor:
        return torch.zeros(1, 3, 32, 32, dtype=torch.uint8)

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        # LoadImageFromFile gives BGR; the data preprocessor converts back (to_rgb) and normalises
        inputs = self.model.data_preprocessor(dict(inputs=x.flip(1)), False)['inputs']
        maps = self.model.extract_feat(inputs, stage='backbone')
        pooled = self.model.neck(maps)
        features = dict(pool=pooled[-1].flatten(1), spatial=_adm_spatial(maps[-1]), logits=self.model.head(pooled))
        return tuple(features[name].float() for name in self.features_list)


for _name, _cls in ((INCEPTION, InceptionADM), (JUDGE, JudgeExtractor)):
    if _name not in _registry.FEATURE_EXTRACTORS_REGISTRY:
        _tf.register_feature_extractor(_name, _cls)

#: ``--extractor`` kinds: the registered name and whether a weights path is required
EXTRACTOR_KINDS: Dict[str, Tuple[str, bool]] = dict(inception=(INCEPTION, False), judge=(JUDGE, True))
METRIC_LAYERS = dict(pool='fid', spatial='sfid', logits='isc')


def build_extractor(spec: str, device: str = 'cpu') -> '_tf.FeatureExtractorBase':
    """``'judge:CKPT'``, ``'inception:WEIGHTS'`` (torch-fidelity's TF-Inception file) or ``'inception'`` (that file,
    downloaded by torch-fidelity into the torch hub cache) as a torch-fidelity extractor on ``device``, asked for the
    features of :class:`ImageFeatures`."""
    kind, _, path = spec.partition(':')
    if kind not in EXTRACTOR_KINDS or (EXTRACTOR_KINDS[kind][1] and not path):
        raise ExtractorError(f'--extractor must be judge:CKPT, inception:WEIGHTS or inception, got {spec!r}.')
    name = EXTRACTOR_KINDS[kind][0]
    if kind == 'inception' and path and not osp.isfile(path):
        raise ExtractorError(f'Inception weights {path} do not exist: copy torch-fidelity\'s {INCEPTION_WEIGHTS_FILE} '
                             f'({INCEPTION_WEIGHTS_URL}) there.')
    cls = _registry.FEATURE_EXTRACTORS_REGISTRY[name]
    layers = [cls.get_default_feature_layer_for_metric(metric) for metric in METRIC_LAYERS.values()]
    try:
        extractor = cls(name, layers, feature_extractor_weights_path=path or None, verbose=False)
    except RuntimeError as error:
        if kind != 'inception':
            raise
        # load_state_dict of a file that is not the library's Inception (e.g. torchvision's)
        raise ExtractorError(f'{path} is not torch-fidelity\'s Inception-v3 state dict ({INCEPTION_WEIGHTS_FILE}): '
                             f'{str(error).splitlines()[0]}') from error
    return extractor.requires_grad_(False).eval().to(device)


class _ImageArray(Dataset):
    """uint8 (N, H, W, 3) RGB images as uint8 (3, H, W) tensors, what torch-fidelity's extractors read."""

    def __init__(self, images: np.ndarray) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.images[index])).permute(2, 0, 1)


def extract_features(extractor: '_tf.FeatureExtractorBase', images: np.ndarray,
                     batch_size: int = 100) -> ImageFeatures:
    """:class:`ImageFeatures` of all ``images`` (N, H, W, 3) uint8 through torch-fidelity's batched extraction (on
    the extractor's device; the features come back on the CPU)."""
    cuda = next(extractor.parameters()).is_cuda
    features = torch_fidelity('utils').get_featuresdict_from_dataset(_ImageArray(images), extractor, batch_size,
                                                                    cuda, True, False)
    layers = {field: type(extractor).get_default_feature_layer_for_metric(metric)
              for field, metric in METRIC_LAYERS.items()}
    return ImageFeatures(**{field: features[layer] for field, layer in layers.items()})
