"""Official-checkpoint converters; the CLIs are in ``tools/model_converters/``."""
from .cait import convert_cait, describe_cait
from .common import converter_main, load_source_state_dict, rename_key, save_checkpoint
from .defocus import convert_defocus
from .dit import convert_dit, describe_dit
from .illama import convert_illama
from .pyramid_vision_llama import convert_pyramid_visionllama
from .vision_llama import convert_visionllama_mae, describe_visionllama_mae, format_architecture

__all__ = [
    'converter_main', 'load_source_state_dict', 'rename_key', 'save_checkpoint', 'convert_cait', 'describe_cait',
    'convert_defocus', 'convert_dit', 'describe_dit', 'convert_illama', 'convert_pyramid_visionllama',
    'convert_visionllama_mae', 'describe_visionllama_mae', 'format_architecture'
]
