"""mmcausal/analysis/resolution_plot.py: the resolution sweep of tools/analysis_tools/eval_resolutions.py drawn and
tabled (its command-line run with --out-dir is in tests/test_analysis/test_resolution_eval.py)."""
import csv

from mmcausal.analysis.resolution_plot import write_resolution_plot


def test_plot_and_table_of_top1_per_size_and_scheme(tmp_path):
    sizes = [(64, 64), (96, 96), (48, 128)]
    results = {'2d': {(64, 64): 80., (96, 96): 51.5, (48, 128): 40.},
               'as2d': {(64, 64): 80., (96, 96): 77.25, (48, 128): 61.}}
    png, table = write_resolution_plot(results, sizes, str(tmp_path / 'out'), (64, 64), 'twin')
    assert png == str(tmp_path / 'out' / 'top1_vs_resolution.png') and (tmp_path / 'out' / png).stat().st_size > 1000
    with open(table) as file:
        rows = list(csv.reader(file))
    assert rows[0] == ['rope', 'size', 'height', 'width', 'top1']
    assert rows[1:] == [['2d', '64', '64', '64', '80'], ['2d', '96', '96', '96', '51.5'],
                        ['2d', '48x128', '48', '128', '40'], ['as2d', '64', '64', '64', '80'],
                        ['as2d', '96', '96', '96', '77.25'], ['as2d', '48x128', '48', '128', '61']]
