"""check_choice: the one validator of settings that must be one of a fixed set of names."""
import pytest

from mmcausal.engine.hooks import SoftMaskHook
from mmcausal.models.layers import BackboneConfigError
from mmcausal.models.layers.attention import AttentionConfigError, SelfAttention
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import InvalidChoiceError, check_choice


def test_check_choice_returns_a_valid_value():
    assert check_choice('mode', 'b', ('b', 'a')) == 'b'
    assert check_choice('layout', 'clean', {'clean': 1, 'official_mae': 2}) == 'clean'


def test_check_choice_message_names_the_value_and_the_sorted_choices():
    with pytest.raises(InvalidChoiceError) as error_info:
        check_choice('soft-mask schedule', 'cosine', ('linear', 'constant'))
    assert str(error_info.value) == "Unknown soft-mask schedule 'cosine'; choose one of ['constant', 'linear']."
    assert isinstance(error_info.value, UserInputError) and isinstance(error_info.value, ValueError)


def test_check_choice_raises_the_given_error_class():
    with pytest.raises(BackboneConfigError, match=r"^Unknown out_type 3; choose one of \['raw'\]\.$"):
        check_choice('out_type', 3, ('raw', ), BackboneConfigError)


def test_settings_use_it_with_their_own_error_class():
    with pytest.raises(AttentionConfigError, match=r"Unknown attention mask_mode 'sideways'; choose one of "
                                                   r"\['bidirectional', 'causal', 'official'\]\."):
        SelfAttention(32, 4, mask_mode='sideways')
    with pytest.raises(InvalidChoiceError, match="Unknown soft-mask schedule 'cosine'"):
        SoftMaskHook(schedule='cosine')
