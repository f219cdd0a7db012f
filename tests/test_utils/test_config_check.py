"""Settings no run can take and work dirs that cannot be directories are refused by class, naming the setting."""
import pytest
from mmengine.config import Config

from mmcausal.utils.config_check import WorkDirError, check_config_values, check_work_dir
from mmcausal.utils.validation import ConfigValueError


@pytest.mark.parametrize('key,value', [('batch_size', 0), ('batch_size', -4), ('batch_size', 2.0),
                                       ('batch_size', True), ('num_workers', -1), ('num_workers', '2')])
def test_dataloader_counts_must_be_integers_in_range(key, value):
    cfg = Config(dict(val_dataloader={**dict(batch_size=1, num_workers=0), key: value}))
    with pytest.raises(ConfigValueError, match=f'val_dataloader.{key} must be an integer'):
        check_config_values(cfg, ('val_dataloader', ))


@pytest.mark.parametrize('key', ['drop_rate', 'drop_path_rate', 'attn_drop_rate', 'ffn_drop', 'proj_drop',
                                 'dropout_ratio', 'mask_ratio', 'drop_prob', 'soft_mask_rate', 'dropout_rate'])
@pytest.mark.parametrize('value', [-0.1, 1.5])
def test_fractions_anywhere_in_the_model_must_be_in_the_unit_interval(key, value):
    cfg = Config(dict(model=dict(type='X', neck=dict(layers=[dict(type='Y', **{key: value})]))))
    with pytest.raises(ConfigValueError, match=rf'model\.neck\.layers\[0\]\.{key} is a fraction'):
        check_config_values(cfg, ())


@pytest.mark.parametrize('key,value', [('mlp_ratio', 4.0), ('growth_rate', 32), ('drop_path_rate', 0.3),
                                       ('dropout_ratio', 1), ('layer_decay_rate', 0.9), ('drop', True)])
def test_settings_that_are_not_fractions_or_are_in_range_pass(key, value):
    check_config_values(Config(dict(model=dict(type='X', backbone=dict(**{key: value})),
                                    train_dataloader=dict(batch_size=1, num_workers=0))), ('train_dataloader', ))


def test_work_dir_under_a_file_is_refused(tmp_path):
    (tmp_path / 'runs').write_text('')
    with pytest.raises(WorkDirError, match=r"'.*runs' is a file"):
        check_work_dir(str(tmp_path / 'runs' / 'a' / 'b'))
    with pytest.raises(WorkDirError, match='it is a file'):
        check_work_dir(str(tmp_path / 'runs'))
    check_work_dir(str(tmp_path / 'new' / 'dir'))  # to be created: fine
