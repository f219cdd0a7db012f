"""One config per row of paper Table 4 (De-focus Mamba-B ablations): each builds, and differs from its table's default
row in exactly the components the row names."""
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmcausal.registry import MODELS

CONFIGS = Path(__file__).resolve().parents[3] / 'configs' / 'defocus'
DEFAULT = 'dpr0.4'  # the default row of (a) and (c) and the "0.4" row of (b), by the table's caption
#: table -> {row config (between "ablation-" and "_8xb64"): (paper top-1, the components the row changes)}
TABLE4 = {
    'a': {
        'no-decay-no-rope': (75.2, dict(decay=None, rope=None)),
        'no-decay-fixed-rope': (75.3, dict(decay=None, rope='fixed')),
        'fixed-decay-no-rope': (79.9, dict(decay='fixed', rope=None)),
        'fixed-decay-fixed-rope': (80.0, dict(decay='fixed', rope='fixed')),
        'fixed-decay': (80.6, dict(decay='fixed')),
        'learnable-decay-no-rope': (80.4, dict(decay='learnable', rope=None)),
        'learnable-decay': (81.2, dict(decay='learnable')),
        DEFAULT: (81.3, dict()),
    },
    'b': {
        'dpr0.1': (79.6, dict(drop_path=('constant', 0.1))),
        DEFAULT: (81.6, dict(drop_path=('constant', 0.4))),
        'dpr0.7': (80.9, dict(drop_path=('constant', 0.7))),
        'dpr-linear': (82.0, dict()),
    },
    'c': {
        'cls-loss': (81.6, dict(loss=('cls', None))),
        'avg-loss': (77.2, dict(loss=('avg', None))),
        'cls-avg-loss': (79.7, dict(loss=('cls_avg', None))),
        DEFAULT: (82.0, dict()),
    },
}
#: each table's default row (paper Table 4 caption)
DEFAULTS = {
    'a': dict(decay='data_dependent', rope='learnable', drop_path=('constant', 0.4), loss=('cls', 'per_token')),
    'b': dict(decay='data_dependent', rope='learnable', drop_path=('linear', 0.1, 0.7), loss=('cls', 'per_token')),
    'c': dict(decay='data_dependent', rope='learnable', drop_path=('constant', 0.4), loss=('cls', 'per_token')),
}
ROWS = [(table, row) for table, rows in TABLE4.items() for row in rows]


def _name(row: str) -> str:
    return f'defocus-mamba-base_ablation-{row}_8xb64-300e_in1k.py'


def _components(cfg: Config) -> dict:
    """What Table 4 varies, read from a config."""
    backbone, head = cfg.model.backbone, cfg.model.head
    rope = backbone.get('rope', 'unpaired') and ('learnable' if backbone.get('rope_learnable', True) else 'fixed')
    schedule = [hook for hook in cfg.custom_hooks if hook.type == 'DropPathScheduleHook']
    drop_path = ('linear', schedule[0].start, schedule[0].end) if schedule else ('constant', backbone.drop_path_rate)
    return dict(decay=backbone.get('decay', 'data_dependent'), rope=rope or None, drop_path=drop_path,
                loss=(head.get('feature', 'cls'), head.get('aux_loss', 'per_token')))


def test_every_ablation_config_is_a_row_of_table_4():
    assert sorted(p.name for p in CONFIGS.glob('defocus-mamba-base_ablation-*.py')) == sorted(
        {_name(row) for _, row in ROWS})


@pytest.mark.parametrize('table,row', ROWS)
def test_ablation_row_differs_from_its_default_in_the_named_components_only(table, row):
    cfg = Config.fromfile(str(CONFIGS / _name(row)))
    _, changes = TABLE4[table][row]
    assert _components(cfg) == {**DEFAULTS[table], **changes}
    # the rest of the recipe is the released Mamba-B one
    base = Config.fromfile(str(CONFIGS / 'defocus-mamba-base_8xb64-300e_in1k.py'))
    for key in ('optim_wrapper', 'param_scheduler', 'train_cfg', 'train_dataloader', 'auto_scale_lr'):
        assert cfg[key] == base[key], key
    assert [h for h in cfg.custom_hooks if h.type != 'DropPathScheduleHook'] == [
        h for h in base.custom_hooks if h.type != 'DropPathScheduleHook']
    # built (at a small width): the components reach the modules
    cfg.model.backbone.arch = dict(embed_dims=64, num_layers=2)
    cfg.model.head.in_channels = 64
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    expected = _components(cfg)
    for layer in model.backbone.layers:
        mixer = layer.attn
        assert mixer.decay == expected['decay']
        assert (mixer.rope and ('learnable' if mixer.rope.learnable else 'fixed')) == expected['rope']
    assert model.backbone.drop_path_rate == expected['drop_path'][1]
    assert (model.head.feature, model.head.aux_loss) == expected['loss']


def test_readme_gives_the_paper_number_beside_each_row():
    """The family README's Table 4: one line per row with the table, the paper's top-1 and the row's config."""
    lines = (CONFIGS / 'README.md').read_text().splitlines()
    missing = [(table, row) for table, row in ROWS if not any(
        line.startswith(f'| `{_name(row)}` | ({table}) |') and f'| {TABLE4[table][row][0]} |' in line
        for line in lines)]
    assert missing == []
