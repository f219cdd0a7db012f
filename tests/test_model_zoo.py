"""The model zoo: every config is listed once in its folder's ``metafile.yml`` and ``README.md``, the top README
links each folder's README, and every listed config builds with the listed parameter count."""
from pathlib import Path
from typing import List

import pytest
import yaml
from mmengine.config import Config

from build_utils import build_on_meta

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted({path.parent for path in (ROOT / 'configs').glob('*/*.py')})


def metafile(folder: Path) -> dict:
    return yaml.safe_load((folder / 'metafile.yml').read_text())


def listed_models() -> List[dict]:
    return [model for folder in FOLDERS for model in metafile(folder)['Models']]


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize('folder', FOLDERS, ids=lambda folder: folder.name)
def test_every_config_is_listed_once(folder):
    meta = metafile(folder)
    models = meta['Models']
    configs = [model['Config'] for model in models]
    assert sorted(configs) == sorted(relative(path) for path in folder.glob('*.py'))  # each one, exactly once
    names = [model['Name'] for model in models]
    assert len(names) == len(set(names))
    collections = {collection['Name'] for collection in meta['Collections']}
    assert {model['In Collection'] for model in models} <= collections
    assert all(collection['README'] == relative(folder / 'README.md') for collection in meta['Collections'])
    assert {name for model in models for name in model.get('Downstream', [])} <= set(names)
    readme = (folder / 'README.md').read_text()
    assert [Path(config).name for config in configs if Path(config).name not in readme] == []


def test_top_readme_links_every_model_zoo_readme():
    readme = (ROOT / 'README.md').read_text()
    assert [folder.name for folder in FOLDERS if f'({relative(folder / "README.md")})' not in readme] == []


@pytest.mark.parametrize('model', listed_models(), ids=lambda model: model['Name'])
def test_listed_config_builds_with_the_listed_parameter_count(model):
    path = ROOT / model['Config']
    assert path.is_file(), f'{model["Name"]}: no {path}'
    built = build_on_meta(Config.fromfile(str(path)))
    assert sum(param.numel() for param in built.parameters()) == model['Metadata']['Parameters']
