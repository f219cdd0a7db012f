"""ContrastiveCLIP: the tokenizers, the training step (both towers and the temperature learn, the temperature is
clamped), the causal text tower, any backbone as the image tower, and zero-shot prototypes that follow the weights."""
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.structures import DataSample

from mmcausal.models.clip import ContrastiveCLIP, OpenCLIPTokenizer, WordTokenizer
from mmcausal.registry import MODELS

WORDS = ('a', 'photo', 'of', 'red', 'blue', 'two', 'circle', 'circles', 'square', 'squares')
CAPTIONS = ['a red circle', 'two blue squares', 'a photo of a square', 'two red circles']
TOWERS = {
    'DefocusMamba': dict(type='DefocusMamba', arch=dict(embed_dims=32, num_layers=2, dt_rank=2), img_size=32,
                         patch_size=8),
    'DefocusViT': dict(type='DefocusViT', arch=dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32,
                       patch_size=8, out_type='cls_token'),
    'ILLaMA': dict(type='ILLaMA', arch=dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32, patch_size=8),
    'VisionLLaMA': dict(type='VisionLLaMA', arch=dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32,
                        patch_size=8, out_type='cls_token'),
    'mmpretrain ViT': dict(type='mmpretrain.VisionTransformer', arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                           feedforward_channels=64), img_size=32, patch_size=8, pre_norm=True, out_type='cls_token'),
}


def build_clip(tower: str = 'DefocusMamba', **overrides) -> ContrastiveCLIP:
    cfg = dict(type='ContrastiveCLIP', vision_backbone=TOWERS[tower],
               projection=dict(type='mmpretrain.CLIPProjection', in_channels=32, out_channels=16),
               text_backbone=dict(type='mmpretrain.CLIPTransformer', width=16, layers=2, heads=2),
               tokenizer=dict(type='WordTokenizer', words=WORDS), vocab_size=len(WORDS) + 4, transformer_width=16,
               proj_dim=16, context_length=8, text_prototype=['circle', 'square'], text_prompt='vanilla',
               data_preprocessor=dict(mean=[0., 0., 0.], std=[1., 1., 1.]))
    model = MODELS.build(dict(cfg, **overrides))
    model.init_weights()
    return model


def samples(captions):
    out = []
    for caption in captions:
        sample = DataSample()
        sample.text = caption
        out.append(sample)
    return out


def test_word_tokenizer_ids():
    tokenizer = WordTokenizer(WORDS)
    ids = tokenizer(['A photo of two CIRCLES.', 'zebra'], context_length=8)
    end = len(WORDS) + 3
    assert ids.tolist() == [[2, 3, 4, 5, 8, 10, end, 0], [2, 1, end, 0, 0, 0, 0, 0]]  # <start> ... <end>, padding
    cut = tokenizer(['a photo of a red circle two blue squares'], context_length=5)[0]
    assert cut.tolist() == [2, 3, 4, 5, end]  # cut, still ending in <end>
    assert tokenizer.vocab_size == end + 1 and tokenizer.get_vocab()['<|endoftext|>'] == end
    with pytest.raises(ValueError, match='twice'):
        WordTokenizer(('a', 'a'))


def test_open_clip_tokenizer_builds_without_its_package():
    tokenizer = OpenCLIPTokenizer()
    try:
        import open_clip  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match='pip install open_clip_torch'):
            tokenizer(['a photo of a cat.'], context_length=77)
        return
    ids = tokenizer(['a photo of a cat.'], context_length=77)
    assert ids.shape == (1, 77) and ids[0].max() == 49407 and ids[0, 0] == 49406


def test_vocab_size_below_the_tokenizer_is_refused():
    with pytest.raises(ValueError, match=f'set vocab_size={len(WORDS) + 4}'):
        build_clip(vocab_size=len(WORDS))


def test_training_step_reaches_both_towers_and_the_temperature():
    model = build_clip()
    with torch.no_grad():
        model.logit_scale.fill_(10.0)  # above log(100)
    losses = model(torch.randn(4, 3, 32, 32), samples(CAPTIONS), mode='loss')
    assert model.logit_scale.item() == pytest.approx(math.log(100))  # clamped as CLIP does
    assert losses['logit_scale'].item() == pytest.approx(100.0)
    losses['loss_contrastive'].backward()
    for name in ('visual.patch_embed.projection.weight', 'visual_proj.proj', 'token_embedding.weight',
                 'positional_embedding', 'transformer.resblocks.0.attn.in_proj_weight', 'text_projection'):
        grad = model.get_parameter(name).grad
        assert grad is not None and grad.abs().sum() > 0, name
    with torch.no_grad():
        model.logit_scale.fill_(1.0)
    model(torch.randn(4, 3, 32, 32), samples(CAPTIONS), mode='loss')['loss_contrastive'].backward()
    assert model.logit_scale.grad.abs() > 0  # inside the clamp range the temperature learns


