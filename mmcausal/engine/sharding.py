"""FSDP wrapping for sharded training (mmengine's ``FlexibleRunner`` + ``FSDPStrategy``): one FSDP unit per block.

Config::

    runner_type = 'FlexibleRunner'
    strategy = dict(type='FSDPStrategy',
                    model_wrapper=dict(auto_wrap_policy=dict(type='block_wrap_policy')))
"""
from mmpretrain.models.backbones.vision_transformer import TransformerEncoderLayer
from torch import nn

from mmcausal.models.generation.conditioning import AdaLNZeroBlock
from mmcausal.models.layers import TransformerBlock
from mmcausal.registry import FUNCTIONS

#: the residual blocks that become FSDP units: every mmcausal backbone's (CaiT's class-attention blocks included),
#: the diffusion transformer's adaLN-Zero blocks and mmpretrain's ViT layer (the MAE decoder's blocks)
BLOCK_TYPES = (TransformerBlock, AdaLNZeroBlock, TransformerEncoderLayer)


@FUNCTIONS.register_module()
def block_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
    """FSDP ``auto_wrap_policy``: wrap every :data:`BLOCK_TYPES` block in its own FSDP unit.

    Only one block's full parameters are then gathered at a time (forward and backward); the stem, norms and
    heads stay in the root unit. Called by FSDP for each module, with ``recurse=True`` to ask whether to look
    into its children (always) and ``recurse=False`` whether to wrap it.
    """
    return recurse or isinstance(module, BLOCK_TYPES)
