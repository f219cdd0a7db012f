"""JudgeCNN: the small independent classifier that judges generated images of the CPU twins.

An evaluation network, not one of the papers' backbones: registered in ``MODELS`` (configs build it as an
mmpretrain classifier's backbone) but kept out of ``mmcausal.models`` and its backbone contract.

It shares nothing with the architectures under test (no attention, no RoPE, no normalisation layer of theirs), so a
generator cannot score well on it by sharing its biases. Three 3x3 conv stages (GroupNorm, SiLU), 2x2 max-pool after
every stage but the last; ``forward`` returns the last stage's map, which mmpretrain's ``GlobalAveragePooling`` neck
turns into the feature vector the metrics use (128-d by default) and a ``LinearClsHead`` into logits.
"""
from typing import Sequence, Tuple

from mmengine.model import BaseModule
from torch import Tensor, nn

from mmcausal.registry import MODELS


def _stage(in_channels: int, out_channels: int, num_groups: int, pool: bool) -> nn.Sequential:
    layers = [nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.GroupNorm(num_groups, out_channels), nn.SiLU()]
    return nn.Sequential(*layers, nn.MaxPool2d(2)) if pool else nn.Sequential(*layers)


@MODELS.register_module()
class JudgeCNN(BaseModule):
    """Conv stages ``channels`` (3x3 conv, GroupNorm of ``num_groups``, SiLU, max-pool between stages).

    Args:
        in_channels: Image channels.
        channels: Output channels of each stage (default 32-64-128, ~93k parameters).
        num_groups: GroupNorm groups of every stage (must divide each stage's channels).

    Input ``(B, in_channels, H, W)``; output a 1-tuple with the ``(B, channels[-1], H / 2^(S-1), W / 2^(S-1))`` map.
    """

    def __init__(self, in_channels: int = 3, channels: Sequence[int] = (32, 64, 128), num_groups: int = 8,
                 init_cfg=None) -> None:
        super().__init__(init_cfg=init_cfg)
        if any(c % num_groups for c in channels):
            raise ValueError(f'num_groups={num_groups} must divide every stage width, got channels={channels}')
        widths = [in_channels, *channels]
        self.stages = nn.Sequential(*(_stage(widths[i], widths[i + 1], num_groups, pool=i < len(channels) - 1)
                                      for i in range(len(channels))))

    def forward(self, x: Tensor) -> Tuple[Tensor]:
        return (self.stages(x), )
