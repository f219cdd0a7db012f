"""Print the last validation metrics a training run logged: ``python tools/misc/print_metrics.py WORK_DIR``.

Reads the newest ``<timestamp>/vis_data/scalars.json`` under ``WORK_DIR`` (written by mmengine's
``LocalVisBackend``) and prints every metric of its last validation record.
"""
import argparse
import glob
import json
import os.path as osp
import sys


def last_validation_record(work_dir: str) -> dict:
    logs = sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')))
    if not logs:
        sys.exit(f'No scalars.json under {work_dir!r}: did the training run reach a validation step?')
    with open(logs[-1]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    validations = [r for r in records if not any(k in r for k in ('loss', 'lr'))]
    if not validations:
        sys.exit(f'{logs[-1]} holds no validation record.')
    return validations[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('work_dir')
    record = last_validation_record(parser.parse_args().work_dir)
    metrics = {k: v for k, v in record.items() if k not in ('step', 'epoch', 'iter', 'data_time', 'time')}
    print('Validation metrics (step {}): {}'.format(record.get('step'), ', '.join(
        f'{k}={v:.4f}' if isinstance(v, float) else f'{k}={v}' for k, v in metrics.items())))


if __name__ == '__main__':
    main()
