"""VisionLLaMA encoder for mmpretrain's ``MAE`` algorithm (He et al. 2022; VisionLLaMA Sec. 4.2.2).

The encoder sees only the kept 25 % of the patches, but every kept patch keeps the RoPE position of its
*original* grid cell: the ``(N, 2)`` position table is gathered per sample with the kept indices into
``(B, N_keep, 2)`` before it becomes angles. The decoder (mmpretrain's ``MAEPretrainDecoder``) and the
``norm_pix`` loss are the stock ones; the decoder expects a leading class token, which the encoder provides.
"""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from mmcausal.registry import MODELS
from ..layers import BackboneConfigError, TokenLayout, check_image_batch
from .backbone import VisionLLaMA


def random_masking(batch: int, num_tokens: int, mask_ratio: float,
                   device: Optional[torch.device] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """MAE per-sample random masking by argsort of uniform noise.

    Returns:
        ``ids_keep`` ``(B, N_keep)`` indices of the kept tokens (in shuffled order), ``mask`` ``(B, N)``
        with 0 = kept and 1 = removed, and ``ids_restore`` ``(B, N)`` that unshuffles ``[kept, removed]``.
    """
    num_keep = int(num_tokens * (1 - mask_ratio))
    ids_shuffle = torch.rand(batch, num_tokens, device=device).argsort(dim=1)
    ids_restore = ids_shuffle.argsort(dim=1)
    mask = torch.ones(batch, num_tokens, device=device)
    mask[:, :num_keep] = 0
    return ids_shuffle[:, :num_keep], mask.gather(1, ids_restore), ids_restore


@MODELS.register_module()
class MAEVisionLLaMA(VisionLLaMA):
    """:class:`VisionLLaMA` that masks patches for MAE pre-training.

    ``forward(x, mask=True)`` returns ``(latent (B, 1 + N_keep, D), mask (B, N), ids_restore (B, N))`` like
    mmpretrain's ``MAEViT``; ``forward(x, mask=None)`` is the plain backbone forward.

    Args:
        mask_ratio: fraction of patches removed (0.75 in MAE and VisionLLaMA).
        cls_through_encoder: True (default): the class token is encoded with the kept patches (rotation
            ``cls_rope``), as in MAE. False reproduces the official VisionLLaMA code (``MAELLaMA`` in
            ``mmpretrain/mmpretrain/models/selfsup/mae.py``), which runs the blocks on the patches only and
            prepends the raw token before the final norm; use it to continue pre-training from the released
            weights.
        Others: as :class:`VisionLLaMA`; defaults are the MAE ones (cls token, raw tokens, final norm).
    """
    refused_mask_modes = dict.fromkeys(
        ('causal', 'official'), 'it keeps a random subset of patches in shuffled order, which has no causal order; '
        'keep "bidirectional" (fine-tune causally from it).')

    def __init__(self, arch: Union[str, dict] = 'base', mask_ratio: float = 0.75, out_type: str = 'raw',
                 with_cls_token: bool = True, cls_through_encoder: bool = True, **kwargs) -> None:
        if not with_cls_token:
            raise BackboneConfigError('MAEVisionLLaMA needs with_cls_token=True: the MAE decoder drops a leading cls '
                                      'token.')
        if not 0. <= mask_ratio < 1.:
            raise BackboneConfigError(f'mask_ratio must be in [0, 1), got {mask_ratio}.')
        super().__init__(arch=arch, out_type=out_type, with_cls_token=True, **kwargs)
        if self.window_size:
            raise BackboneConfigError('MAEVisionLLaMA keeps a random subset of tokens, which windows cannot partition; '
                                      'set window_size=0.')
        if out_type != 'raw' or self.out_indices != [self.num_layers - 1]:
            raise BackboneConfigError('MAEVisionLLaMA returns the raw tokens of the last block for the MAE decoder; '
                                      'keep out_type="raw" and out_indices=-1.')
        self.mask_ratio = mask_ratio
        self.cls_through_encoder = cls_through_encoder

    def forward(self, x: Tensor, mask: Optional[bool] = True):
        if not mask:
            return super().forward(x)
        check_image_batch(x, self.in_channels)
        patches, grid = self.patch_embed(x)
        ids_keep, token_mask, ids_restore = random_masking(patches.shape[0], patches.shape[1], self.mask_ratio,
                                                           x.device)
        kept = patches.gather(1, ids_keep.unsqueeze(-1).expand(-1, -1, patches.shape[-1]))
        cls_tokens = self.cls_token.expand(kept.shape[0], -1, -1)
        # every kept patch keeps the RoPE position of its original grid cell: (B, [1 +] N_keep, hd/2) angles
        cls_position = 'first' if self.cls_through_encoder else None
        angles = self.rope.sequence_angles(grid, cls_position, x.device, keep=ids_keep)
        layout = TokenLayout(grid, cls_position, angles, self.rope)
        if not self.cls_through_encoder:
            latent = self.run_layers(kept, layout)[-1]
            return torch.cat([self.norm(cls_tokens), latent], dim=1), token_mask, ids_restore
        latent = self.run_layers(torch.cat([cls_tokens, kept], dim=1), layout)[-1]
        return latent, token_mask, ids_restore
