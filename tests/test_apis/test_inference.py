"""mmpretrain's, mmseg's and mmdet's own inferencers run every family's configs and checkpoints: the prediction
equals the model's ``test_step`` on the same image through the config's test pipeline; ``tools/demo/image_demo.py``
picks the inferencer from the config and writes the drawn prediction."""
import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope
from mmengine.runner import load_checkpoint
from PIL import Image

from mmcausal.apis import build_inferencer, config_dataset_meta, infer_and_draw
from mmcausal.registry import MODELS
from report_utils import assert_report_matches

ROOT = Path(__file__).resolve().parents[2]
CLASSIFIERS = ['configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py',
               'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
               'configs/pyramid_vision_llama/pyramid-vision-llama-nano_1xb32-60e_shapes-64px.py',
               'configs/defocus/defocus-vit-nano-p8_1xb32-45e_shapes-64px.py',
               'configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py']
SEGMENTORS = ['configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py',
              'configs/vision_llama/upernet_vision-llama-nano-p8_1xb8-400i_shapes-64x64.py',
              'configs/pyramid_vision_llama/upernet_pyramid-vision-llama-nano_1xb8-800i_shapes-64x64.py',
              'configs/cait/upernet_cait-nano-p8_1xb8-250i_shapes-64x64.py']
DETECTORS = ['configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py',
             'configs/vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-36e_shapes-128px.py',
             'configs/pyramid_vision_llama/mask-rcnn_pyramid-vision-llama-nano_fpn_1xb4-36e_shapes-128px.py',
             'configs/defocus/dino-4scale_defocus-mamba-nano-p8_sfp_1xb4-45e_shapes-128px.py']


def _checkpoint_and_model(config: str, folder: Path):
    """A checkpoint of the config's freshly built model (a bare state dict, no meta), and the model loaded from it
    the plain mmengine way, in eval mode."""
    cfg = Config.fromfile(str(ROOT / config))
    if cfg.get('data_preprocessor') is not None:  # as mmengine's Runner does
        cfg.model.setdefault('data_preprocessor', cfg.data_preprocessor)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        source = MODELS.build(copy.deepcopy(cfg.model))  # DINO's builder edits its config
        model = MODELS.build(copy.deepcopy(cfg.model))
    path = folder / 'model.pth'
    torch.save({'state_dict': source.state_dict()}, path)
    load_checkpoint(model, str(path), map_location='cpu')
    return cfg, str(path), model.eval()


def _image(folder: Path, size: int) -> str:
    pixels = (np.random.RandomState(1).rand(size, size, 3) * 255).astype(np.uint8)
    path = folder / 'image.png'
    Image.fromarray(pixels).save(path)
    return str(path)


def _test_step(cfg: Config, model, image: str):
    """``model.test_step`` on ``image`` through the config's test pipeline (without its annotation loading)."""
    pipeline = [step for step in cfg.test_dataloader.dataset.pipeline if 'LoadAnnotations' not in step['type']]
    with DefaultScope.overwrite_default_scope(cfg.default_scope), torch.no_grad():
        return model.test_step(pseudo_collate([Compose(pipeline)(dict(img_path=image, img_id=0))]))[0]


@pytest.mark.parametrize('config', CLASSIFIERS, ids=lambda path: Path(path).stem)
def test_image_classification_inferencer(config, tmp_path):
    cfg, checkpoint, model = _checkpoint_and_model(config, tmp_path)
    image = _image(tmp_path, 64)
    inferencer = build_inferencer(str(ROOT / config), checkpoint, device='cpu')
    result = infer_and_draw(inferencer, image, str(tmp_path / 'drawn.png'))
    expected = _test_step(cfg, model, image).pred_score.numpy()
    np.testing.assert_allclose(result['pred_scores'], expected, rtol=1e-5, atol=1e-6)
    assert result['pred_label'] == int(expected.argmax())
    assert result['pred_class'] == config_dataset_meta(cfg)['classes'][result['pred_label']]  # not ImageNet's
    assert Image.open(tmp_path / 'drawn.png').size[0] > 0


