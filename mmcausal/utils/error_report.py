"""How a tool ends on an error of the user's config, data or checkpoint: one short last line, exit status 1.

Inside :func:`user_errors_end_in_one_line`, an exception behind which
:func:`~mmcausal.utils.user_errors.find_user_error` finds a user error ends the program with the last line
``<ErrorType>: <what to change>`` (details such as key lists on the lines above it, :func:`report_lines`);
``--debug`` (or ``MMCAUSAL_DEBUG=1``) shows the full traceback instead. Any other exception is a bug and keeps its
traceback.
"""
import os
import re
import sys
from contextlib import contextmanager
from typing import Iterator, List, Optional, Sequence

from .user_errors import find_user_error, original_message

#: set to anything but ``''`` or ``'0'`` (``--debug`` sets it): user errors keep their traceback
DEBUG_ENV = 'MMCAUSAL_DEBUG'
#: The longest last line of a user error's report (``<ErrorType>: <what to change>``); the rest goes on lines above it.
LAST_LINE_LIMIT = 160
#: Where a message's last line may be folded: after a '.' or ';' that ends a sentence or clause (not 'e.g.', 'i.e.')
_CLAUSE_END = re.compile(r'(?<!\be\.g)(?<!\bi\.e)[.;](?=\s)')


def _clauses(text: str) -> List[str]:
    """``text`` cut after each '.' or ';' that ends a sentence or clause outside brackets."""
    clauses, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth = depth + 1 if char in '([{' else max(depth - 1, 0) if char in ')]}' else depth
        if depth == 0 and _CLAUSE_END.match(text, i):
            clauses.append(text[start:i + 1].strip())
            start = i + 1
    return [clause for clause in clauses + [text[start:].strip()] if clause]


def report_lines(error: BaseException) -> List[str]:
    """The report of the user error ``error``: detail lines, then ``'<ErrorType>: <what to change>'``.

    The lines of its message before the last are details (key or file lists). A last line longer than
    :data:`LAST_LINE_LIMIT` moves its leading sentences (or clauses ending in ';') to the details until the rest fits:
    a message ends with what to change, which stays on the last line.
    """
    prefix = f'{type(error).__name__}: '
    lines = [' '.join(line.split()) for line in original_message(str(error), type(error)).splitlines()]
    lines = [line for line in lines if line] or ['']
    details, last = lines[:-1], _clauses(lines[-1]) or ['']
    while len(last) > 1 and len(prefix) + len(' '.join(last)) > LAST_LINE_LIMIT:
        details.append(last.pop(0))
    return details + [prefix + ' '.join(last)]


def one_line(error: BaseException) -> str:
    """The last line of :func:`report_lines`: ``'<ErrorType>: <what to change>'``."""
    return report_lines(error)[-1]


class UserInputExit(SystemExit):
    """The exit of a tool on a user-input error: its ``code`` is the report's last line, ``details`` the lines that
    were printed to stderr above it (:func:`report_lines`)."""

    def __init__(self, report: Sequence[str]) -> None:
        super().__init__(report[-1])
        self.details = list(report[:-1])


@contextmanager
def user_errors_end_in_one_line(debug: Optional[bool] = None) -> Iterator[None]:
    """Turn a user-input error raised inside the block into :class:`UserInputExit` (exit status 1): its details go
    to stderr, then the interpreter prints its last line, which says what to change (:func:`report_lines`).

    Other exceptions propagate unchanged, with their traceback. ``debug`` (default: ``$MMCAUSAL_DEBUG``,
    which ``--debug`` sets) lets user errors propagate too.
    """
    try:
        yield
    except Exception as error:
        debug = os.environ.get(DEBUG_ENV, '') not in ('', '0') if debug is None else debug
        user_error = None if debug else find_user_error(error)
        if user_error is None:
            raise
        exit_ = UserInputExit(report_lines(user_error))
        if exit_.details:
            print('\n'.join(exit_.details), file=sys.stderr, flush=True)
        raise exit_ from None
