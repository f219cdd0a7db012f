"""Bad input to the command-line tools ends with a message that says what to change, not a traceback."""
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, List

import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image

from mmcausal.models.layers import BackboneConfigError, ImageBatchError
from mmcausal.utils import DatasetNotFoundError, check_dataset_paths
from mmcausal.utils.dataset_check import DatasetFormatError
from mmcausal.utils.error_report import LAST_LINE_LIMIT, one_line, report_lines, user_errors_end_in_one_line
from mmcausal.utils.errors import ConfigError, UserInputError
from mmcausal.utils.user_errors import find_user_error
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
CLS = 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
DET = 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py'
DEFOCUS = 'configs/defocus/defocus-vit-nano-p8_1xb32-45e_shapes-64px.py'
DISTILLATION = 'configs/cait/cait-nano-p16_dist_1xb64-150e_shapes-64px.py'


def _run(*args: str) -> subprocess.CompletedProcess:
    return run_python([sys.executable, *args], cwd=ROOT, timeout=300)


@pytest.mark.parametrize('config,loader', [(CLS, 'train_dataloader'), (DET, 'train_dataloader')])
def test_missing_dataset_names_the_path_and_the_fix(config, loader, tmp_path):
    cfg = Config.fromfile(str(ROOT / config))
    cfg[loader].dataset.data_root = str(tmp_path / 'absent')
    with pytest.raises(DatasetNotFoundError, match='absent.*data_root=PATH'):
        check_dataset_paths(cfg, (loader, ))


def test_wrapped_dataset_is_checked(tmp_path):
    cfg = Config(dict(train_dataloader=dict(dataset=dict(
        type='RepeatDataset', times=2, dataset=dict(type='CocoDataset', data_root=str(tmp_path),
                                                    ann_file='annotations/x.json')))))
    with pytest.raises(DatasetNotFoundError, match='annotations/x.json'):
        check_dataset_paths(cfg, ('train_dataloader', ))


# ---------------------------------------------------------------------------------------------------------------
# One line for every error that comes from the user's config, data or checkpoint.
# ---------------------------------------------------------------------------------------------------------------
SEG = 'configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py'
VL_SEG = 'configs/vision_llama/upernet_vision-llama-nano-p8_1xb8-400i_shapes-64x64.py'
VL_CLS = 'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py'
VL_DET = 'configs/vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-36e_shapes-128px.py'


def _tool(name: str):
    """``tools/<name>.py`` as a module (its ``main(argv)`` runs in this process)."""
    spec = importlib.util.spec_from_file_location(f'mmcausal_tool_{name}', ROOT / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def tools():
    return dict(train=_tool('train'), test=_tool('test'))


@pytest.fixture(autouse=True)
def fresh_loggers():
    """A Runner names its logger after the config and the second it started, so two in-process runs of one
    config within a second share it, and its stream handler bound to the previous test's (closed) captured
    stdout: forget the loggers of earlier tests."""
    from mmengine.logging import MMLogger
    MMLogger._instance_dict.clear()


def _small_data(root: Path, kind: str) -> Path:
    """A few images of the shapes data in the ``kind`` layout (``imagenet`` / ``ade20k`` / ``coco``)."""
    from mmcausal.datasets.shapes import make_ade20k_like, make_coco_like, make_imagenet_like
    path = root / kind
    {'imagenet': lambda: make_imagenet_like(str(path), num_train_per_class=2, num_val_per_class=1),
     'ade20k': lambda: make_ade20k_like(str(path), num_train=4, num_val=2),
     'coco': lambda: make_coco_like(str(path), num_train=4, num_val=2)}[kind]()
    return path


def _data_options(config: str, root: Path) -> List[str]:
    options = [f'{loader}.dataset.data_root={root}' for loader in ('train_dataloader', 'val_dataloader',
                                                                  'test_dataloader')]
    if 'mask-rcnn' in config:
        options += [f'{evaluator}.ann_file={root}/annotations/instances_val2017.json'
                    for evaluator in ('val_evaluator', 'test_evaluator')]
    # Should a case not fail, it trains one short epoch / a few iterations instead of the whole schedule.
    options += ['train_cfg.max_iters=2', 'train_cfg.val_interval=2'] if 'upernet' in config else \
        ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']
    return options + ['train_dataloader.num_workers=1', 'val_dataloader.num_workers=0',
                      'test_dataloader.num_workers=0', 'val_dataloader.persistent_workers=False',
                      'test_dataloader.persistent_workers=False']


def _options(*options: str) -> Callable[[Path, Path], List[str]]:
    """A case that only adds command-line arguments (``{work}`` is replaced by the work dir)."""
    return lambda root, work: [option.format(work=work) for option in options]


def _edits(change: Callable[[Path], object], *options: str) -> Callable[[Path, Path], List[str]]:
    """A case that damages the data under its root with ``change(root)`` (then adds ``options``)."""
    def prepare(root: Path, work: Path) -> List[str]:
        change(root)
        return list(options)
    return prepare


def _rewrite_json(path: Path, change: Callable[[dict], None]) -> None:
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))


def _first(folder: Path, pattern: str) -> Path:
    return sorted(folder.rglob(pattern))[0]


def _mark_label(path: Path, value: int) -> None:
    label = np.asarray(Image.open(path)).copy()
    label[:4, :4] = value
    Image.fromarray(label).save(path)


def _checkpoint(content: Callable[[], bytes], *options: str) -> Callable[[Path, Path], List[str]]:
    """A ``tools/test.py`` case: the checkpoint argument is a file holding ``content()``."""
    def prepare(root: Path, work: Path) -> List[str]:
        path = work.parent / 'model.pth'
        path.write_bytes(content())
        return [str(path), *options]
    return prepare


