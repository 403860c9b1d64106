"""Capture the inputs of a backbone's InLine attention layers, for the analysis to recompute their
q, k, v and outputs.

The backbone's stages and blocks (``backbone.layers[i].blocks[j].attn``, the structure the stage loop
of :mod:`inline_backbones.models.stages` runs) are walked for InLine mixers; a forward hook on each
records its input tokens ``X`` (N x C, after ``norm1``) and the map's ``hw_shape`` from the
:class:`~inline_backbones.models.tokens.token_map.TokenMap` it was called with. q, k, v and the 3x3 residual
come from the mixer itself (:meth:`InLineAttention.head_qkv`, :meth:`InLineAttention.residual_output`).
"""
from typing import NamedTuple

import torch

from ..models.mixers.inline.attention import InLineAttention


class AttentionInput(NamedTuple):
    name: str                 # 'layers.<stage>.blocks.<block>.attn', the module's name in the backbone
    module: InLineAttention
    tokens: torch.Tensor      # (N, C)
    hw_shape: tuple
    stage: int = 0


def inline_layers(backbone):
    """``(stage, name, mixer)`` of every global InLine mixer of ``backbone``, in forward order."""
    return attention_layers(backbone, InLineAttention)


def attention_layers(backbone, mixer_type):
    """``(stage, name, mixer)`` of every mixer of type ``mixer_type`` in ``backbone``, in forward order."""
    return [(i, f'layers.{i}.blocks.{j}.attn', block.attn)
            for i, stage in enumerate(backbone.layers) for j, block in enumerate(stage.blocks)
            if isinstance(block.attn, mixer_type)]


def capture_layer_inputs(backbone, image, layers):
    """Run ``backbone`` once on ``image`` (1 x 3 x H x W) and return the :class:`AttentionInput` of each of
    ``layers`` (``(stage, name, mixer)``, :func:`attention_layers`), in forward order."""
    records = []

    def hook(stage, name, module, args, output):
        tokens, token_map = args[:2]
        records.append(AttentionInput(name, module, tokens[0].detach(), tuple(token_map.hw_shape), stage))

    handles = [m.register_forward_hook(lambda *a, _stage=i, _name=name: hook(_stage, _name, *a))
               for i, name, m in layers]
    try:
        with torch.no_grad():
            backbone(image)
    finally:
        for handle in handles:
            handle.remove()
    return records


def capture_inline_inputs(backbone, image):
    """Run ``backbone`` once on ``image`` (1 x 3 x H x W) and return the :class:`AttentionInput` of every
    InLine attention layer, in forward order."""
    if image.dim() != 4 or image.shape[0] != 1:
        raise ValueError(f'expected one image of shape (1, 3, H, W), got {tuple(image.shape)}')
    if getattr(backbone, 'inline_window_size', None) is not None:
        raise ValueError(f'the analysis covers global InLine layers; this backbone attends within windows '
                         f'(inline_window_size={backbone.inline_window_size}): build it with inline_window_size=None')
    layers = inline_layers(backbone)
    if not layers:
        raise ValueError(f'{type(backbone).__name__} has no InLine attention layer to analyse '
                         f'(attn_type {getattr(backbone, "attn_type", "?")!r})')
    return capture_layer_inputs(backbone, image, layers)
