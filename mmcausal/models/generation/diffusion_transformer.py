"""The diffusion transformer of DiT (Peebles & Xie 2023), SiT (Ma et al. 2024) and their VisionLLaMA variants
DiT-LLaMA / SiT-LLaMA (Chu et al. 2024, Sec. 4.1): one network, two block types.

``x`` ``(B, C, H, W)`` -> patch tokens ``(B, N, D)`` (+ the fixed sin-cos table for DiT blocks); ``c = t_emb(t) +
y_emb(y)``; ``L`` adaLN-Zero blocks; an adaLN final layer; unpatchify to ``(B, C_out, H, W)`` with ``C_out = 2C``
(``[mean prediction | variance value]``) when ``learn_sigma``. Block types:

* ``'llama'`` (VisionLLaMA): bidirectional attention with 2-D RoPE on q/k (the official layout), bias-free SwiGLU of
  width ``swiglu_hidden_dims(D)``, no absolute position table;
* ``'dit'``: attention without RoPE, ``fc2(GELU_tanh(fc1(x)))`` of width ``4D``, the 2-D sin-cos table added to the
  patch tokens.


Differences from the official code, none of which changes an output at the training size: the sin-cos table is
computed for the actual grid (not a parameter: the LLaMA variants' unused copy is dropped, so their parameter count
is the official one minus ``N * D``); any ``H x W`` divisible by the patch runs (the official code asserts a square
grid); ``rope_mode='as2d'`` scales RoPE positions onto the training grid (``input_size / patch_size``), which equals
``'2d'`` there and lets a model trained at one size sample others; :meth:`forward_with_cfg` takes and returns ``B``
samples (the official one takes the doubled batch and returns both halves, the second of which is discarded).
"""
from functools import partial
from typing import Optional, Sequence, Tuple, Union

import torch
from mmcv.cnn.bricks.transformer import PatchEmbed
from mmengine.model import BaseModule
from mmengine.utils import to_2tuple
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from mmcausal.registry import MODELS
from mmcausal.utils.validation import ConfigValueError, check_choice
from ..layers import (
    BackboneConfigError,
    GridRoPE,
    SelfAttention,
    SwiGLUFFN,
    TokenLayout,
    check_head_split,
    check_image_batch,
    gelu_mlp,
    resolve_arch,
    sincos_pos_embed_2d,
    swiglu_hidden_dims,
)
from .conditioning import AdaLNFinalLayer, AdaLNZeroBlock, LabelEmbedder, TimestepEmbedder
from .guidance import check_cfg_channels, classifier_free_guidance

BLOCK_TYPES = ('llama', 'dit')
GENERATION_ROPE_MODES = ('2d', 'as2d')


class GenerationInputError(ConfigValueError):
    """The latents, times or labels given to a diffusion transformer do not fit it (the message says what to change)."""


