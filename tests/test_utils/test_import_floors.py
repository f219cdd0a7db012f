"""``mmcausal.utils`` is the lowest floor: its modules import torch, mmengine, the OpenMMLab libraries and each other,
never a package of mmcausal above them (models, engine, datasets, analysis, apis ...)."""
import ast
from pathlib import Path
from typing import Iterator, Tuple

import pytest

UTILS = Path(__file__).resolve().parents[2] / 'mmcausal' / 'utils'


def _imported_modules(path: Path) -> Iterator[Tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``path`` (relative imports resolved), also those inside
    functions."""
    package = ['mmcausal', 'utils'] + list(path.relative_to(UTILS).parent.parts)
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


def _upward_imports(path: Path) -> list:
    return [f'{path.name}:{line} imports {module}' for line, module in sorted(_imported_modules(path))
            if module.split('.')[0] == 'mmcausal' and module.split('.')[:2] != ['mmcausal', 'utils']]


@pytest.mark.parametrize('path', sorted(UTILS.rglob('*.py')), ids=lambda path: path.name)
def test_utils_import_nothing_above_them(path):
    assert not _upward_imports(path)


def test_the_walk_sees_absolute_relative_and_local_imports(tmp_path, monkeypatch):
    fake = tmp_path / 'mmcausal' / 'utils'
    fake.mkdir(parents=True)
    (fake / 'glue.py').write_text('from mmcausal.engine.hooks import X\nfrom ..models import layers\n'
                                  'from . import errors\n\n\ndef f():\n    import mmcausal.apis\n')
    monkeypatch.setitem(globals(), 'UTILS', fake)
    assert _upward_imports(fake / 'glue.py') == [
        'glue.py:1 imports mmcausal.engine.hooks', 'glue.py:2 imports mmcausal.models',
        'glue.py:7 imports mmcausal.apis']