def _saved(obj: object, keep: int = -1) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()[:keep] if keep > 0 else buffer.getvalue()


def _model_state(config: str, part: str = '') -> dict:
    """The ``state_dict`` of the model of ``config`` (only the keys under ``part.``, without it, if given)."""
    from mmengine.registry import MODELS, DefaultScope
    cfg = Config.fromfile(str(ROOT / config))
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        state = MODELS.build(cfg.model).state_dict()
    return {key[len(part) + 1:]: value for key, value in state.items() if key.startswith(part + '.')} if part else state


def _with_checkpoint(state: Callable[[], dict], *options: str) -> Callable[[Path, Path], List[str]]:
    """A case whose ``options`` name (as ``{ckpt}``) a checkpoint file holding ``state()`` as its state dict."""
    def prepare(root: Path, work: Path) -> List[str]:
        path = work.parent / 'other.pth'
        path.write_bytes(_saved({'state_dict': state()}))
        return [option.format(ckpt=path) for option in options]
    return prepare


def _then(change: Callable[[Path], object],
          prepare: Callable[[Path, Path], List[str]]) -> Callable[[Path, Path], List[str]]:
    """A case that damages the data with ``change(root)``, then prepares as ``prepare``."""
    def both(root: Path, work: Path) -> List[str]:
        change(root)
        return prepare(root, work)
    return both


PRETRAINED_BACKBONE = ('model.backbone.init_cfg.type=Pretrained', 'model.backbone.init_cfg.checkpoint={ckpt}')


def _work_dir_is_a_file(root: Path, work: Path) -> List[str]:
    work.write_text('not a directory\n')
    return []


def _listed_images(root: Path, split: str) -> None:
    """An mmseg ``ann_file`` (``root/train.txt``) listing the stems of the ``split`` images."""
    (root / 'train.txt').write_text(''.join(f'{path.stem}\n' for path in sorted((root / 'images' / split).glob('*'))))


def _resized(path: Path, size: tuple) -> None:
    Image.open(path).resize(size, Image.NEAREST).save(path)


