"""The commands in the README and docs/ are real: every script they run exists, every option they pass is one the
script (or the shared command-line code it uses) defines, and every config they name exists. No text of the
repository narrates its history."""
import re
import subprocess
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


# --- downloads -----------------------------------------------------------------------------------------------------
def downloads() -> List[Tuple[str, str, str]]:
    """(document, output, URL) of every ``wget`` in the documents' shell blocks."""
    found = []
    for document, command in commands():
        if command.split()[:1] == ['wget']:
            output = re.search(r'(?:^|\s)-O\s+(\S+)', command)
            url = re.search(r'(https?://\S+)', command)
            found.append((document, output.group(1) if output else '', url.group(1).strip('"\'') if url else ''))
    return found


def test_documents_download_files():
    assert len(downloads()) >= 20


def test_every_download_names_its_output_under_checkpoints():
    """``wget -O checkpoints/...``: without ``-O`` a second file of the same name becomes ``epoch_800.pth.1``."""
    assert [(doc, url) for doc, output, url in downloads() if not output.startswith('checkpoints/')] == []


def test_one_name_per_file_and_one_file_per_name():
    """Across all documents an output name always holds the same URL, and a URL always goes to the same name (the
    released ``epoch_800.pth`` of Base and Large, ``best_checkpoint.pth`` of S/B/L and ``0400000.pt`` of B/L/XL must
    not overwrite each other)."""
    url_of, name_of = {}, {}
    for document, output, url in downloads():
        url_of.setdefault(output, set()).add(url)
        name_of.setdefault(url, set()).add(output)
    assert {name: urls for name, urls in url_of.items() if len(urls) > 1} == {}
    assert {url: names for url, names in name_of.items() if len(names) > 1} == {}


def test_converter_inputs_are_downloaded_files():
    """Every converter command in the documents reads a file that a ``wget -O`` of the documents writes (or a
    checkpoint of a run, under ``work_dirs/``)."""
    written = {output for _, output, _ in downloads()}
    read = []
    for document, command in commands():
        match = re.search(r'tools/model_converters/\w+\.py((?:\s+\S+)+)', command)
        if match:
            files = [w for w in match.group(1).split() if not w.startswith('-') and w.endswith(('.pth', '.pt'))]
            read += [(document, files[0])] if files else []
    assert read and [(doc, src) for doc, src in read
                     if src not in written and src != 'SRC' and not src.startswith('work_dirs/')] == []


# --- no history narration ------------------------------------------------------------------------------------------
#: Comments, docstrings, configs and documents say what and why; they never narrate the project's history nor point
#: at material outside the repository. Each pattern is one unambiguous kind of such a line.
HISTORY_PATTERNS = [
    ('an issue number (cite an upstream issue by its full URL)',
     re.compile(r'(?i)\bissues?\s+#?\d+\b|(?<![\w&\'"/#])#\d{2,}\b(?!-)|\b[\w.-]+/[\w.-]+#\d+\b(?!-)')),
    ('a reference to notes or a spec outside the repository',
     re.compile(r'(?i)\bnotes\s+(?:`{0,2}[\w./-]+`{0,2}\s+)?(?:§|B\d\b)|\bnotes\s+`{0,2}[\w-]+\.md\b|\bnotes\s+B\d'
                r'|\bspec(?:\'s)?\s+(?:`{0,2}[\w./-]+`{0,2}\s+)?(?:§|Sec\.)|\bspec\s+`{0,2}[\w-]+\.md\b|\bshared/spec\b'
                r'|\b(?:the|engineering|official-code) notes\b(?!\s+on\b)|\bspec(?:\'s)? (?:table|pilot|formulas)\b')),
    ('a commit hash', re.compile(r'(?<![\w/.\-#@=:\'"`])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w/\-])'
                                 r'|(?i:\b(?:commit|CI of|run of|code of|since|before)\s+\d{7}\b(?![\d,.]|\s*[a-z]))')),
    ('a review', re.compile(r'(?i)\b(?:the review|a review|reviewers?|cuda-review|review (?:asked|found|said))\b')),
    ('words about the machinery the project was built with',
     re.compile(r'(?i)\bsession (?:run|that|which|measured)\b|\b(?:this|that|another|one|earlier|later) session\b'
                r'|\b(?:was|were) lent\b|\blent to\b|\bworkplace\b|\bdevice tool\b|\bfarm-\w|\bGPU host we\b'
                r'|\bhelper (?:agent|session)\b|\b(?:sub-?|coding )agents?\b')),
]
#: Where a full URL is written, an issue number or a commit hash in it is a source, not history.
URL = re.compile(r'(?:https?://|\bgithub\.com/)\S+')
#: binary files, which the scan skips
SKIPPED_SUFFIXES = ('.png', '.jpg', '.pth', '.pt', '.npz', '.so', '.tgz')


