"""A checkpoint that leaves most of a module's weights unloaded is refused, through every mmengine load path
(``load_checkpoint``, ``Runner.load_checkpoint``, ``Pretrained`` inits), unless a partial load is allowed."""
import pytest
import torch
from mmengine.model import BaseModule
from mmengine.runner.checkpoint import load_checkpoint
from torch import nn

from mmcausal.utils.checkpoint_coverage import CheckpointMismatchError, evaluation_loads, partial_loads_allowed


class Net(BaseModule):
    """A large backbone, a small head, an integer buffer and a norm layer with running statistics."""

    def __init__(self, init_cfg=None, width: int = 32) -> None:
        super().__init__(init_cfg=init_cfg)
        self.backbone = nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.Linear(width, width))
        self.head = nn.Linear(width, 2)
        self.register_buffer('index_table', torch.arange(10_000))  # persistent, but not a weight


def _save(state_dict: dict, tmp_path, name: str = 'ckpt.pth') -> str:
    path = str(tmp_path / name)
    torch.save(dict(state_dict=state_dict), path)
    return path


def _weights(net: nn.Module) -> dict:
    return {key: value for key, value in net.state_dict().items() if key != 'index_table'}


def test_the_own_checkpoint_loads(tmp_path):
    source, target = Net(), Net()
    load_checkpoint(target, _save(source.state_dict(), tmp_path))
    torch.testing.assert_close(target.head.weight, source.head.weight)


def test_a_small_part_missing_is_accepted(tmp_path):
    """Fine-tuning with a new head (or without the integer buffers) loads most of the weights: accepted."""
    state = {key: value for key, value in _weights(Net()).items() if not key.startswith('head.')}
    load_checkpoint(Net(), _save(state, tmp_path))


def test_evaluation_refuses_a_part_that_loads_nothing(tmp_path):
    """Most of the model but none of a part that inference runs: fine for fine-tuning, not to evaluate."""
    state = {key: value for key, value in _weights(Net()).items() if not key.startswith('head.')}
    path = _save(state, tmp_path)
    message = (r'not loaded: head\.weight, head\.bias; loaded: only backbone\nthe checkpoint loads none of the weights '
               r'of Net\.head: evaluating would use it as randomly initialised')
    with evaluation_loads(), pytest.raises(CheckpointMismatchError, match=message):
        load_checkpoint(Net(), path)
    with evaluation_loads(), partial_loads_allowed():
        load_checkpoint(Net(), path)
    load_checkpoint(Net(), path)  # outside an evaluation (fine-tuning with a new head)


def test_evaluation_goes_without_an_auxiliary_head(tmp_path):
    """mmseg's auxiliary heads serve training only; a head missing a single weight still loads."""
    class Segmentor(Net):

        def __init__(self) -> None:
            super().__init__()
            self.auxiliary_head = nn.Linear(32, 2)

    state = {key: value for key, value in _weights(Segmentor()).items()
             if not key.startswith('auxiliary_head.') and key != 'head.bias'}
    with evaluation_loads():
        load_checkpoint(Segmentor(), _save(state, tmp_path))


def test_another_models_checkpoint_is_refused(tmp_path):
    path = _save({'conv.weight': torch.zeros(8, 3, 3, 3), 'fc.bias': torch.zeros(8)}, tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r'^not loaded: backbone\.0\.weight, .* \(100 % of the '
                       r'elements\)\nits keys: conv\.weight, fc\.bias \(0 of its 2 are keys of this model\)\n'
                       r'\(to load it partly on purpose: --allow-partial-load\)\n'
                       r'the checkpoint loads 0 of the 10 weights of Net\. It is a checkpoint of another model: use '
                       r'one of this model\.$'):
        load_checkpoint(Net(), path)


def test_keys_under_a_prefix_name_the_prefix(tmp_path):
    state = {f'backbone.{key}': value for key, value in _weights(Net()).items()}
    with pytest.raises(CheckpointMismatchError, match=r"prefix 'backbone\.'.*prefix='backbone\.'"):
        load_checkpoint(Net(), _save(state, tmp_path))


def test_a_part_of_the_model_names_the_module_to_load_it_into(tmp_path):
    state = {key[len('backbone.'):]: value for key, value in _weights(Net()).items() if key.startswith('backbone.')}
    with pytest.raises(CheckpointMismatchError, match=r"only the 'backbone' of this model.*model\.backbone"):
        load_checkpoint(Net(), _save(state, tmp_path))


def test_another_size_names_the_mismatched_shapes(tmp_path):
    with pytest.raises(CheckpointMismatchError,
                       match=r'tensors have other shapes: backbone\.0\.weight(.|\n)*another size of this model'):
        load_checkpoint(Net(), _save(_weights(Net(width=16)), tmp_path))


def test_a_partial_load_on_purpose(tmp_path):
    path = _save({'head.weight': torch.ones(2, 32)}, tmp_path)
    net = Net()
    with partial_loads_allowed():
        load_checkpoint(net, path)
    assert bool((net.head.weight == 1).all())
    with pytest.raises(CheckpointMismatchError):
        load_checkpoint(net, path)  # the permission ends with the block


def test_pretrained_init_that_loads_nothing_is_refused(tmp_path):
    """A whole model's checkpoint given to a part's ``Pretrained`` init without ``prefix``."""
    whole = {f'backbone.{key}': value for key, value in _weights(Net()).items()}
    net = Net(init_cfg=dict(type='Pretrained', checkpoint=_save(whole, tmp_path)))
    with pytest.raises(CheckpointMismatchError, match="prefix 'backbone.'"):
        net.init_weights()


def test_through_a_wrapper_the_wrapped_module_is_checked(tmp_path):
    from mmengine.model import BaseTTAModel

    class TestTimeAugmentation(BaseTTAModel):

        def merge_preds(self, data_samples_list):
            return data_samples_list

    class Model(Net):

        def test_step(self, data):
            return data

    with pytest.raises(CheckpointMismatchError, match='of Model'):
        load_checkpoint(TestTimeAugmentation(module=Model()), _save({'x.weight': torch.zeros(3)}, tmp_path))
