"""Mark checkpoint files as trusted for full unpickling (the explicit opt-in for foreign files).

    python tools/misc/trust_checkpoint.py CKPT [CKPT ...]

mmcausal loads every checkpoint with ``torch.load(weights_only=True)``. A file that also pickles
other objects (numpy values, ``argparse.Namespace``, mmengine's ``HistoryBuffer``...) is only loaded
fully if its sha256 is in the trust store (``$MMCAUSAL_HOME/trusted_checkpoints.txt``, default
``~/.cache/mmcausal``). Checkpoints written by an mmengine Runner on this machine are recorded
automatically; use this tool for files from elsewhere, and only if you trust their origin:
unpickling can run arbitrary code. Changing a file's content revokes its trust.
"""
import argparse
from typing import List, Optional

from mmcausal.utils import trust_checkpoint, trust_store_path


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Trust checkpoint files for full unpickling (only files whose origin you '
        'trust: unpickling can run arbitrary code).')
    parser.add_argument('checkpoints', nargs='+', metavar='CKPT', help='checkpoint file(s)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    for path in args.checkpoints:
        try:
            digest = trust_checkpoint(path)
        except FileNotFoundError as error:
            raise SystemExit(str(error))
        print(f'trusted {digest} {path}')
    print(f'trust store: {trust_store_path()}')


if __name__ == '__main__':
    main()