@pytest.mark.parametrize('config', SEGMENTORS, ids=lambda path: Path(path).stem)
def test_mmseg_inferencer(config, tmp_path):
    cfg, checkpoint, model = _checkpoint_and_model(config, tmp_path)
    image = _image(tmp_path, 64)
    inferencer = build_inferencer(str(ROOT / config), checkpoint, device='cpu')
    label_map = infer_and_draw(inferencer, image, str(tmp_path / 'drawn.png'))
    expected = _test_step(cfg, model, image).pred_sem_seg.data[0].numpy()
    np.testing.assert_array_equal(label_map, expected)
    assert list(inferencer.visualizer.dataset_meta['classes']) == config_dataset_meta(cfg)['classes']  # not Cityscapes'

    assert Image.open(tmp_path / 'drawn.png').size == (64, 64)


@pytest.mark.parametrize('config', DETECTORS, ids=lambda path: Path(path).stem)
def test_det_inferencer(config, tmp_path):
    cfg, checkpoint, model = _checkpoint_and_model(config, tmp_path)
    image = _image(tmp_path, 128)
    inferencer = build_inferencer(str(ROOT / config), checkpoint, device='cpu')
    result = infer_and_draw(inferencer, image, str(tmp_path / 'drawn.png'))
    expected = _test_step(cfg, model, image).pred_instances
    assert len(result['bboxes']) == len(expected) > 0
    np.testing.assert_allclose(result['scores'], expected.scores.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result['bboxes'], expected.bboxes.numpy(), rtol=1e-4, atol=1e-3)
    assert result['labels'] == expected.labels.tolist()
    assert list(inferencer.model.dataset_meta['classes']) == config_dataset_meta(cfg)['classes']  # not COCO's
    assert Image.open(tmp_path / 'drawn.png').size == (128, 128)


def _tool():
    spec = importlib.util.spec_from_file_location('image_demo', ROOT / 'tools/demo/image_demo.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('config', [CLASSIFIERS[0], SEGMENTORS[0], DETECTORS[0]], ids=['mmpretrain', 'mmseg', 'mmdet'])
def test_image_demo_writes_the_drawn_prediction(config, tmp_path, capsys):
    _, checkpoint, _ = _checkpoint_and_model(config, tmp_path)
    image = _image(tmp_path, 64 if config in CLASSIFIERS + SEGMENTORS else 128)
    _tool().main([str(ROOT / config), checkpoint, image, '--out-file', str(tmp_path / 'out' / 'drawn.png'),
                  '--device', 'cpu'])
    assert Image.open(tmp_path / 'out' / 'drawn.png').size[0] > 0
    assert 'drawn prediction:' in capsys.readouterr().out


def test_image_demo_refuses_a_model_without_an_inferencer(tmp_path):
    """MAE pre-training (mmpretrain scope, but no classifier) ends in one line."""
    config = 'configs/vision_llama/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px.py'
    _, checkpoint, _ = _checkpoint_and_model(config, tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        _tool().main([str(ROOT / config), checkpoint, _image(tmp_path, 64)])
    assert_report_matches(exit_info.value, "ConfigError: .*model type 'MAE'.* no image inferencer")


def test_get_model_builds_the_config_with_the_checkpoint(tmp_path):
    """mmpretrain's ``get_model(config, pretrained=checkpoint)`` (the family pages' snippet) gives the checkpoint's
    model: the same class scores as ``test_step``."""
    from mmpretrain import get_model
    cfg, checkpoint, model = _checkpoint_and_model(CLASSIFIERS[1], tmp_path)
    image = _image(tmp_path, 64)
    built = get_model(str(ROOT / CLASSIFIERS[1]), pretrained=checkpoint, device='cpu').eval()
    torch.testing.assert_close(_test_step(cfg, built, image).pred_score, _test_step(cfg, model, image).pred_score)
