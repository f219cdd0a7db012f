"""How schedule hooks reach the backbone attribute they drive."""
from mmengine.model import is_model_wrapper
from mmengine.runner import Runner


def runner_backbone(runner: Runner, attribute: str, hook: str):
    """``runner.model.backbone`` (unwrapped from DDP/FSDP), or a ``TypeError`` saying which backbones the hook
    needs when it has no ``attribute``."""
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    backbone = getattr(model, 'backbone', None)
    if backbone is None or not hasattr(backbone, attribute):
        raise TypeError(f'{hook} needs a model whose `backbone` has a `{attribute}`; got {type(model).__name__} with '
                        f'backbone {type(backbone).__name__}. Remove the hook from `custom_hooks` for this model.')
    return backbone
