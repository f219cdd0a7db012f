"""The commands in the README and docs/ are real: every script they run exists, every option they pass is one the
script (or the shared command-line code it uses) defines, and every config they name exists."""
import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md')), *sorted((ROOT / 'configs').glob('*/README.md'))]
#: where the options of each launcher are defined
SHARED = [ROOT / 'mmcausal/utils/cli.py', ROOT / 'mmcausal/converters/common.py', ROOT / 'mmcausal/analysis/inputs.py']
LAUNCHED = {'tools/dist_train.sh': 'tools/train.py', 'tools/dist_test.sh': 'tools/test.py'}


def shell_commands(document: Path) -> Iterator[str]:
    """Each command of the document's ``bash`` / ``shell`` blocks, continuation lines joined, comments dropped."""
    for block in re.findall(r'```(?:bash|shell)\n(.*?)```', document.read_text(), flags=re.S):
        for command in block.replace('\\\n', ' ').splitlines():
            command = command.split(' #')[0].strip()
            if command and not command.startswith('#'):
                yield command


def tool_calls(command: str) -> Iterator[Tuple[str, List[str]]]:
    """(script, its options) of every ``python tools/...py`` / ``bash tools/...sh`` in ``command``."""
    for part in re.split(r'&&|;|\|', command):
        words = part.split()
        for index, word in enumerate(words):
            if re.fullmatch(r'tools/[\w/]+\.(py|sh)', word) and index > 0 and words[index - 1] in ('python', 'bash'):
                yield word, [w.split('=')[0] for w in words[index + 1:] if w.startswith('--')]


def commands() -> List[Tuple[str, str]]:
    return [(str(doc.relative_to(ROOT)), command) for doc in DOCUMENTS for command in shell_commands(doc)]


def test_documents_have_commands():
    assert len(commands()) > 50


@pytest.mark.parametrize('document,command', commands())
def test_command_runs_real_scripts_with_real_options(document, command):
    for script, options in tool_calls(command):
        assert (ROOT / script).is_file(), f'{document}: {script} does not exist'
        sources = [ROOT / script, ROOT / LAUNCHED.get(script, script), *SHARED]
        text = '\n'.join(path.read_text() for path in sources)
        unknown = [option for option in options if f"'{option}'" not in text]
        assert unknown == [], f'{document}: {script} has no option {unknown}'
    for config in re.findall(r'\bconfigs/[\w/.-]+\.py\b', command):
        assert (ROOT / config).is_file(), f'{document}: {config} does not exist'


def anchors(document: Path) -> set:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped, spaces to hyphens)."""
    headings = re.findall(r'(?m)^#+ (.+)$', re.sub(r'```.*?```', '', document.read_text(), flags=re.S))
    return {re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-') for heading in headings}


@pytest.mark.parametrize('document', DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_point_at_files_and_headings(document):
    text = document.read_text()
    targets = re.findall(r'\]\(([^)\s]+)\)', text) + re.findall(r'<img src="([^"]+)"', text)
    broken = []
    for target in targets:
        if re.match(r'[a-z]+:', target):
            continue
        path, _, anchor = target.partition('#')
        file = document.parent / path if path else document
        if not file.exists() or (anchor and file.suffix == '.md' and anchor not in anchors(file)):
            broken.append(target)
    assert broken == []
