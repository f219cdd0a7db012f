"""The model zoo: every config is listed once in its folder's ``metafile.yml`` and ``README.md``, the top README
links each folder's README, and every listed config builds with the listed parameter count."""
import re
from pathlib import Path
from typing import List

import pytest
import yaml
from mmengine.config import Config

from build_utils import build_on_meta
from mmcausal.model_zoo import builds_in_mmpretrain

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
    """... and mmpretrain's model hub lists it exactly when its config is one of mmpretrain's (its default scope):
    the rule :mod:`mmcausal.model_zoo` reads from the training data."""
    path = ROOT / model['Config']
    assert path.is_file(), f'{model["Name"]}: no {path}'
    cfg = Config.fromfile(str(path))
    built = build_on_meta(cfg)
    student = [param for name, param in built.named_parameters() if not name.startswith('teacher.')]  # frozen teacher:
    assert sum(param.numel() for param in student) == model['Metadata']['Parameters']  # not trained, not saved
    assert builds_in_mmpretrain(model['Metadata']['Training Data']) == (cfg.default_scope == 'mmpretrain')


def flops_cells(readme: str) -> List[tuple]:
    """``(first cell, FLOPs cell)`` of every row of the README's tables with a ``FLOPs (G)`` column."""
    rows, column = [], None
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip().strip('|').split('|')] if line.startswith('|') else None
        if cells is None:
            column = None
        elif column is None:
            column = cells.index('FLOPs (G)') if 'FLOPs (G)' in cells else -1
        elif column >= 0 and not set(cells[0]) <= set(':- '):
            rows.append((cells[0], cells[column]))
    return rows


@pytest.mark.parametrize('folder', [folder for folder in FOLDERS if any(
    'FLOPs' in model['Metadata'] for model in metafile(folder)['Models'])], ids=lambda folder: folder.name)
def test_readme_flops_are_the_metafile_flops(folder):
    """The family README's FLOPs column gives each config's metafile ``FLOPs`` in G (``—`` where there is none),
    and every model with FLOPs has a row there."""
    flops = {Path(model['Config']).stem: model['Metadata'].get('FLOPs') for model in metafile(folder)['Models']}
    shown = set()
    for first, cell in flops_cells((folder / 'README.md').read_text()):
        stem = max((stem for stem in flops if re.search(re.escape(stem) + r'(?![\w-])', first)), key=len)
        expected = '—' if flops[stem] is None else f'{flops[stem] / 1e9:.2f}'
        assert cell == expected, (stem, cell, expected)
        shown.add(stem)
    assert {stem for stem, value in flops.items() if value is not None} <= shown


# --- checkpoint names and download links ---------------------------------------------------------------------------
#: A converted (or pre-trained) checkpoint named directly under checkpoints/ or work_dirs/ (not a run's epoch_N.pth).
CHECKPOINT_NAME = re.compile(r'\b(?:checkpoints|work_dirs)/[\w.-]+\.pth\b')
CONVERTER_COMMAND = re.compile(r'tools/model_converters/\w+2mmcausal\.py((?:[^\n\\]|\\{1,2}\n)*)')


def documents() -> List[Path]:
    """Every text a user reads a checkpoint name in: READMEs, docs, converter docstrings and config comments."""
    return [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md')), *(folder / 'README.md' for folder in FOLDERS),
            *sorted((ROOT / 'tools/model_converters').glob('*.py')), *sorted((ROOT / 'configs').rglob('*.py'))]


def official_urls() -> List[str]:
    return [model['Converted From']['Weights'] for model in listed_models()
            if (model.get('Converted From') or {}).get('Weights')]


def known_names() -> set:
    """The configs' default paths (quoted strings) and the metafiles' ``Converted Weights``."""
    quoted = re.compile(r"""['"]((?:checkpoints|work_dirs)/[\w.-]+\.pth)['"]""")
    defaults = {name for path in (ROOT / 'configs').rglob('*.py') for name in quoted.findall(path.read_text())}
    return defaults | {model['Converted Weights'] for model in listed_models() if 'Converted Weights' in model}


