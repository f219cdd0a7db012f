"""mmcausal's models in mmpretrain's model hub: ``list_models`` / ``get_model`` by metafile name after
``import mmcausal`` (:mod:`mmcausal.model_zoo`); segmentors and detectors are left out, and nothing is downloaded."""
from pathlib import Path

import mmpretrain
import pytest
import torch
import yaml
from mmengine.runner import checkpoint as mmengine_checkpoint

import mmcausal  # noqa: F401  (registers the model index)
from mmcausal.model_zoo import builds_in_mmpretrain

ROOT = Path(__file__).resolve().parents[2]
TWIN = 'illama-nano-p8_1xb32-30e_shapes-64px'


def metafile_models() -> dict:
    return {model['Name']: model for path in sorted(ROOT.glob('configs/*/metafile.yml'))
            for model in yaml.safe_load(path.read_text())['Models']}


@pytest.fixture
def no_downloads(monkeypatch):
    """Any checkpoint URL mmengine would fetch fails the test."""
    def refuse(url, *args, **kwargs):
        raise AssertionError(f'tried to download {url}')
    monkeypatch.setattr(mmengine_checkpoint, 'load_from_http', refuse)


def test_list_models_finds_the_classifiers_and_generators_but_not_dense_models():
    models = metafile_models()
    listed = set(mmpretrain.list_models('*llama*'))
    expected = {name for name, model in models.items()
                if 'llama' in name and builds_in_mmpretrain(model['Metadata']['Training Data'])}
    assert {'illama-base-p16_32xb128_in1k', 'vision-llama-base-p16_8xb128-coslr-100e_in1k',
            'dit-llama-xlarge-p2_8xb32-2400k_in1k-256px', TWIN} <= expected
    assert expected <= listed
    dense = {name for name, model in models.items() if not builds_in_mmpretrain(model['Metadata']['Training Data'])}
    assert 'upernet_illama-base-p16_8xb2-160k_ade20k-512x512' in dense
    assert dense.isdisjoint(mmpretrain.list_models())
    assert set(mmpretrain.list_models('cait-s24')) >= {'cait-s24_8xb128-400e_in1k', 'cait-s24_8xb32-60e_in1k-384px'}


def test_get_model_builds_the_named_config_and_loads_a_local_checkpoint(tmp_path, no_downloads):
    model = mmpretrain.get_model(TWIN)
    assert type(model.backbone).__name__ == 'ILLaMA'
    assert sum(p.numel() for p in model.parameters()) == metafile_models()[TWIN]['Metadata']['Parameters']
    torch.manual_seed(1)
    weights = {key: torch.randn_like(value) if value.is_floating_point() else value
               for key, value in model.state_dict().items()}
    torch.save({'state_dict': weights}, tmp_path / 'twin.pth')
    loaded = mmpretrain.get_model(TWIN, pretrained=str(tmp_path / 'twin.pth'))
    assert all(torch.equal(loaded.state_dict()[key], value) for key, value in weights.items())
    with pytest.warns(UserWarning, match='Unable to find pre-defined checkpoint'):  # no Weights of ours: no fetch
        mmpretrain.get_model(TWIN, pretrained=True)
