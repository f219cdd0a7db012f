"""Import floors, read from the source (an AST walk): a floor imports torch, mmengine, the OpenMMLab libraries, the
floors below it and itself, never a package of mmcausal above it.

* ``mmcausal.utils`` is the lowest floor: nothing of mmcausal but itself (not models, engine, datasets, analysis,
  apis ...).
* ``mmcausal.models.layers`` holds what two or more backbone families use: it stands on ``utils`` and ``registry``
  and never imports a backbone (a family's own modules sit beside its backbone and import ``layers``, not the other
  way)."""
import ast
from pathlib import Path
from typing import Iterator, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / 'mmcausal'
#: floor (a folder of ``mmcausal``) -> the mmcausal modules its files may import (each with its submodules)
FLOORS = {
    'utils': ('mmcausal.utils', ),
    'models/layers': ('mmcausal.models.layers', 'mmcausal.utils', 'mmcausal.registry'),
}


def _imported_modules(path: Path) -> Iterator[Tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``path`` (relative imports resolved), also those inside
    functions."""
    package = ['mmcausal'] + list(path.relative_to(PACKAGE).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = '.'.join(base + ([node.module] if node.module else []))
            if node.module is None:  # ``from . import x``: x is a module of the package
                yield from ((node.lineno, f'{module}.{alias.name}') for alias in node.names)
            else:
                yield node.lineno, module


def _upward_imports(path: Path, floor: str) -> list:
    allowed = FLOORS[floor]
    return [f'{path.name}:{line} imports {module}' for line, module in sorted(_imported_modules(path))
            if module.split('.')[0] == 'mmcausal' and not any(module == own or module.startswith(f'{own}.')
                                                              for own in allowed)]


@pytest.mark.parametrize('floor,path', [(floor, path) for floor in FLOORS
                                        for path in sorted((PACKAGE / floor).rglob('*.py'))],
                         ids=lambda value: value.name if isinstance(value, Path) else value.replace('/', '.'))
def test_a_floor_imports_nothing_above_it(floor, path):
    assert not _upward_imports(path, floor)


def test_the_walk_sees_absolute_relative_and_local_imports(tmp_path, monkeypatch):
    fake = tmp_path / 'mmcausal'
    (fake / 'utils').mkdir(parents=True)
    (fake / 'utils' / 'glue.py').write_text('from mmcausal.engine.hooks import X\nfrom ..models import layers\n'
                                            'from . import errors\n\n\ndef f():\n    import mmcausal.apis\n')
    monkeypatch.setitem(globals(), 'PACKAGE', fake)
    assert _upward_imports(fake / 'utils' / 'glue.py', 'utils') == [
        'glue.py:1 imports mmcausal.engine.hooks', 'glue.py:2 imports mmcausal.models',
        'glue.py:7 imports mmcausal.apis']


def test_layers_may_not_import_a_backbone(tmp_path, monkeypatch):
    fake = tmp_path / 'mmcausal'
    (fake / 'models' / 'layers').mkdir(parents=True)
    (fake / 'models' / 'layers' / 'mixer.py').write_text(
        'from mmcausal.models.backbones.defocus import decay\nfrom ..backbones import CaiT\nfrom .. import necks\n'
        'from .attention import SelfAttention\nfrom mmcausal.utils.errors import UserInputError\n'
        'from mmcausal.registry import MODELS\n')
    monkeypatch.setitem(globals(), 'PACKAGE', fake)
    assert _upward_imports(fake / 'models' / 'layers' / 'mixer.py', 'models/layers') == [
        'mixer.py:1 imports mmcausal.models.backbones.defocus', 'mixer.py:2 imports mmcausal.models.backbones',
        'mixer.py:3 imports mmcausal.models.necks']