COCO_TRAIN = 'annotations/instances_train2017.json'
# (id, tool, config, data layout, prepare(data_root, work_dir) -> extra arguments, exit status, message pattern).
# Exit status 2: argparse usage errors; 1: every other user error, one line ``<ErrorType>: <what to change>``.
CATALOGUE = [
    # --- configs ---
    ('config-missing', 'train', 'configs/illama/nope.py', None, _options(), 2, 'config file not found'),
    ('config-syntax-error', 'train', None, None, None, 1, r'ConfigError: .*bad\.py could not be loaded'),
    ('cfg-options-unmergeable', 'train', CLS, 'imagenet', _options('model.backbone.img_size.height=8'), 1,
     'ConfigError: --cfg-options could not be merged'),
    ('cls-unknown-arch', 'train', CLS, 'imagenet', _options('model.backbone.arch=huge'), 1,
     r"BackboneConfigError: Unknown arch 'huge'; choose one of"),
    ('cls-bad-out-type', 'train', CLS, 'imagenet', _options('model.backbone.out_type=bogus'), 1,
     r"BackboneConfigError: Unknown out_type 'bogus'"),
    ('cls-unknown-type', 'train', CLS, 'imagenet', _options('model.backbone.type=NoSuchBackbone'), 1,
     r"ConfigError: the config names type 'NoSuchBackbone', which is not registered"),
    ('seg-vision-llama-unknown-arch', 'train', VL_SEG, 'ade20k', _options('model.backbone.arch=huge'), 1,
     r"BackboneConfigError: Unknown arch 'huge'"),
    ('cls-unknown-mask-mode', 'train', CLS, 'imagenet', _options('model.backbone.mask_mode=sideways'), 1,
     r"BackboneConfigError: Unknown ILLaMA mask_mode 'sideways'; choose one of"),
    ('det-vision-llama-negative-window', 'train', VL_DET, 'coco', _options('model.backbone.window_size=-1'), 1,
     r'BackboneConfigError: window_size must be >= 0'),
    ('det-out-indices', 'train', DET, 'coco', _options('model.backbone.out_indices=[99]'), 1,
     r'BackboneConfigError: out_indices \[99\] out of range for 4 blocks'),
    ('hook-soft-mask-start', 'train', CLS, 'imagenet', _options('custom_hooks.0.start=2.0'), 1,
     r'ConfigValueError: SoftMaskHook: start must be in \[0, 1\], got 2\.0'),
    ('optimizer-layer-decay-rate', 'train', CLS, 'imagenet',
     _options('optim_wrapper.constructor=LayerDecayOptimWrapperConstructor',
              'optim_wrapper.paramwise_cfg.layer_decay_rate=1.5'), 1,
     r'ConfigValueError: LayerDecayOptimWrapperConstructor: paramwise_cfg\.layer_decay_rate must be in \(0, 1\], '
     r'got 1\.5'),
    # --- settings a component refuses when it is built (any component the registry builds) ---
    ('scheduler-start-factor-above-one', 'train', CLS, 'imagenet', _options('param_scheduler.0.start_factor=1.5'), 1,
     'ConfigValueError: LinearLR refuses the settings the config gives it: Starting multiplicative factor'),
    ('defocus-label-smoothing-above-one', 'train', DEFOCUS, 'imagenet',
     _options('model.head.loss.label_smooth_val=1.5'), 1,
     'ConfigValueError: LabelSmoothLoss refuses the settings the config gives it: LabelSmoothLoss accepts'),
    ('defocus-ema-momentum-above-one', 'train', DEFOCUS, 'imagenet', _options('custom_hooks.1.momentum=1.5'), 1,
     r'ConfigValueError: \w+ refuses the settings the config gives it: momentum must be in range'),
    ('defocus-aux-weight-above-one', 'train', DEFOCUS, 'imagenet', _options('model.head.aux_weight=1.5'), 1,
     r'ConfigValueError: DefocusClsHead aux_weight .* must be in \[0, 1\]'),
    ('cfg-batch-size-zero', 'train', CLS, 'imagenet', _options('train_dataloader.batch_size=0'), 1,
     r'ConfigValueError: train_dataloader\.batch_size must be an integer >= 1, got 0'),
    ('det-negative-workers', 'train', DET, 'coco', _options('train_dataloader.num_workers=-2'), 1,
     r'ConfigValueError: train_dataloader\.num_workers must be an integer >= 0, got -2'),
    ('cls-negative-drop-rate', 'train', CLS, 'imagenet', _options('model.backbone.drop_rate=-0.1'), 1,
     r'ConfigValueError: model\.backbone\.drop_rate is a fraction and must be in \[0, 1\], got -0\.1'),
    ('cls-soft-mask-rate-above-one', 'train', CLS, 'imagenet', _options('model.backbone.soft_mask_rate=1.5'), 1,
     r'ConfigValueError: model\.backbone\.soft_mask_rate is a fraction and must be in \[0, 1\], got 1\.5'),
    ('distillation-teacher-not-trained', 'train', DISTILLATION, 'imagenet', _options(), 1,
     r'UserInputError: not found: work_dirs/resnet18-nano-w16_1xb64-60e_shapes-64px/epoch_60\.pth The teacher '
     r'checkpoint does not exist: train the teacher config first, or set model\.teacher\.checkpoint'),
    ('distillation-teacher-of-another-model', 'train', DISTILLATION, 'imagenet',
     _with_checkpoint(lambda: _model_state(CLS), 'model.teacher.checkpoint={ckpt}'), 1,
     r'CheckpointMismatchError: missing: backbone\.conv1\.weight.* The teacher checkpoint does not fit the teacher '
     r'\(ImageClassifier\): give the weights of model\.teacher\.config, or its config\.'),
    ('seg-dropout-ratio-above-one', 'train', SEG, 'ade20k', _options('model.decode_head.dropout_ratio=1.5'), 1,
     r'ConfigValueError: model\.decode_head\.dropout_ratio is a fraction and must be in \[0, 1\], got 1\.5'),
    ('seg-unknown-norm-type', 'train', SEG, 'ade20k', _options('model.decode_head.norm_cfg.type=BN2'), 1,
     r"ConfigError: a layer config \(norm_cfg, conv_cfg, \.\.\.\) names type 'BN2', which is not registered in "
     'mmseg'),
    ('det-negative-learning-rate', 'train', DET, 'coco', _options('optim_wrapper.optimizer.lr=-0.001'), 1,
     r'ConfigValueError: the optimizer refuses learning rate = -0\.001 \(torch\.optim\); set a valid value in '
     r'optim_wrapper\.optimizer'),
    ('work-dir-is-a-file', 'train', CLS, 'imagenet', _work_dir_is_a_file, 1,
     r'WorkDirError: the work dir .*work. cannot be a directory: it is a file'),
    # --- a Runner loop without some of its parts ---
    ('test-without-test-dataloader', 'test', CLS, 'imagenet', _checkpoint(lambda: _saved({}), 'test_dataloader=None'),
     1, r'ConfigError: the test loop needs test_dataloader, which is None\. Set it in the config \(test_dataloader = '
     r'val_dataloader\)\.'),
    ('seg-test-without-test-loop', 'test', SEG, 'ade20k',
     _checkpoint(lambda: _saved({}), 'test_dataloader=None', 'test_cfg=None', 'test_evaluator=None'), 1,
     r'ConfigError: the test loop needs test_dataloader, test_cfg and test_evaluator, which are None\. Set them in the '
     r"config \(test_dataloader = val_dataloader; test_cfg = dict\(type='TestLoop'\); test_evaluator = "
     r'val_evaluator\)\.'),
    ('det-test-without-test-evaluator', 'test', DET, 'coco', _checkpoint(lambda: _saved({}), 'test_evaluator=None'), 1,
     r'ConfigError: the test loop needs test_evaluator, which is None\. Set it in the config \(test_evaluator = '
     r'val_evaluator\)\.'),
    ('train-without-val-dataloader', 'train', CLS, 'imagenet', _options('val_dataloader=None'), 1,
     r'ConfigError: the validation loop needs val_dataloader, which is None\. Set it in the config \(val_dataloader = '
     r'test_dataloader\), or val_cfg and val_evaluator to None to run without it\.'),
    ('seg-train-without-train-cfg', 'train', SEG, 'ade20k', _options('train_cfg=None'), 1,
     r'ConfigError: the training loop needs train_cfg, which is None\. Set it in the config\.'),
    # --- checkpoints ---
    ('resume-missing', 'train', CLS, 'imagenet', _options('--resume', '{work}/missing.pth'), 2,
     'checkpoint to resume from not found'),
    ('test-truncated-checkpoint', 'test', CLS, 'imagenet', _checkpoint(lambda: _saved({'w': torch.zeros(64)}, 900)),
     1, 'CheckpointFormatError: .*not a PyTorch checkpoint'),
    ('test-not-a-checkpoint', 'test', SEG, 'ade20k', _checkpoint(lambda: b'just text\n'), 1,
     'CheckpointFormatError: .*not a PyTorch checkpoint'),
    ('test-checkpoint-holds-a-tensor', 'test', CLS, 'imagenet', _checkpoint(lambda: _saved(torch.zeros(3))), 1,
     r"CheckpointFormatError: '.*model\.pth' holds a Tensor, not a dict of weights"),
    ('test-checkpoint-holds-a-list', 'test', DEFOCUS, 'imagenet', _checkpoint(lambda: _saved([torch.zeros(3)])), 1,
     r"CheckpointFormatError: '.*model\.pth' holds a list, not a dict of weights"),
    ('test-checkpoint-missing', 'test', CLS, 'imagenet', _options('{work}/missing.pth'), 2, 'checkpoint not found'),
    ('pretrained-missing', 'train', VL_CLS, 'imagenet',
     _options('model.backbone.init_cfg._delete_=True', 'model.backbone.init_cfg.type=Pretrained',
              'model.backbone.init_cfg.checkpoint={work}/mae.pth', 'model.backbone.init_cfg.prefix=backbone.'), 1,
     r'PretrainedNotFoundError: \(or fine-tune a whole trained model with --cfg-options load_from=PATH: .*\) '
     r'model\.backbone\.init_cfg\.checkpoint = .*mae\.pth. does not exist'),
    ('test-checkpoint-of-another-model', 'test', CLS, 'imagenet',
     _checkpoint(lambda: _saved({'state_dict': {'conv.weight': torch.zeros(8, 3, 3, 3)}})), 1,
     r'CheckpointMismatchError: not loaded: .* \(to load it partly on purpose: --allow-partial-load\) the checkpoint '
     r'loads 0 of the \d+ weights of ImageClassifier\. It is a checkpoint of another model: use one of this model\.'),
    ('test-checkpoint-of-another-family', 'test', CLS, 'imagenet',
     _checkpoint(lambda: _saved({'state_dict': _model_state('configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py')})),
     1, r'CheckpointMismatchError: not loaded: backbone\..* its keys: .* \(to load it partly on purpose: '
     r'--allow-partial-load\) the checkpoint loads \d+ of the \d+ weights of ImageClassifier\. It is a checkpoint of '
     r'another model: use one of this model\.'),
    ('test-backbone-only-checkpoint', 'test', SEG, 'ade20k',
     _checkpoint(lambda: _saved({'state_dict': _model_state(SEG, 'backbone')})), 1,
     r"CheckpointMismatchError: .*weights of EncoderDecoder\. It holds only the 'backbone' of this model: load it "
     r"into model\.backbone with init_cfg=dict\(type='Pretrained', checkpoint=\.\.\.\)\."),
    ('test-classifier-without-its-head', 'test', CLS, 'imagenet',
     _checkpoint(lambda: _saved({'state_dict': {key: value for key, value in _model_state(CLS).items()
                                               if not key.startswith('head.')}})), 1,
     r'CheckpointMismatchError: not loaded: head\..*; loaded: only backbone the checkpoint loads none of the weights '
     r'of ImageClassifier\.head: evaluating would use it as randomly initialised.*--allow-partial-load'),
    ('load-from-another-family', 'train', DET, 'coco', _with_checkpoint(lambda: _model_state(CLS), 'load_from={ckpt}'),
     1, r'CheckpointMismatchError: .*the checkpoint loads \d+ of the \d+ weights of MaskRCNN\. It is a checkpoint of '
     'another model'),
    ('pretrained-whole-model-into-backbone', 'train', CLS, 'imagenet',
     _with_checkpoint(lambda: _model_state(CLS), *PRETRAINED_BACKBONE), 1,
     r"CheckpointMismatchError: .*weights of ILLaMA\. Its keys carry the prefix 'backbone\.': load it with "
     r"init_cfg=dict\(type='Pretrained', checkpoint=\.\.\., prefix='backbone\.'\)\."),
    ('pretrained-prefix-of-nothing', 'train', CLS, 'imagenet',
     _with_checkpoint(lambda: _model_state(CLS, 'backbone'), *PRETRAINED_BACKBONE,
                      'model.backbone.init_cfg.prefix=backbone.'), 1,
     r"CheckpointMismatchError: no key of the Pretrained checkpoint starts with prefix='backbone\.'"),
    ('load-from-missing', 'train', DET, 'coco', _options('load_from={work}/x.pth'), 1,
     r'PretrainedNotFoundError: load_from = .*x\.pth. does not exist'),
    # --- datasets: classification (mmpretrain) ---
    ('cls-dataset-missing', 'train', CLS, 'imagenet', _options('train_dataloader.dataset.data_root={work}/no'), 1,
     r'DatasetNotFoundError: train_dataloader: .*does not exist'),
    ('cls-label-out-of-range', 'train', CLS, 'imagenet',
     _edits(lambda root: (root / 'meta/train.txt').write_text('circle/circle_0.JPEG 7\n')), 1,
     r'DatasetFormatError: train_dataloader: .*train\.txt. line 1 has label 7, outside 0\.\.3'),
    ('cls-malformed-annotation', 'train', CLS, 'imagenet',
     _edits(lambda root: (root / 'meta/train.txt').write_text('circle/circle_0.JPEG\n')), 1,
     r'DatasetFormatError: train_dataloader: .*line 1 is .circle/circle_0\.JPEG.'),
    ('cls-empty-annotation-file', 'train', CLS, 'imagenet',
     _edits(lambda root: (root / 'meta/train.txt').write_text('')), 1,
     r'DatasetFormatError: ImageNet .* has no samples'),
    ('cls-folder-class-mismatch', 'train', CLS, 'imagenet',
     _edits(lambda root: [(root / 'meta/train.txt').unlink(), shutil.rmtree(root / 'train/triangle')]), 1,
     'DatasetFormatError: the image folder has 3 class subfolders but metainfo.classes names 4 classes'),
    ('cls-corrupt-image', 'train', CLS, 'imagenet',
     _edits(lambda root: _first(root / 'train', '*.JPEG').write_bytes(b'not a jpeg')), 1,
     r'DatasetFormatError: image .*\.JPEG could not be decoded'),
    ('cls-image-missing', 'train', CLS, 'imagenet', _edits(lambda root: _first(root / 'train', '*.JPEG').unlink()), 1,
     r'DatasetFormatError: the dataset names a file that does not exist: .*\.JPEG'),
    ('cls-image-missing-in-process', 'train', CLS, 'imagenet',
     _edits(lambda root: _first(root / 'train', '*.JPEG').unlink(), 'train_dataloader.num_workers=0',
            'train_dataloader.persistent_workers=False'), 1,
     r'DatasetFormatError: the dataset names a file that does not exist: .*\.JPEG'),
    ('cls-empty-image', 'train', CLS, 'imagenet',
     _edits(lambda root: _first(root / 'train', '*.JPEG').write_bytes(b'')), 1,
     r'DatasetFormatError: image .*\.JPEG is empty\. Replace it or drop it from the annotations\.'),
    ('test-empty-image', 'test', CLS, 'imagenet',
     _then(lambda root: _first(root / 'val', '*.JPEG').write_bytes(b''),
           _checkpoint(lambda: _saved({'state_dict': _model_state(CLS)}), 'test_dataloader.num_workers=1')), 1,
     r'DatasetFormatError: image .*/val/.*\.JPEG is empty\. Replace it or drop it from the annotations\.'),
    ('cls-empty-image-in-process', 'train', CLS, 'imagenet',
     _edits(lambda root: _first(root / 'train', '*.JPEG').write_bytes(b''), 'train_dataloader.num_workers=0',
            'train_dataloader.persistent_workers=False'), 1, r'DatasetFormatError: image .*\.JPEG is empty'),
    ('cls-persistent-workers-without-workers', 'train', CLS, 'imagenet', _options('train_dataloader.num_workers=0'),
     1, 'ConfigError: a dataloader has persistent_workers=True but num_workers=0'),
    # --- datasets: semantic segmentation (mmseg) ---
    ('seg-image-without-map', 'train', SEG, 'ade20k',
     _edits(lambda root: _first(root / 'annotations/training', '*.png').unlink()), 1,
     r'DatasetFormatError: train_dataloader: 1 image\(s\) in .* have no segmentation map'),
    ('seg-map-of-another-size', 'train', SEG, 'ade20k',
     _edits(lambda root: _resized(_first(root / 'annotations/training', '*.png'), (48, 64))), 1,
     r"DatasetFormatError: train_dataloader: segmentation map .*\.png' is 48x64 \(WxH\) but its image .*\.jpg' is "
     '64x64'),
    ('seg-listed-map-of-another-size', 'train', SEG, 'ade20k',
     _edits(lambda root: [_listed_images(root, 'training'),
                          _resized(_first(root / 'annotations/training', '*.png'), (48, 64))],
            'train_dataloader.dataset.ann_file=train.txt'), 1,
     r"DatasetFormatError: train_dataloader: segmentation map .*\.png' is 48x64 \(WxH\) but its image .*\.jpg' is "
     '64x64'),
    ('seg-listed-image-missing', 'train', SEG, 'ade20k',
     _edits(lambda root: [_listed_images(root, 'training'), _first(root / 'images/training', '*.jpg').unlink()],
            'train_dataloader.dataset.ann_file=train.txt'), 1,
     r"DatasetFormatError: train_dataloader: '.*train\.txt' lists 1 image\(s\) that .* does not have"),
    ('seg-empty-map', 'train', SEG, 'ade20k',
     _edits(lambda root: _first(root / 'annotations/training', '*.png').write_bytes(b'')), 1,
     r"DatasetFormatError: train_dataloader: .*\.png' is empty"),
    ('seg-truncated-map-in-process', 'train', SEG, 'ade20k',
     _edits(lambda root: [path.write_bytes(path.read_bytes()[:120])
                          for path in (root / 'annotations/training').glob('*.png')],
            'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False'), 1,
     r'DatasetFormatError: segmentation map .*\.png is truncated'),
    ('seg-truncated-map', 'train', SEG, 'ade20k',
     _edits(lambda root: [path.write_bytes(path.read_bytes()[:120])
                          for path in (root / 'annotations/training').glob('*.png')]), 1,
     r'DatasetFormatError: segmentation map .*\.png is truncated\. Replace it'),
    ('seg-empty-image-folder', 'train', SEG, 'ade20k',
     _edits(lambda root: [path.unlink() for path in (root / 'images/training').glob('*.jpg')]), 1,
     r'DatasetFormatError: BaseSegDataset .* has no samples'),
    ('seg-unknown-class-names', 'train', SEG, 'ade20k', _options('train_dataloader.dataset.type=ADE20KDataset'), 1,
     r"DatasetFormatError: train_dataloader: metainfo\.classes \['background', 'circle'.* are not classes of "
     'ADE20KDataset'),
    ('seg-label-out-of-range', 'train', SEG, 'ade20k',
     _edits(lambda root: [_mark_label(path, 40) for path in (root / 'annotations/training').glob('*.png')]), 1,
     r'DatasetFormatError: an annotation has label 39, outside the classes the model predicts'),
    # --- datasets: detection (mmdet, COCO json) ---
    ('det-truncated-json', 'train', DET, 'coco', _edits(lambda root: (root / COCO_TRAIN).write_text('{"images": [')),
     1, r'DatasetFormatError: train_dataloader: annotation file .*instances_train2017\.json. is truncated'),
    ('det-empty-json', 'train', DET, 'coco', _edits(lambda root: (root / COCO_TRAIN).write_text('')), 1,
     r'DatasetFormatError: train_dataloader: annotation file .* is empty'),
    ('det-invalid-json', 'train', DET, 'coco', _edits(lambda root: (root / COCO_TRAIN).write_text('{"a": [1,, 2]}')),
     1, r'DatasetFormatError: an annotation file is not valid JSON \(Expecting value'),
    ('det-no-annotations', 'train', DET, 'coco',
     _edits(lambda root: _rewrite_json(root / COCO_TRAIN, lambda content: content.update(annotations=[]))), 1,
     r'DatasetFormatError: CocoDataset .* has no samples \(filter_cfg\.filter_empty_gt'),
    ('det-unknown-class-name', 'train', DET, 'coco',
     _options("train_dataloader.dataset.metainfo.classes=['circle','crossX','square','triangle']"), 1,
     r"DatasetFormatError: train_dataloader: metainfo\.classes \['crossX'\] are not categories of CocoDataset"),
    ('det-test-unknown-class-name', 'test', DET, 'coco',
     _checkpoint(lambda: _saved({}), "test_dataloader.dataset.metainfo.classes=['circle','cross','sq']"), 1,
     r"DatasetFormatError: test_dataloader: metainfo\.classes \['sq'\] are not categories"),
]


