"""Where analysis reads attention weights: each mixer's :class:`AttentionProbe` and the
:func:`explicit_attention_mode` context that routes attention through the explicit path so the weights pass the probe.

Mixers check ``EXPLICIT_ATTENTION.get()`` (a context variable) to choose their path; :func:`record_attention`
collects the weights of every probe of a model.
"""
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Dict, Iterator, List

from torch import Tensor, nn

EXPLICIT_ATTENTION: ContextVar[bool] = ContextVar('mmcausal_explicit_attention', default=False)


@contextmanager
def explicit_attention_mode() -> Iterator[None]:
    """Inside the block every attention with a probe takes the explicit path and passes its weights through
    its :class:`AttentionProbe` (for analysis: attention maps, ranks). Outputs equal the fast paths'; memory is
    O(B*heads*N^2), so use it for inspection, not training."""
    token = EXPLICIT_ATTENTION.set(True)
    try:
        yield
    finally:
        EXPLICIT_ATTENTION.reset(token)


class AttentionProbe(nn.Identity):
    """Probe point of an attention mixer: under :func:`explicit_attention_mode` the ``(B, heads, Nq, Nk)``
    weights that multiply ``v`` (after masking and normalisation) pass through it, so a forward hook reads them.
    It has no parameters and adds no state-dict keys."""


@contextmanager
def record_attention(model: nn.Module) -> Iterator[Dict[str, List[Tensor]]]:
    """Record the attention weights of every mixer of ``model`` during the forwards run inside the block.

    Yields ``{probe name: [weights (B, heads, Nq, Nk) per call]}`` (names like ``'layers.0.attn.attn_probe'``),
    filled as the model runs in :func:`explicit_attention_mode`; the hooks are removed on exit.
    """
    records: Dict[str, List[Tensor]] = {}
    handles = [module.register_forward_hook(lambda _, __, weights, name=name: records.setdefault(name, [])
                                            .append(weights.detach()))
               for name, module in model.named_modules() if isinstance(module, AttentionProbe)]
    try:
        with explicit_attention_mode():
            yield records
    finally:
        for handle in handles:
            handle.remove()