@MODELS.register_module()
class DiffusionTransformer(BaseModule):
    """DiT / SiT / DiT-LLaMA / SiT-LLaMA network: ``forward(x, t, y)`` -> ``(B, C_out, H, W)``.

    Args:
        arch: ``'small' | 'base' | 'large' | 'xlarge'`` (or ``s/b/l/xl``; Table 18 of the paper), or a dict with
            ``embed_dims``, ``num_layers``, ``num_heads`` (optional ``ffn_hidden_dims``).
        patch_size: 2, 4 or 8 in the paper (any positive int runs).
        block: ``'llama'`` (DiT-LLaMA / SiT-LLaMA) or ``'dit'`` (DiT / SiT).
        in_channels: latent channels ``C`` (4 for the SD-VAE).
        input_size: the training latent size (int or ``(H, W)``; 32 for 256 px): the AS2DRoPE anchor grid is
            ``input_size // patch_size``. Inputs of any size divisible by the patch run.
        learn_sigma: ``C_out = 2C`` (DiT's learned-range variance; SiT keeps the rows and ignores them) else ``C``.
        num_classes: class count; with ``class_dropout_prob > 0`` label ``num_classes`` is the null label.
        class_dropout_prob: probability of replacing a label by the null label in training (CFG); 0 = no null label.
        rope_mode: ``'as2d'`` (positions scaled onto the training grid; ``'2d'`` there) or ``'2d'`` (integer
            positions, the official code); LLaMA blocks only.
        as2d_scaling: ``'per_axis'`` or ``'isotropic'``, see :func:`~mmcausal.models.layers.position.auto_scale`.
        time_scale: multiplies ``t`` before its sinusoidal features (1 = DiT/SiT).
        with_cp: gradient checkpointing of every block in training.
    """
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=384, num_layers=12, num_heads=6),
        ('b', 'base'): dict(embed_dims=768, num_layers=12, num_heads=12),
        ('l', 'large'): dict(embed_dims=1024, num_layers=24, num_heads=16),
        ('xl', 'xlarge'): dict(embed_dims=1152, num_layers=28, num_heads=16),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'xlarge',
                 patch_size: int = 2,
                 block: str = 'llama',
                 in_channels: int = 4,
                 input_size: Union[int, Sequence[int]] = 32,
                 learn_sigma: bool = True,
                 num_classes: int = 1000,
                 class_dropout_prob: float = 0.1,
                 rope_mode: str = 'as2d',
                 as2d_scaling: str = 'per_axis',
                 rope_theta: float = 10000.,
                 time_scale: float = 1.,
                 with_cp: bool = False,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        setting = resolve_arch(arch, self.arch_zoo, ('embed_dims', 'num_layers', 'num_heads'))
        self.block = check_choice('DiffusionTransformer block', block, BLOCK_TYPES, BackboneConfigError)
        if patch_size < 1:
            raise BackboneConfigError(f'patch_size must be a positive int, got {patch_size}.')
        self.embed_dims = setting['embed_dims']
        self.num_layers = setting['num_layers']
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.out_channels = 2 * in_channels if learn_sigma else in_channels
        self.learn_sigma = learn_sigma
        self.num_classes = num_classes
        self.input_size = tuple(int(side) for side in to_2tuple(input_size))
        self.with_cp = with_cp
        head_dim = check_head_split(self.embed_dims, setting['num_heads'], BackboneConfigError)

        self.patch_embed = PatchEmbed(in_channels, self.embed_dims, conv_type='Conv2d', kernel_size=patch_size,
                                      stride=patch_size, padding=0, bias=True)
        self.t_embedder = TimestepEmbedder(self.embed_dims, time_scale=time_scale)
        self.y_embedder = LabelEmbedder(num_classes, self.embed_dims, class_dropout_prob)
        check_choice('DiffusionTransformer rope_mode', rope_mode, GENERATION_ROPE_MODES, BackboneConfigError)
        self.rope = GridRoPE(head_dim, mode=rope_mode, anchor=self.training_grid, as2d_scaling=as2d_scaling,
                             theta=rope_theta) if block == 'llama' else None
        mixer = partial(SelfAttention, num_heads=setting['num_heads'], qkv_bias=True, proj_bias=True,
                        mask_mode='bidirectional')
        if block == 'llama':
            ffn = partial(SwiGLUFFN, feedforward_channels=setting.get('ffn_hidden_dims',
                                                                      swiglu_hidden_dims(self.embed_dims)),
                          bias=False, add_identity=False)
        else:
            ffn = partial(gelu_mlp, feedforward_channels=setting.get('ffn_hidden_dims', 4 * self.embed_dims),
                          approximate='tanh')
        self.layers = nn.ModuleList(AdaLNZeroBlock(self.embed_dims, mixer, ffn) for _ in range(self.num_layers))
        self.final_layer = AdaLNFinalLayer(self.embed_dims, patch_size * patch_size * self.out_channels)
        self.reset_parameters()

    @property
    def training_grid(self) -> Tuple[int, int]:
        """The token grid at ``input_size`` (the AS2DRoPE anchor)."""
        return tuple(max(side // self.patch_size, 1) for side in self.input_size)

    @property
    def rope_mode(self) -> Optional[str]:
        """``'2d' | 'as2d'`` (None for DiT blocks); switchable at run time."""
        return self.rope.mode if self.rope is not None else None

    @rope_mode.setter
    def rope_mode(self, rope_mode: str) -> None:
        if self.rope is None:
            raise BackboneConfigError('DiT blocks have no RoPE (they add the sin-cos table); use block="llama".')
        self.rope.mode = check_choice('DiffusionTransformer rope_mode', rope_mode, GENERATION_ROPE_MODES,
                                      BackboneConfigError)

    # ------------------------------------------------------------------ initialisation
    def reset_parameters(self) -> None:
        """DiT's initialisation: Linear layers xavier-uniform with zero bias, the patch projection xavier-uniform on
        its ``(D, C p p)`` view, the label table and timestep MLP ``N(0, 0.02)``, and adaLN-Zero: every modulation
        and the output projection at zero (each block starts as the identity, the output at 0).

        The fused SwiGLU ``w12`` ``(2h, D)`` is initialised as the official two ``(h, D)`` Linear layers
        ``c_fc1`` (gate) and ``c_fc2`` (up): xavier-uniform on each half (bound ``sqrt(6 / (h + D))``), not on the
        whole matrix (bound ``sqrt(6 / (2h + D))``)."""
        fused = {id(module.w12) for module in self.modules() if isinstance(module, SwiGLUFFN)}
        for module in self.modules():
            if isinstance(module, nn.Linear):
                for weight in module.weight.chunk(2) if id(module) in fused else (module.weight, ):
                    nn.init.xavier_uniform_(weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        projection = self.patch_embed.projection
        nn.init.xavier_uniform_(projection.weight.view(projection.weight.shape[0], -1))
        nn.init.zeros_(projection.bias)
        nn.init.normal_(self.y_embedder.embedding_table.weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[0].weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[2].weight, std=0.02)
        zeroed = [layer.adaLN_modulation[-1] for layer in self.layers]
        zeroed += [self.final_layer.adaLN_modulation[-1], self.final_layer.linear]
        for linear in zeroed:
            nn.init.zeros_(linear.weight)
            nn.init.zeros_(linear.bias)

    def init_weights(self) -> None:
        """:meth:`reset_parameters`, or the ``init_cfg`` (e.g. ``Pretrained``) when one is given."""
        if self.init_cfg:
            super().init_weights()
        elif not self.is_init:
            self.reset_parameters()
            self._is_init = True

    # ------------------------------------------------------------------ forward
    def forward(self, x: Tensor, t: Tensor, y: Tensor) -> Tensor:
        """Latents ``x`` ``(B, C, H, W)`` (``H, W`` divisible by the patch), times ``t`` ``(B,)`` (DiT: step indices,
        SiT: ``[0, 1]``) and labels ``y`` ``(B,)`` -> ``(B, C_out, H, W)``."""
        self._check_inputs(x, t, y)
        tokens, grid = self.patch_embed(x)
        if self.block == 'dit':
            tokens = tokens + sincos_pos_embed_2d(grid, self.embed_dims, x.device).to(tokens.dtype)
        c = self.t_embedder(t.expand(x.shape[0]) if t.dim() == 0 else t) + self.y_embedder(y)
        layout = TokenLayout(grid, angles=self.rope.sequence_angles(grid, device=x.device) if self.rope else None,
                             rope=self.rope)
        for layer in self.layers:
            if self.with_cp and self.training and torch.is_grad_enabled():
                tokens = checkpoint(layer, tokens, c, layout, use_reentrant=False)
            else:
                tokens = layer(tokens, c, layout)
        return self.unpatchify(self.final_layer(tokens, c), grid)

    def forward_with_cfg(self, x: Tensor, t: Tensor, y: Tensor, cfg_scale: float,
                         cfg_channels: Optional[int] = None) -> Tensor:
        """Classifier-free guided prediction ``(B, C_out, H, W)`` for ``x`` ``(B, C, H, W)``, ``t``, ``y`` ``(B,)``.

        One forward of ``[x; x]`` with labels ``[y; null]``; the first ``cfg_channels`` channels are
        ``uncond + cfg_scale * (cond - uncond)``, the others keep the conditional output. ``cfg_channels=3`` is the
        official DiT/SiT rule (with 4 latent channels the fourth stays conditional), None guides every channel of
        the mean / velocity prediction (the first ``C``); the learned variance always stays conditional.
        """
        if not self.y_embedder.has_null_label:
            raise GenerationInputError('Classifier-free guidance needs the null label: this network was built with '
                                       'class_dropout_prob=0; sample with cfg_scale=1 or train with a dropout > 0.')
        num_guided = check_cfg_channels(cfg_channels, self.in_channels)
        t = t.expand(x.shape[0]) if t.dim() == 0 else t
        out = self(torch.cat((x, x)), torch.cat((t, t)), torch.cat((y, torch.full_like(y, self.num_classes))))
        cond, uncond = out.chunk(2)
        return classifier_free_guidance(cond, uncond, cfg_scale, num_guided)

    def unpatchify(self, tokens: Tensor, grid: Tuple[int, int]) -> Tensor:
        """``(B, N, p*p*C_out)`` (each token's values ordered row-in-patch, column-in-patch, channel) ->
        ``(B, C_out, H, W)``."""
        p, (rows, cols) = self.patch_size, grid
        patches = tokens.reshape(tokens.shape[0], rows, cols, p, p, self.out_channels)
        return patches.permute(0, 5, 1, 3, 2, 4).reshape(tokens.shape[0], self.out_channels, rows * p, cols * p)

    def _check_inputs(self, x: Tensor, t: Tensor, y: Tensor) -> None:
        check_image_batch(x, self.in_channels)
        if x.shape[2] % self.patch_size or x.shape[3] % self.patch_size:
            raise GenerationInputError(f'Latents of size {tuple(x.shape[2:])} are not divisible by the patch size '
                                       f'{self.patch_size}; crop or resize them to a multiple of it.')
        for name, value in (('t', t), ('y', y)):
            if value.dim() > 1 or value.dim() == 1 and value.shape[0] != x.shape[0]:
                raise GenerationInputError(f'{name} must have shape ({x.shape[0]},) for a batch of {x.shape[0]} '
                                           f'latents, got {tuple(value.shape)}.')

    def extra_repr(self) -> str:
        return (f'block={self.block!r}, patch_size={self.patch_size}, learn_sigma={self.learn_sigma}, '
                f'rope_mode={self.rope_mode!r}')


__all__ = ['DiffusionTransformer', 'GenerationInputError']
