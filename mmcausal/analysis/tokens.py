"""Where a block's tokens sit, for the analysis tools.

A layer is one block of ``backbone.blocks()`` (every mmcausal backbone; a pyramid counts its blocks across stages).
:func:`record_block` reads the ``(tokens, layout)`` a block runs on and its ``(B, N, D)`` output with a forward hook;
:func:`patch_slots` / :func:`token_slot` map between sequence slots and cells of the image's token grid (raster
order), through the class token (first or last) and a token order such as De-focus's sectioned patch rearrangement.
A token is named ``'cls'`` or by its patch index ``r * w + c`` on the ``h x w`` grid of the image.
"""
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple, Union

import torch
from mmengine.model import BaseModel
from torch import Tensor, nn

from mmcausal.models.layers import TokenLayout
from .errors import AnalysisError
from .resolution_eval import unwrap

Token = Union[str, int]  # 'cls' or a patch index in raster order


def parse_token(text: str) -> Token:
    """``'cls'`` or a non-negative patch index (a command-line value)."""
    if text == 'cls':
        return text
    if not text.isdigit():
        raise AnalysisError(f'A token is "cls" or a patch index r * w + c (a non-negative integer), got {text!r}.')
    return int(text)


def analysed_backbone(model: nn.Module) -> nn.Module:
    """``model.backbone`` (or ``model`` itself) if it lists its blocks (``blocks()``), else a clear error."""
    model = unwrap(model)
    backbone = getattr(model, 'backbone', model)
    if not callable(getattr(backbone, 'blocks', None)):
        raise AnalysisError(f'{type(backbone).__name__} does not list its blocks (blocks()); the per-layer maps need '
                            'an mmcausal backbone.')
    return backbone


def no_attention_error(model: nn.Module,
                       hint: str = ' Analyse a backbone with attention: iLLaMA, VisionLLaMA, De-focus ViT or CaiT.'
                       ) -> AnalysisError:
    """The error for a model whose token mixers form no attention matrix (De-focus Mamba, RetNet); ``hint`` says
    what to do instead."""
    backbone = analysed_backbone(model)
    mixers = sorted({type(getattr(block, 'attn', block)).__name__ for block in backbone.blocks()})
    return AnalysisError(f'{type(backbone).__name__} has no attention weights: its token mixer ({", ".join(mixers)}) '
                         f'has no AttentionProbe (a selective scan or a retention forms no attention matrix).{hint}')


def layer_block(model: nn.Module, layer: int) -> Tuple[int, nn.Module]:
    """``(index, block)`` of ``layer`` (negative counts from the end) among the backbone's blocks."""
    backbone = analysed_backbone(model)
    blocks = backbone.blocks()
    index = layer + len(blocks) if layer < 0 else layer
    if not 0 <= index < len(blocks):
        raise AnalysisError(f'Layer {layer} is out of range: {type(backbone).__name__} has {len(blocks)} blocks '
                            f'(0..{len(blocks) - 1}, or -1 for the last).')
    return index, blocks[index]


def run_model(model: nn.Module, inputs: Tensor) -> object:
    """Forward ``(B, C, H, W)`` network inputs: ``mode='tensor'`` for a whole model, a plain call for a backbone."""
    return model(inputs, mode='tensor') if isinstance(unwrap(model), BaseModel) else model(inputs)


@dataclass
class BlockCall:
    """One call of a block: the layout it ran with and its ``(B, N, D)`` output (in the autograd graph if any)."""
    layout: TokenLayout
    output: Tensor


@contextmanager
def record_block(block: nn.Module) -> Iterator[List[BlockCall]]:
    """Record every call of ``block`` (``block(tokens, layout)``) inside the ``with`` block."""
    calls: List[BlockCall] = []

    def hook(module, args, kwargs, output):
        calls.append(BlockCall(args[1] if len(args) > 1 else kwargs.get('layout'), output))

    handle = block.register_forward_hook(hook, with_kwargs=True)
    try:
        yield calls
    finally:
        handle.remove()


def image_grid(layout: TokenLayout) -> Tuple[int, int]:
    """``(h, w)`` token grid of the image (without any padding the backbone added to whole sections)."""
    return tuple(layout.image_grid or layout.grid)


def cls_slot(layout: TokenLayout, num_tokens: int) -> Optional[int]:
    """Sequence slot of the class token (None without one)."""
    return {None: None, 'first': 0, 'last': num_tokens - 1}[layout.cls_position]


def patch_slots(layout: TokenLayout, num_tokens: int) -> Tensor:
    """``(h * w,)`` sequence slot of every cell of the image grid, in raster order."""
    height, width = layout.grid
    expected = height * width + (layout.cls_position is not None)
    if num_tokens != expected:
        raise AnalysisError(f'The layer runs on {num_tokens} tokens, not the {expected} of its {height}x{width} grid '
                            f'and class token ({layout.cls_position}); this tool cannot place them on the image.')
    rows, cols = image_grid(layout)
    cells = (torch.arange(rows)[:, None] * width + torch.arange(cols)[None, :]).flatten()
    slot_of_cell = torch.arange(height * width) if layout.order is None else layout.order.cpu().argsort()
    return slot_of_cell[cells] + int(layout.cls_position == 'first')


def token_slot(layout: TokenLayout, num_tokens: int, token: Token) -> int:
    """Sequence slot of ``token`` (``'cls'`` or a patch index) at a layer, or a clear error."""
    if token == 'cls':
        slot = cls_slot(layout, num_tokens)
        if slot is None:
            raise AnalysisError('This layer\'s sequence has no class token; name a patch index instead of "cls".')
        return slot
    slots = patch_slots(layout, num_tokens)
    if not 0 <= token < len(slots):
        rows, cols = image_grid(layout)
        raise AnalysisError(f'Token {token} is out of range: the layer has {len(slots)} patch tokens ({rows}x{cols} '
                            f'grid, indices 0..{len(slots) - 1}) besides "cls".')
    return int(slots[token])
