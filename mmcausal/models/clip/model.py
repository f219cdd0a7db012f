"""A CLIP that trains: mmpretrain's ``CLIPZeroShot`` (text tower, projections, zero-shot prediction) with a loss.

mmpretrain ships CLIP for zero-shot inference with converted OpenAI weights only. :class:`ContrastiveCLIP` keeps all
of it (the causal text transformer with the ``<end>`` token pooled, the learnable temperature, class-name prototypes
from prompt templates) and adds the training step: any backbone as the image tower (``vision_backbone``: De-focus,
iLLaMA, VisionLLaMA, mmpretrain's ViT, ... returning ``(B, C)`` features, e.g. ``out_type='cls_token'``), the captions
of the batch tokenized by the model's tokenizer and :class:`~.loss.ContrastiveLoss` across processes.
"""
import math
from typing import Dict, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F

from mmcausal.compat.mmpretrain_clip import import_mmpretrain_clip
from mmcausal.registry import MODELS

_mmpretrain_clip = import_mmpretrain_clip()
CLIPZeroShot = _mmpretrain_clip.CLIPZeroShot


def _check_zero_shot(text_prototype: Union[str, Sequence[str]], text_prompt: Union[str, Sequence[str]]) -> None:
    """One line for a prototype or prompt name mmpretrain does not know, or a template without ``{}``."""
    prototypes, prompts = _mmpretrain_clip.clip.PROTOTYPE_MAP, _mmpretrain_clip.clip.PROMPT_MAP
    if isinstance(text_prototype, str) and text_prototype not in prototypes:
        raise ValueError(f'ContrastiveCLIP: text_prototype {text_prototype!r} is none of {sorted(prototypes)}; give '
                         'one of them or a list of class names.')
    if isinstance(text_prompt, str):
        if text_prompt not in prompts:
            raise ValueError(f'ContrastiveCLIP: text_prompt {text_prompt!r} is none of {sorted(prompts)}; give one of '
                             "them or a list of templates such as 'a photo of a {}.'.")
    elif not text_prompt or any('{}' not in template for template in text_prompt):
        raise ValueError('ContrastiveCLIP: every text_prompt template needs one {} for the class name, e.g. '
                         "'a photo of a {}.'.")


@MODELS.register_module()
class ContrastiveCLIP(CLIPZeroShot):
    """CLIP with contrastive training (Radford et al. 2021) and mmpretrain's zero-shot classification.

    ``forward(images, data_samples, mode='loss')`` reads each sample's caption from ``data_sample.text`` (the
    pipeline's ``PackInputs(algorithm_keys=['text'])``) and returns ``loss_contrastive`` and the temperature's
    ``logit_scale`` (logged). ``mode='predict'`` classifies images against the text prototypes of
    ``text_prototype`` (class names) and ``text_prompt`` (templates), which are recomputed after training steps.

    The temperature ``t`` starts at ``log(1 / 0.07)`` and is clamped to ``[0, log(max_logit_scale)]`` before each
    use (CLIP: logits scaled by at most 100; OpenCLIP clamps after every step, which is the same number).

    Args:
        vision_backbone, projection, text_backbone, vocab_size, transformer_width, proj_dim, context_length,
            text_prototype, data_preprocessor, init_cfg: as mmpretrain's ``CLIPZeroShot`` (``projection``:
            ``CLIPProjection`` from the image features to ``proj_dim``).
        text_prompt: The zero-shot templates: a name of mmpretrain's (``'openai_imagenet'``, ``'vanilla'``, ...) or
            a list of ``str.format`` templates with one ``{}`` for the class name; class prototypes average them.
        tokenizer: A ``TOKENIZER`` config: ``OpenCLIPTokenizer`` (CLIP's BPE) or ``WordTokenizer``.
        loss: The contrastive loss config (default ``ContrastiveLoss``).
        max_logit_scale: Upper bound of ``exp(t)``.
    """

    def __init__(self,
                 vision_backbone: dict,
                 projection: dict,
                 text_backbone: dict,
                 tokenizer: dict,
                 vocab_size: int,
                 transformer_width: int,
                 proj_dim: int,
                 context_length: int = 77,
                 text_prototype: Union[str, List[str]] = 'imagenet',
                 text_prompt: Union[str, Sequence[str]] = 'vanilla',
                 loss: Optional[dict] = None,
                 max_logit_scale: float = 100.0,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        _check_zero_shot(text_prototype, text_prompt)
        templates = None if isinstance(text_prompt, str) else list(text_prompt)
        super().__init__(vision_backbone, projection, dict(text_backbone), tokenizer, vocab_size, transformer_width,
                         proj_dim, context_length, data_preprocessor, init_cfg, text_prototype,
                         'vanilla' if templates is not None else text_prompt)
        if templates is not None:  # prompt templates of the config's own, e.g. 'a photo of a {}.'
            self.prompt = [template.format for template in templates]
        needed = getattr(self.tokenizer, 'vocab_size', vocab_size)
        if needed > vocab_size:
            raise ValueError(f'ContrastiveCLIP: the tokenizer has {needed} ids but vocab_size is {vocab_size}; '
                             f'set vocab_size={needed}.')
        self.loss_module = MODELS.build(loss or dict(type='ContrastiveLoss'))
        self.max_logit_scale = max_logit_scale

    def forward(self, images: torch.Tensor, data_samples: Optional[list] = None, mode: str = 'predict'):
        """``mode='loss'``: the contrastive loss of the batch; ``'predict'``: zero-shot classification."""
        if mode == 'loss':
            return self.loss(images, data_samples)
        return super().forward(images, data_samples, mode)

    def tokenize(self, texts: Union[str, Sequence[str]]) -> torch.Tensor:
        """Captions -> ``(N, context_length)`` ids."""
        return self.tokenizer([texts] if isinstance(texts, str) else list(texts), self.context_length)

    def clamped_logit_scale(self) -> torch.Tensor:
        """``exp(t)`` after clamping ``t`` in place to ``[0, log(max_logit_scale)]``."""
        with torch.no_grad():
            self.logit_scale.clamp_(0, math.log(self.max_logit_scale))
        return self.logit_scale.exp()

    def loss(self, images: torch.Tensor, data_samples: list) -> Dict[str, torch.Tensor]:
        """``(B, 3, H, W)`` images and their captions -> ``loss_contrastive`` and ``logit_scale``."""
        texts = [sample.get('text') for sample in data_samples]
        if any(not isinstance(text, str) for text in texts):
            raise ValueError('ContrastiveCLIP: a training sample has no caption in data_sample.text; end the '
                             "pipeline with PackInputs(algorithm_keys=['text']).")
        self.text_prototype_embeds = None  # the towers change: prototypes are recomputed at the next prediction
        image_features = F.normalize(self.extract_image_feat(images), dim=-1)
        text_features = F.normalize(self.extract_text_feat(self.tokenize(texts).to(images.device)), dim=-1)
        logit_scale = self.clamped_logit_scale()
        loss = self.loss_module(image_features, text_features, logit_scale)
        return dict(loss_contrastive=loss, logit_scale=logit_scale.detach())

    def predict(self, images: torch.Tensor, data_samples: Optional[list] = None) -> list:
        """Zero-shot classification (mmpretrain's), with prototypes of the current weights."""
        if self.training:
            self.text_prototype_embeds = None
        return super().predict(images, data_samples)
