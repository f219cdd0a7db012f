"""De-focus Attention Networks (Tao et al. 2024): the shared base and band-pass filter (:mod:`.backbone`), De-focus
Mamba with its mixer and selective scan (:mod:`.mamba`, fast paths in :mod:`.scans`), De-focus ViT and RetNet
(:mod:`.transformer`, :mod:`.retention`) and the classification head with the auxiliary loss (:mod:`.head`)."""
from .backbone import (
    ROPE_PAIRINGS,
    LearnableDecay,
    LearnableRoPE,
    TokenOrderError,
    apply_unpaired_rotary,
    defocus_frequencies,
    retnet_decay_exponents,
    sectioned_order,
)
from .head import DefocusClsHead
from .mamba import (
    SCAN_IMPLS,
    DefocusMamba,
    DefocusMambaMixer,
    ScanConfigError,
    group_rms_norm,
    selective_scan,
    sequential_selective_scan,
)
from .retention import MultiScaleRetention, RetentionConfigError, retention, retention_step
from .scans.chunked import chunked_selective_scan
from .transformer import DecayAttention, DefocusRetNet, DefocusViT, folded_decay_attention

__all__ = [
    'DefocusMamba', 'DefocusRetNet', 'DefocusViT', 'DecayAttention', 'LearnableDecay', 'folded_decay_attention',
    'retnet_decay_exponents', 'ROPE_PAIRINGS', 'LearnableRoPE', 'apply_unpaired_rotary', 'defocus_frequencies',
    'MultiScaleRetention', 'RetentionConfigError', 'retention', 'retention_step', 'SCAN_IMPLS', 'ScanConfigError',
    'chunked_selective_scan', 'selective_scan', 'sequential_selective_scan', 'DefocusMambaMixer', 'group_rms_norm',
    'TokenOrderError', 'sectioned_order', 'DefocusClsHead'
]
