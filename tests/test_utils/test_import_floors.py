"""Import floors, read from the source (an AST walk): a floor imports torch, mmengine, the OpenMMLab libraries, the
floors below it and itself, never a package of mmcausal above it.

* ``mmcausal.utils`` is the lowest floor: nothing of mmcausal but itself (not models, engine, datasets, analysis,
  apis ...).
* ``mmcausal.models.layers`` holds what two or more model families use: it stands on ``utils`` and ``registry``
  and never imports a family (a family's own modules sit in its package and import ``layers``, not the other way).
* A family package (``mmcausal.models.<family>``) stands on ``layers``, ``utils`` and ``registry`` and never imports
  another family; the necks, which any backbone takes, sit above the families.
* Every module of ``mmcausal.models.layers`` is used by two or more packages of ``models`` (the families and the
  necks); a module one family uses sits in its package."""
import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / 'mmcausal'
FAMILIES = ('illama', 'vision_llama', 'defocus', 'cait', 'generation')
#: floor (a folder of ``mmcausal``) -> the mmcausal modules its files may import (each with its submodules)
FLOORS = {
    'utils': ('mmcausal.utils', ),
    'models/layers': ('mmcausal.models.layers', 'mmcausal.utils', 'mmcausal.registry'),
    **{f'models/{family}': (f'mmcausal.models.{family}', 'mmcausal.models.layers', 'mmcausal.utils',
                            'mmcausal.registry')
       for family in FAMILIES},
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


def test_layers_may_not_import_a_family_nor_a_family_another(tmp_path, monkeypatch):
    fake = tmp_path / 'mmcausal'
    (fake / 'models' / 'layers').mkdir(parents=True)
    (fake / 'models' / 'layers' / 'mixer.py').write_text(
        'from mmcausal.models.defocus import transformer\nfrom ..cait import CaiT\nfrom .. import necks\n'
        'from .attention import SelfAttention\nfrom mmcausal.utils.errors import UserInputError\n'
        'from mmcausal.registry import MODELS\n')
    (fake / 'models' / 'cait').mkdir(parents=True)
    (fake / 'models' / 'cait' / 'backbone.py').write_text(
        'from ..layers import SelfAttention\nfrom ..illama import ILLaMA\nfrom .talking_heads import TalkingHeads\n')
    monkeypatch.setitem(globals(), 'PACKAGE', fake)
    assert _upward_imports(fake / 'models' / 'layers' / 'mixer.py', 'models/layers') == [
        'mixer.py:1 imports mmcausal.models.defocus', 'mixer.py:2 imports mmcausal.models.cait',
        'mixer.py:3 imports mmcausal.models.necks']
    assert _upward_imports(fake / 'models' / 'cait' / 'backbone.py', 'models/cait') == [
        'backbone.py:2 imports mmcausal.models.illama']


LAYERS = 'mmcausal.models.layers'


def _module_name(path: Path) -> str:
    parts = ['mmcausal', *path.relative_to(PACKAGE).with_suffix('').parts]
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _family(module: str) -> str:
    """The package of ``models`` that ``module`` belongs to (a family or the necks), ``''`` for ``layers`` and the
    ``__init__`` of ``models``."""
    parts = module.split('.')[2:]
    return '' if not parts or parts[0] == 'layers' else parts[0]


def _layers_users(models: Path) -> Dict[str, Set[str]]:
    """``layers`` module -> the modules of ``models`` that import it, names imported from the
    ``layers`` package resolved to the module its ``__init__`` takes them from."""
    modules = {_module_name(path): path for path in models.rglob('*.py')}
    exported = {alias.asname or alias.name: f'{LAYERS}.{node.module}'
                for node in ast.parse((models / 'layers' / '__init__.py').read_text()).body
                if isinstance(node, ast.ImportFrom) and node.level == 1 for alias in node.names}
    users: Dict[str, Set[str]] = {}
    for user, path in modules.items():
        if user == LAYERS:
            continue
        package = user.split('.') if path.name == '__init__.py' else user.split('.')[:-1]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [(alias.name, '') for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = '.'.join((package[:len(package) - node.level + 1] if node.level else [])
                                + ([node.module] if node.module else []))
                targets = [(f'{base}.{alias.name}', '') if f'{base}.{alias.name}' in modules else (base, alias.name)
                           for alias in node.names]
            else:
                continue
            for target, name in targets:
                if target == LAYERS:
                    target = exported.get(name, '')
                elif target.startswith(f'{LAYERS}.'):
                    target = '.'.join(target.split('.')[:4])
                if target.startswith(f'{LAYERS}.'):
                    users.setdefault(target, set()).add(user)
    return users


def _families_of_layers(models: Path) -> Dict[str, List[str]]:
    """``layers`` module -> the families that use it, directly or through the ``layers`` modules that do."""
    users = _layers_users(models)

    def families(module: str, seen: frozenset) -> Set[str]:
        found = set()
        for user in users.get(module, ()):
            if _family(user):
                found.add(_family(user))
            elif user not in seen and user.startswith(f'{LAYERS}.'):
                found |= families(user, seen | {user})
        return found

    return {_module_name(path): sorted(families(_module_name(path), frozenset({_module_name(path)})))
            for path in sorted((models / 'layers').glob('*.py')) if path.name != '__init__.py'}


def test_every_layers_module_serves_two_or_more_families():
    """``layers/`` keeps only what two or more model families use (its ``__init__`` says so); a module used by
    one family moves into its package, e.g. ``models/cait/talking_heads.py``, ``models/generation/conditioning.py``."""
    used = _families_of_layers(PACKAGE / 'models')
    assert used and all(used.values()), f'a layers module no model uses: {used}'
    assert {module: families for module, families in used.items() if len(families) < 2} == {}


def test_the_family_count_resolves_package_imports_and_counts_through_layers_modules(tmp_path, monkeypatch):
    fake = tmp_path / 'mmcausal'
    files = {
        'models/__init__.py': 'from . import layers, vit, cait\n',
        'models/layers/rope.py': '',
        'models/layers/mixer.py': 'from .rope import rotate\n',
        'models/layers/adaln.py': '',
        'models/layers/unused.py': '',
        'models/layers/base.py': 'from .mixer import Mixer\n',
        'models/layers/__init__.py': 'from .rope import rotate\nfrom .mixer import Mixer\nfrom .adaln import AdaLN\n'
                                     'from .base import Base\n',
        'models/vit/__init__.py': 'from .backbone import ViT\n',
        'models/vit/backbone.py': 'from ..layers import Base\n',
        'models/cait/__init__.py': '',
        'models/cait/backbone.py': 'from ..layers.base import Base\n',
        'models/generation/net.py': 'from mmcausal.models.layers import AdaLN\nimport mmcausal.models.layers.rope\n',
    }
    for name, text in files.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(text)
    monkeypatch.setitem(globals(), 'PACKAGE', fake)
    assert _families_of_layers(fake / 'models') == {
        'mmcausal.models.layers.adaln': ['generation'],
        'mmcausal.models.layers.base': ['cait', 'vit'],
        'mmcausal.models.layers.mixer': ['cait', 'vit'],
        'mmcausal.models.layers.rope': ['cait', 'generation', 'vit'],
        'mmcausal.models.layers.unused': [],
    }
