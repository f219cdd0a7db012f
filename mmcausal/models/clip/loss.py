"""CLIP's symmetric InfoNCE loss over the global batch (Radford et al. 2021, Fig. 3; OpenCLIP's ``ClipLoss``).

With ``W`` processes of ``B`` pairs each, features are gathered with gradient (``torch.distributed.nn``'s
differentiable ``all_gather``), so every image is contrasted with all ``W * B`` captions and every caption with all
``W * B`` images. Each process computes the rows of its own pairs (OpenCLIP's ``local_loss=True,
gather_with_grad=True``): for local pair ``i`` at global index ``g = rank * B + i``,

    loss = 1/2 * (CE(s * I_local @ T_all^T, g) + CE(s * T_local @ I_all^T, g)),

averaged over the local rows. Averaged over processes (as DDP averages gradients), value and gradient are those of
the same loss on the ``W * B`` concatenated pairs in one process. Every process must hold the same ``B``
(``drop_last=True`` in the training dataloader).
"""
from typing import Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from mmcausal.registry import MODELS


def _rank_and_world_size() -> Tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_with_grad(features: torch.Tensor) -> torch.Tensor:
    """``(B, D)`` local features -> ``(W * B, D)`` features of all processes, in rank order, differentiable."""
    _, world_size = _rank_and_world_size()
    if world_size == 1:
        return features
    from torch.distributed.nn.functional import all_gather
    return torch.cat(all_gather(features), dim=0)


@MODELS.register_module()
class ContrastiveLoss(nn.Module):
    """Symmetric image-text InfoNCE with negatives from every process (module docstring).

    Args:
        loss_weight: Factor on the loss.
    """

    def __init__(self, loss_weight: float = 1.0) -> None:
        super().__init__()
        self.loss_weight = loss_weight

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                logit_scale: torch.Tensor) -> torch.Tensor:
        """``(B, D)`` L2-normalised image and text features of matching pairs, scalar ``exp(t)`` -> scalar loss."""
        if image_features.shape != text_features.shape:
            raise ValueError(f'ContrastiveLoss: {tuple(image_features.shape)} image features and '
                             f'{tuple(text_features.shape)} text features; they must pair up one to one.')
        rank, _ = _rank_and_world_size()
        all_images, all_texts = gather_with_grad(image_features), gather_with_grad(text_features)
        batch = image_features.shape[0]
        targets = torch.arange(batch, device=image_features.device) + rank * batch
        image_to_text = logit_scale * image_features @ all_texts.t()
        text_to_image = logit_scale * text_features @ all_images.t()
        loss = (F.cross_entropy(image_to_text, targets) + F.cross_entropy(text_to_image, targets)) / 2
        return self.loss_weight * loss
