"""Contrastive image-text pre-training (CLIP) with any backbone as the image tower: :class:`ContrastiveCLIP`
(mmpretrain's CLIP text tower and zero-shot classifier, trainable), the global-batch InfoNCE
(:class:`ContrastiveLoss`) and its tokenizers (:mod:`.tokenizers`). It takes a backbone of any family and imports
none."""
from .loss import ContrastiveLoss, gather_with_grad
from .model import ContrastiveCLIP
from .tokenizers import OpenCLIPTokenizer, WordTokenizer

__all__ = ['ContrastiveCLIP', 'ContrastiveLoss', 'OpenCLIPTokenizer', 'WordTokenizer', 'gather_with_grad']