def test_every_checkpoint_name_is_a_config_default_or_a_listed_conversion():
    """One name per model: a name a README, doc, converter or config gives is a config's default path or the
    metafile's ``Converted Weights`` of a model (which the configs' defaults use)."""
    known = known_names()
    unknown = {(relative(path), name) for path in documents() for name in CHECKPOINT_NAME.findall(path.read_text())
               if name not in known}
    assert unknown == set()


def test_converter_commands_convert_the_released_files():
    """``tools/model_converters/*2mmcausal.py SRC DST``: SRC is a released file, downloaded from a direct link of the
    metafiles or the family READMEs by a ``wget -O SRC URL`` of the documents (or named as released, in the
    converters' usage lines); DST's name is checked with every other name above."""
    links = official_urls() + [url for folder in FOLDERS
                               for url in re.findall(r'https://\S+?\.pth?\b', (folder / 'README.md').read_text())]
    released = {url.rsplit('/', 1)[1] for url in links}
    downloads = re.compile(r'wget\s+-O\s+(\S+)\s+(?:\\\n\s*)?"?(https://\S+?\.pth?)\b')
    released |= {output for path in documents() for output, url in downloads.findall(path.read_text())
                 if url in links}
    wrong = []
    for path in documents():
        for arguments in CONVERTER_COMMAND.findall(path.read_text()):
            files = [word for word in arguments.replace('\\', ' ').split() if word.endswith(('.pth', '.pt'))]
            if files and files[0] not in released:
                wrong.append((relative(path), files[0]))
    assert wrong == []


@pytest.mark.parametrize('folder', FOLDERS, ids=lambda folder: folder.name)
def test_official_weights_have_direct_links_in_metafile_and_readme(folder):
    """Every full-size model either links its released file directly (no GitHub/Hugging Face page, no anchor) or
    says that there is none; the family README gives each link and the converted file's name."""
    readme = (folder / 'README.md').read_text()
    for model in metafile(folder)['Models']:
        if 'nano' in model['Name']:
            continue
        url = (model.get('Converted From') or {}).get('Weights')
        if url is None:
            assert model.get('Official Weights') == 'no public file', model['Name']
            continue
        # DiT / SiT files are .pt; a Dropbox direct link (SiT's) carries the file's key as its query string
        assert re.fullmatch(r'https://\S+\.pth?(\?\S+)?', url) and '/blob/' not in url, url
        assert url in readme, f'{folder.name}/README.md does not link {url}'
        name = model['Converted Weights']
        assert name in readme, f'{folder.name}/README.md does not name {name}'


@pytest.mark.parametrize('folder', FOLDERS, ids=lambda folder: folder.name)
def test_results_say_whose_numbers_they_are(folder):
    """The tiny twins' results are ours; every other listed result is labelled as the paper's or the official
    README's (we have trained no full-size model)."""
    for model in metafile(folder)['Models']:
        if model.get('Results'):
            expected = {'ours'} if 'nano' in model['Name'] else {'paper', 'official README'}
            assert model.get('Results Source') in expected, model['Name']


def test_model_index_imports_every_metafile_and_parses():
    """``model-index.yml`` (what mmpretrain's model hub reads after ``import mmcausal``) lists every family's metafile,
    and OpenMMLab's parser (modelindex) loads every model of them with its config and results."""
    from modelindex.load_model_index import load
    index = yaml.safe_load((ROOT / 'model-index.yml').read_text())
    assert sorted(index['Import']) == sorted(relative(folder / 'metafile.yml') for folder in FOLDERS)
    models = load(str(ROOT / 'model-index.yml')).models
    assert sorted(model.name for model in models) == sorted(model['Name'] for model in listed_models())
    assert all((ROOT / model.config).is_file() for model in models)