def _argv(case: tuple, tmp_path: Path) -> List[str]:
    """The command line of ``case``: config, its positional / flag arguments, work dir, ``--cfg-options``."""
    _, _, config, data, prepare, _, _ = case
    work = tmp_path / 'work'
    if config is None:  # a config file with a syntax error
        (tmp_path / 'bad.py').write_text('model = dict(type="ILLaMA",\n')
        return [str(tmp_path / 'bad.py'), '--work-dir', str(work)]
    root = _small_data(tmp_path, data) if data else tmp_path
    extra = prepare(root, work)
    arguments = [a for a in extra if a.startswith('-') or '=' not in a]
    options = [a for a in extra if a not in arguments]
    path = ROOT / config
    return [str(path) if path.exists() else config, *arguments, '--work-dir', str(work),
            '--cfg-options', *_data_options(config, root), *options]


def _assert_resume_unspoilt(work: Path) -> None:
    """Nothing a later ``--resume`` would pick up: no ``last_checkpoint``, no checkpoint file."""
    from mmengine.runner import find_latest_checkpoint
    assert not work.exists() or (find_latest_checkpoint(str(work)) is None
                                 and not list(work.rglob('*.pth')) and not list(work.rglob('last_checkpoint')))


#: Cases that only fail once training has started (the first batch): end-to-end.
TRAINING_CASES = ('cls-corrupt-image', 'cls-image-missing', 'seg-label-out-of-range', 'cls-image-missing-in-process',
                  'seg-truncated-map-in-process', 'cls-empty-image', 'cls-empty-image-in-process', 'seg-truncated-map')