def repository_text_files() -> List[Path]:
    """The repository's own files (tracked, or new and not ignored), but for this one, which holds the patterns."""
    listed = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '-z'], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip('not a git checkout')
    listed = listed.stdout.split('\0')
    files = [ROOT / name for name in listed if name and not name.endswith(SKIPPED_SUFFIXES)]
    return [path for path in files if path.is_file() and path != Path(__file__).resolve()]


def history_kinds(text: str) -> List[str]:
    bare = URL.sub(' ', text)
    return [kind for kind, pattern in HISTORY_PATTERNS if pattern.search(bare)]


def history_lines() -> List[str]:
    """``file:line: kind: text`` of every line that matches a pattern of :data:`HISTORY_PATTERNS`, alone or joined
    to the next line (a reference wrapped over two lines, such as ``spec`` / ``generation.md §5.2``)."""
    found = []
    for path in repository_text_files():
        try:
            lines = path.read_text().splitlines()
        except UnicodeDecodeError:
            continue
        for index, line in enumerate(lines):
            kinds = history_kinds(line)
            if not kinds and index + 1 < len(lines) and not history_kinds(lines[index + 1]):
                kinds = history_kinds(line + ' ' + lines[index + 1].lstrip(' #*:-"\''))
            if kinds:
                found.append(f'{path.relative_to(ROOT)}:{index + 1}: {", ".join(kinds)}: {line.strip()}')
    return found


def test_history_patterns_catch_history_and_spare_sources():
    for line in ['the fix of issue 44', 'see #45', 'open-mmlab/mmcv#3341', 'measured at 5bf1de0 on a busy machine',
                 '(notes §3.4)', 'notes B2\'s reading', 'notes ``cait.md`` §1.3', 'spec generation.md §5.2',
                 "the spec's pilot", 'No GPU was lent to this session.', 'the review that asked for it',
                 'a clean-clone CI of 1258681', 'written from the notes']:
        assert history_kinds(line), line
    for line in ['https://github.com/facebookresearch/deit/issues/108', 'deit/blob/7e160fe/cait_models.py',
                 'weights-inception-2015-12-05-6726825d.pth', 'sha256: ' + 'ab12' * 16, 'the 2400000.pt file',
                 'once per test session', "the spec's keyword arguments", "@pytest.fixture(scope='session')",
                 'ONNX Runtime session', '## 7. Steps', 'docs/get_started.md#5-choose-a-config',
                 '#: the registrations', 'Compatibility notes', 'VisionLLaMA §4.1, Table 1', 'after 1000000 steps',
                 'vit-base-p16_32xb128-mae_in1k.py', "color='#000000'", 'the release notes of CUDA']:
        assert history_kinds(line) == [], line


def test_no_history_narration_in_the_repository():
    """Comments, docstrings, configs and documents say what and why, never when or who asked: no issue numbers, no
    commit hashes, no notes or spec files outside the repository, no reviews, no words about how it was built."""
    found = history_lines()
    assert found == [], f'{len(found)} lines narrate history:\n' + '\n'.join(found)
