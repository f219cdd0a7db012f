"""The rows of ``tools/analysis_tools/benchmark.py``: several rounds of a case summarised as one row
(:func:`median_of_rounds`), and every case's row in a Markdown table with ratios to the first config (:func:`table`).
A row is what :func:`mmcausal.analysis.benchmark.measure` returns.
"""
import statistics
from typing import Dict, List, Tuple


def median_of_rounds(runs: List[dict]) -> dict:
    """One case's rows from several rounds -> one row: the median of every measurement (images/s from the median
    step time), and the step time's range (``ms_min``, ``ms_max``)."""
    row = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, float):
            row[key] = statistics.median(run[key] for run in runs)
    row['images_per_s'] = row['batch'] * 1e3 / row['ms']
    row.update(rounds=len(runs), ms_min=min(run['ms'] for run in runs), ms_max=max(run['ms'] for run in runs))
    return row


def table(rows: List[dict]) -> str:
    """Markdown: one line per case, ratios to the first config at the same size and batch."""
    firsts: Dict[Tuple[str, int], dict] = {}
    saved = 'saved_mib' in rows[0]
    spread = any(row.get('rounds', 1) > 1 for row in rows)
    compiled = any(row['spec'].endswith((' (compiled)', ' (onnxruntime)')) for row in rows)
    batches = len({row['batch'] for row in rows}) > 1
    lines = ['| config | size | ' + ('batch | ' if batches else '') + 'params (M) | images/s | ms / step | '
             + ('ms range | ' if spread else '')
             + ('first step s | ' if compiled else '')
             + 'peak MiB | activation MiB | ' + ('saved MiB | ' if saved else '') + 'time x | activation x |'
             + (' saved x |' if saved else ''),
             '|---' * (9 + 2 * saved + spread + compiled + batches) + '|']
    for row in rows:
        first = firsts.setdefault((row['size'], row['batch']), row)
        activation_ratio = row['activation_mib'] / max(first['activation_mib'], 1e-9)
        line = (f'| `{row["spec"]}` | {row["size"]} | ' + (f'{row["batch"]} | ' if batches else '')
                + f'{row["params"] / 1e6:.2f} | {row["images_per_s"]:.2f} | '
                f'{row["ms"]:.0f} | ' + (f'{row["ms_min"]:.0f}-{row["ms_max"]:.0f} | ' if spread else '')
                + (f'{row["first_step_s"]:.1f} | ' if compiled else '')
                + f'{row["peak_mib"]:.0f} | {row["activation_mib"]:.0f} | ')
        line += f'{row["saved_mib"]:.1f} | ' if saved else ''
        line += f'{row["ms"] / first["ms"]:.2f} | {activation_ratio:.2f} |'
        line += f' {row["saved_mib"] / first["saved_mib"]:.2f} |' if saved else ''
        lines.append(line)
    return '\n'.join(lines)