@pytest.mark.parametrize('case', [
    pytest.param(case, id=case[0], marks=[pytest.mark.e2e] if case[0] in TRAINING_CASES else [])
    for case in CATALOGUE])
def test_bad_input_ends_in_one_line(case, tools, tmp_path, capsys, single_thread):
    """Each bad input ends the tool with one short last line that says what to change (its details, such as key
    lists, on the lines above it), the right exit status, and a work dir that a later ``--resume`` can use."""
    argv = _argv(case, tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        tools[case[1]].main(argv)
    code = exit_info.value.code
    stderr = capsys.readouterr().err
    # SystemExit(str) is printed to stderr by the interpreter with exit status 1; argparse prints and exits 2.
    status, last = (1, code) if isinstance(code, str) else (code, [ln for ln in stderr.splitlines() if ln.strip()][-1])
    details = getattr(exit_info.value, 'details', [])
    assert status == case[5], (status, last)
    error_type, _, rest = last.partition(': ')
    assert re.search(case[6], f'{error_type}: {" ".join([*details, rest])}'), [*details, last]
    assert '\n' not in last and len(last) <= LAST_LINE_LIMIT, last
    assert 'Traceback' not in last and 'Traceback' not in stderr
    assert stderr.rstrip().endswith('\n'.join(details))  # printed above the last line
    _assert_resume_unspoilt(tmp_path / 'work')


@pytest.mark.e2e
def test_fine_tuning_a_whole_model_skips_the_missing_backbone_file(tools, tmp_path, capsys, single_thread):
    """``load_from`` names a whole trained model (a released detector, say) and the config's backbone
    ``Pretrained`` file is absent: training runs from ``load_from``'s weights (lr 0 keeps them) instead of stopping
    on the backbone file, and says that it skipped it."""
    root, work, released = _small_data(tmp_path, 'imagenet'), tmp_path / 'work', tmp_path / 'released.pth'
    state = _model_state(CLS)
    torch.save({'state_dict': state}, released)
    tools['train'].main([str(ROOT / CLS), '--work-dir', str(work), '--cfg-options', *_data_options(CLS, root),
                         f'load_from={released}', 'optim_wrapper.optimizer.lr=0', 'train_cfg.val_interval=2',
                         *[option.format(ckpt=tmp_path / 'absent.pth') for option in PRETRAINED_BACKBONE]])
    assert re.search(r"model\.backbone\.init_cfg\.checkpoint = .*absent\.pth' does not exist: skipped",
                     capsys.readouterr().out)
    trained = torch.load(work / 'epoch_1.pth', map_location='cpu', weights_only=False)['state_dict']
    for key, value in state.items():
        torch.testing.assert_close(trained[key], value, rtol=0, atol=0, msg=key)


def test_catalogue_covers_three_libraries():
    configs = {case[2] for case in CATALOGUE}
    assert {CLS, SEG, DET} <= configs and len(CATALOGUE) >= 20


# --- what counts as a user error -------------------------------------------------------------------------------
def _wrapped_like_a_registry(error: Exception) -> Exception:
    """An error re-raised the way a builder wraps a constructor's error: same type, class name prepended."""
    try:
        try:
            raise error
        except Exception as inner:
            raise type(inner)(f'class `ILLaMA` in mmcausal/models/illama/backbone.py: {inner}')
    except Exception as outer:
        return outer


def test_user_error_is_found_behind_a_same_type_rewrap():
    found = find_user_error(_wrapped_like_a_registry(BackboneConfigError('Unknown arch')))
    assert isinstance(found, BackboneConfigError) and str(found) == 'Unknown arch'


def test_user_error_is_found_behind_an_explicit_cause():
    try:
        try:
            raise DatasetFormatError('bad file')
        except DatasetFormatError as inner:
            raise RuntimeError('building the dataloader failed') from inner
    except RuntimeError as outer:
        assert isinstance(find_user_error(outer), DatasetFormatError)


def test_a_bug_while_handling_a_user_error_keeps_its_traceback():
    def buggy():
        try:
            raise BackboneConfigError('Unknown arch')
        except BackboneConfigError:
            return None.attribute  # a bug in the error handling

    with pytest.raises(AttributeError):
        with user_errors_end_in_one_line(debug=False):
            buggy()


def test_plain_errors_are_not_user_errors():
    assert find_user_error(ValueError('x')) is None and find_user_error(KeyError('x')) is None
    assert find_user_error(IndexError('index 7 is out of bounds for dimension 0')) is None


def test_debug_lets_the_user_error_through():
    with pytest.raises(BackboneConfigError):
        with user_errors_end_in_one_line(debug=True):
            raise BackboneConfigError('Unknown arch')


def test_worker_reraise_is_reduced_to_the_original_message():
    """torch re-raises a worker's error with the worker's traceback text, whose last line names the type with its
    module; a message of several lines keeps its details."""
    error = DatasetFormatError('Caught DatasetFormatError in DataLoader worker process 0.\nOriginal Traceback '
                               '(most recent call last):\n  File "x.py", line 1, in f\n'
                               'mmcausal.utils.dataset_check.DatasetFormatError: bad file')
    assert report_lines(error) == ['DatasetFormatError: bad file']
    error = DatasetFormatError('Caught DatasetFormatError in DataLoader worker process 0.\nOriginal Traceback '
                               '(most recent call last):\nDatasetFormatError: keys: a, b\nfix the file.')
    assert report_lines(error) == ['keys: a, b', 'DatasetFormatError: fix the file.']


def test_a_long_message_keeps_what_to_change_on_a_short_last_line():
    """Any message too long for one line moves its leading sentences (and clauses ending in ';'), never text inside
    brackets, to the lines above, so that its end, what to change, is a short last line."""
    keys = ', '.join(f'backbone.layers.{i}.attn.qkv.weight' for i in range(6))
    error = ConfigError(f'the model has keys ({keys}; e.g. this. That) the file lacks. Its keys: {keys}; none match. '
                        'Check the config (e.g. model.type).')
    *details, last = report_lines(error)
    assert last == 'ConfigError: none match. Check the config (e.g. model.type).' and len(last) <= LAST_LINE_LIMIT
    assert details == [f'the model has keys ({keys}; e.g. this. That) the file lacks.', f'Its keys: {keys};']
    short = ConfigError('the value is wrong. Change it.')
    assert report_lines(short) == [one_line(short)] == ['ConfigError: the value is wrong. Change it.']


def test_library_user_errors_are_recognised():
    assert isinstance(find_user_error(KeyError('Foo is not in the mmpretrain::model registry. Please check')),
                      ConfigError)
    worker = AssertionError('Caught AssertionError in DataLoader worker process 1.\nOriginal Traceback (most '
                            'recent call last):\nAssertionError: failed to load image: data/x.jpg')
    assert 'data/x.jpg could not be decoded' in one_line(find_user_error(worker))


@pytest.mark.parametrize('settings,message', [(dict(lr=-1.0), 'learning rate = -1.0'),
                                              (dict(weight_decay=-0.1), 'weight_decay value = -0.1'),
                                              (dict(betas=(1.5, 0.9)), 'beta parameter at index 0 = 1.5')])
def test_settings_the_optimizer_refuses_are_user_errors(settings, message):
    with pytest.raises(ValueError) as error_info:
        torch.optim.AdamW([torch.zeros(1, requires_grad=True)], **settings)
    assert one_line(find_user_error(error_info.value)).startswith(f'ConfigValueError: the optimizer refuses {message} ')
    assert find_user_error(ValueError('Invalid padding value: 3')) is None


# --- the backbone's own input checks (in-process, no Runner) ----------------------------------------------------
@pytest.mark.parametrize('shape,message', [
    ((1, 3, 0, 64), 'empty image batch of shape \\(1, 3, 0, 64\\)'),
    ((1, 3, 64, 0), 'empty image batch'),
    ((1, 1, 64, 64), 'Expected images of shape \\(B, 3, H, W\\), got \\(1, 1, 64, 64\\)'),
    ((3, 64, 64), 'Expected images of shape'),
])
@pytest.mark.parametrize('backbone', ['ILLaMA', 'VisionLLaMA'])
def test_bad_image_batch_is_a_user_error(backbone, shape, message):
    from mmcausal.registry import MODELS
    model = MODELS.build(dict(type=backbone, arch=dict(embed_dims=32, num_layers=1, num_heads=2), img_size=64,
                              patch_size=16))
    with pytest.raises(ImageBatchError, match=message) as error_info:
        model(torch.zeros(shape))
    assert isinstance(error_info.value, UserInputError)


def test_unknown_arch_built_through_the_registry_is_a_user_error():
    from mmpretrain.registry import MODELS
    with pytest.raises(ValueError) as error_info:
        MODELS.build(dict(type='ImageClassifier', _scope_='mmpretrain', backbone=dict(type='ILLaMA', arch='huge')))
    assert 'Unknown arch' in ' '.join(report_lines(find_user_error(error_info.value)))


# --- through real processes: the exact command of the issue, and --debug -----------------------------------------
def test_cli_config_error_is_one_line_and_debug_shows_the_traceback(shapes_root, tmp_path):
    base = ['tools/train.py', CLS, '--cfg-options', 'model.backbone.arch=huge',
            f'train_dataloader.dataset.data_root={shapes_root}/imagenet',
            f'val_dataloader.dataset.data_root={shapes_root}/imagenet']
    commands = {'plain': base + ['--work-dir', str(tmp_path / 'a')],
                'debug': base + ['--work-dir', str(tmp_path / 'b'), '--debug']}
    results = {name: _run(*argv) for name, argv in commands.items()}
    plain, debug = results['plain'], results['debug']
    *_, detail, last = [line for line in plain.stderr.splitlines() if line.strip()]
    assert plain.returncode == 1 and 'Traceback' not in plain.stderr, plain.stderr[-3000:]
    assert detail == "Unknown arch 'huge';" and last.startswith('BackboneConfigError: choose one of')
    assert debug.returncode == 1 and 'Traceback (most recent call last)' in debug.stderr
    assert "Unknown arch 'huge'" in debug.stderr.splitlines()[-1]
    _assert_resume_unspoilt(tmp_path / 'a')


@pytest.mark.e2e
def test_resume_after_a_failed_start_begins_fresh(shapes_root, tools, tmp_path, capsys, single_thread):
    """A run that failed on bad input leaves nothing behind: ``--resume`` in the same work dir trains from
    scratch and saves a checkpoint that a second ``--resume`` continues from."""
    root = _small_data(tmp_path, 'imagenet')
    work = tmp_path / 'work'
    options = ['--cfg-options', *_data_options(CLS, root)]
    ann_file = root / 'meta' / 'train.txt'
    good = ann_file.read_text()
    ann_file.write_text('circle/circle_0.JPEG 9\n')
    with pytest.raises(SystemExit, match='DatasetFormatError'):
        tools['train'].main([str(ROOT / CLS), '--work-dir', str(work), *options])
    ann_file.write_text(good)
    tools['train'].main([str(ROOT / CLS), '--work-dir', str(work), '--resume', *options])
    assert (work / 'last_checkpoint').is_file() and (work / 'epoch_1.pth').is_file()
    tools['train'].main([str(ROOT / CLS), '--work-dir', str(work), '--resume', *options, 'train_cfg.max_epochs=2'])
    assert (work / 'epoch_2.pth').is_file()


def test_a_partial_load_on_purpose_is_evaluated(tools, tmp_path, capsys, single_thread):
    """``--allow-partial-load`` lets ``tools/test.py`` evaluate a checkpoint that the catalogue refuses."""
    case = next(case for case in CATALOGUE if case[0] == 'test-checkpoint-of-another-model')
    argv = _argv(case, tmp_path)
    tools['test'].main(argv[:2] + ['--allow-partial-load'] + argv[2:])
    captured = capsys.readouterr()
    assert 'accuracy/top1' in captured.out + captured.err


def test_a_bare_state_dict_is_evaluated_by_a_config_with_an_ema_hook(tools, tmp_path, capsys, single_thread):
    """``torch.save(model.state_dict())`` is a checkpoint too: ``tools/test.py`` evaluates it also where the config
    has mmpretrain's ``EMAHook``, which reads ``checkpoint['state_dict']`` (not a ``KeyError`` traceback)."""
    case = ('bare-state-dict', 'test', DEFOCUS, 'imagenet', _checkpoint(lambda: _saved(_model_state(DEFOCUS))), 0, '')
    tools['test'].main(_argv(case, tmp_path))
    captured = capsys.readouterr()
    assert 'accuracy/top1' in captured.out + captured.err


def test_only_a_components_own_refusal_is_a_settings_error():
    """A ``raise`` / ``assert`` of the component being built is a setting it refuses (one line); an error the
    interpreter raises in its constructor (a wrong unpacking) is a bug, and keeps its traceback."""
    from mmengine.registry import Registry
    registry = Registry('refusals')

    @registry.register_module()
    class Refuses:
        def __init__(self, rate: float) -> None:
            if rate > 1:
                raise ValueError(f'rate must be at most 1, got {rate}')

    @registry.register_module()
    class Buggy:
        def __init__(self) -> None:
            self.height, self.width = (64, 64, 64)

    def error_of(cfg: dict) -> BaseException:
        with pytest.raises(ValueError) as error:
            registry.build(cfg)
        return error.value

    found = find_user_error(error_of(dict(type='Refuses', rate=2)))
    assert str(found) == ('Refuses refuses the settings the config gives it: rate must be at most 1, got 2. Change '
                          'them in the config (or --cfg-options).')
    assert find_user_error(error_of(dict(type='Buggy'))) is None
