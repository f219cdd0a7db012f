"""Which mmcausal source one training step of a config's network runs: the files, functions and lines a forward and
backward execute (:mod:`mmcausal.analysis.code_path`), i.e. how many places a reader visits to follow the model.

    python tools/analysis_tools/code_path.py CONFIG [CONFIG ...] [--functions]

One line per config (files, functions, lines), then one line per file with its executed line count (and, with
``--functions``, the functions entered). The network runs on the CPU at the config's input size with a random init.
"""
import argparse
import sys
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run from anywhere: mmcausal from this checkout

import mmcausal  # noqa: E402,F401  (registers every model)
from mmcausal.analysis.code_path import config_code_path  # noqa: E402
from mmcausal.utils.config_reading import read_config  # noqa: E402


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('configs', nargs='+', help='configs whose network to trace')
    parser.add_argument('--functions', action='store_true', help='list the functions entered in each file')
    args = parser.parse_args(argv)
    for config in args.configs:
        if not Path(config).is_file():
            parser.error(f'config file not found: {config}')
        path = config_code_path(read_config(config))
        print(f'{config}: {path.num_files} files, {path.num_functions} functions, {path.num_lines} lines')
        for name in sorted(path.lines):
            functions = f'  {", ".join(sorted(path.functions[name]))}' if args.functions else ''
            print(f'    {name}: {len(path.lines[name])} lines{functions}')


if __name__ == '__main__':
    main()