def test_loss_is_clips_formula_on_the_models_features():
    model = build_clip()
    images = torch.randn(4, 3, 32, 32)
    loss = model(images, samples(CAPTIONS), mode='loss')['loss_contrastive']
    image_features = F.normalize(model.extract_image_feat(images), dim=-1)
    text_features = F.normalize(model.extract_text_feat(model.tokenize(CAPTIONS)), dim=-1)
    logits = model.logit_scale.exp() * image_features @ text_features.t()
    labels = torch.arange(4)
    torch.testing.assert_close(loss, (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2)


def test_text_tower_is_causal_and_pools_the_end_token():
    """Ids after ``<end>`` (the padding) do not change a caption's features; every id before it does."""
    model = build_clip().eval()
    ids = model.tokenize(['two red circles'])  # <start> two red circles <end> 0 0 0
    base = model.extract_text_feat(ids)
    padded = ids.clone()
    padded[0, 5:] = torch.tensor([3, 4, 5])
    torch.testing.assert_close(model.extract_text_feat(padded), base)
    changed = ids.clone()
    changed[0, 1] = 4
    assert not torch.allclose(model.extract_text_feat(changed), base)


def test_captions_must_reach_the_model():
    model = build_clip()
    with pytest.raises(ValueError, match=r"PackInputs\(algorithm_keys=\['text'\]\)"):
        model(torch.randn(2, 3, 32, 32), [DataSample(), DataSample()], mode='loss')


@pytest.mark.parametrize('tower', list(TOWERS))
def test_any_backbone_is_the_image_tower(tower):
    model = build_clip(tower)
    loss = model(torch.randn(4, 3, 32, 32), samples(CAPTIONS), mode='loss')['loss_contrastive']
    loss.backward()
    assert torch.isfinite(loss) and model.visual_proj.proj.grad.abs().sum() > 0


def test_zero_shot_prototypes_follow_the_weights():
    model = build_clip().eval()
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        first = model(images, None, mode='predict')
    assert len(first) == 3 and first[0].pred_score.shape == (2, )
    before = model.text_prototype_embeds.clone()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model(torch.randn(4, 3, 32, 32), samples(CAPTIONS), mode='loss')['loss_contrastive'].backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        model(images, None, mode='predict')
    assert not torch.allclose(model.text_prototype_embeds, before)  # recomputed with the new text tower


def test_text_tower_compiles_to_one_graph_with_the_eager_features():
    """The image towers' compilation is tested with the backbones (tests/test_models/test_compile.py); the text
    tower (token and position embeddings, mmpretrain's causal blocks, the ``<end>`` pooling) traces whole too."""
    torch._dynamo.reset()
    model = build_clip().eval()
    ids = model.tokenize(CAPTIONS)
    compiled = torch.compile(model.extract_text_feat, backend='eager', fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids), model.extract_text_feat(ids))


@pytest.mark.parametrize('overrides,message', [
    (dict(text_prototype='imagenet1k'), "text_prototype 'imagenet1k' is none of"),
    (dict(text_prompt='openai'), "text_prompt 'openai' is none of"),
    (dict(text_prompt=['a photo of a circle.']), 'needs one {} for the class name'),
    (dict(tokenizer=dict(type='OpenCLIPTokenizer')), 'set vocab_size=49408'),
])
def test_bad_zero_shot_and_tokenizer_settings_are_one_line(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_clip(**overrides)


def test_twin_tokenizer_words_are_the_generators_caption_words():
    from mmengine.config import Config

    from mmcausal.datasets.shapes import CAPTION_WORDS
    root = Path(__file__).resolve().parents[3]
    cfg = Config.fromfile(str(root / 'configs/defocus/clip_defocus-mamba-nano-p8_1xb64-10e_shapes-64px.py'))
    assert tuple(cfg.model.tokenizer.words) == CAPTION_WORDS  # a word missing here would tokenize as unknown
