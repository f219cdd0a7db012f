"""VisionLLaMA (Chu et al. 2024, "VisionLLaMA: A Unified LLaMA Backbone for Vision Tasks"): the plain backbone
(:mod:`.backbone`), its MAE encoder (:mod:`.mae`), the pyramid backbone (:mod:`.pyramid`), the windowed and
sub-sampled attention they use (:mod:`.twins_attention`), and the variants of the paper's Table 7 ablations: partial
and per-head RoPE (:mod:`.rope_variants`), the pyramid's learnable position embedding and PEG
(:mod:`.absolute_position`)."""
from .backbone import VisionLLaMA
from .mae import MAEVisionLLaMA, random_masking
from .pyramid import PyramidVisionLLaMA
from .twins_attention import SubsampledAttention, WindowedAttention

__all__ = ['VisionLLaMA', 'MAEVisionLLaMA', 'random_masking', 'PyramidVisionLLaMA', 'SubsampledAttention',
           'WindowedAttention']
