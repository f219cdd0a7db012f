"""De-focus Attention Networks: the three backbones (:mod:`.backbone`) and the modules only they use, their causal
mixers (:mod:`.decay`, :mod:`.retention`, :mod:`.ssm` with :mod:`.scan`), the learnable-frequency RoPE
(:mod:`.learnable_rope`) and the sectioned token order (:mod:`.token_order`)."""
from .backbone import DefocusMamba, DefocusRetNet, DefocusViT
from .decay import DecayAttention, LearnableDecay, folded_decay_attention, retnet_decay_exponents
from .learnable_rope import ROPE_PAIRINGS, LearnableRoPE, apply_unpaired_rotary, defocus_frequencies
from .retention import MultiScaleRetention, RetentionConfigError, retention, retention_step
from .scan import SCAN_IMPLS, ScanConfigError, chunked_selective_scan, selective_scan, sequential_selective_scan
from .ssm import DefocusMambaMixer, group_rms_norm
from .token_order import TokenOrderError, sectioned_order

__all__ = [
    'DefocusMamba', 'DefocusRetNet', 'DefocusViT', 'DecayAttention', 'LearnableDecay', 'folded_decay_attention',
    'retnet_decay_exponents', 'ROPE_PAIRINGS', 'LearnableRoPE', 'apply_unpaired_rotary', 'defocus_frequencies',
    'MultiScaleRetention', 'RetentionConfigError', 'retention', 'retention_step', 'SCAN_IMPLS', 'ScanConfigError',
    'chunked_selective_scan', 'selective_scan', 'sequential_selective_scan', 'DefocusMambaMixer', 'group_rms_norm',
    'TokenOrderError', 'sectioned_order'
]
