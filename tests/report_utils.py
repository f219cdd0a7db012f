"""The report of a user error as the tools print it (``mmcausal.utils.error_report.report_lines``): detail lines,
then one short last line that says what to change."""
import re

#: the longest last line a report may have (the details go on the lines above it)
LAST_LINE_LIMIT = 160


def report_text(error: BaseException) -> str:
    """A tool's refusal (``SystemExit``, or the ``UserInputExit`` that keeps its ``details``) as one string,
    ``'<ErrorType>: <detail lines> <last line's text>'``, after checking that its last line is one short line."""
    last = str(error)
    assert '\n' not in last and len(last) <= LAST_LINE_LIMIT, last
    details = getattr(error, 'details', [])
    if not details:
        return last
    error_type, _, rest = last.partition(': ')
    return f'{error_type}: ' + ' '.join([*details, rest])


def assert_report_matches(error: BaseException, pattern: str) -> None:
    """The whole report of ``error`` matches ``pattern`` (``re.search``)."""
    text = report_text(error)
    assert re.search(pattern, text), text
