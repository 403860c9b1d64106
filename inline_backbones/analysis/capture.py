"""Capture the inputs of a backbone's InLine attention layers and recompute their q, k, v and outputs.

Forward hooks record each :class:`InLineAttention`'s input tokens ``X`` (N x C, after ``norm1``) and
``hw_shape``; q, k, v come from the module's own ``qkv`` (before the kernel, split per head), and the
3x3 residual from its own ``residual`` kernel generator: ``dwconv3x3(v; residual(mean_N X))``.
"""
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..models.inline_attention import InLineAttention


class AttentionInput(NamedTuple):
    name: str                 # module name in the backbone, e.g. 'layers.0.blocks.1.attn'
    module: InLineAttention
    tokens: torch.Tensor      # (N, C)
    hw_shape: tuple


def capture_inline_inputs(backbone, image):
    """Run ``backbone`` once on ``image`` (1 x 3 x H x W) and return the :class:`AttentionInput` of every
    InLine attention layer, in forward order."""
    if image.dim() != 4 or image.shape[0] != 1:
        raise ValueError(f'expected one image of shape (1, 3, H, W), got {tuple(image.shape)}')
    if getattr(backbone, 'inline_window_size', None) is not None:
        raise ValueError(f'the analysis covers global InLine layers; this backbone attends within windows '
                         f'(inline_window_size={backbone.inline_window_size}): build it with inline_window_size=None')
    records = []

    def hook(name, module, args, kwargs, output):
        tokens = args[0] if args else kwargs['x']
        hw_shape = args[1] if len(args) > 1 else kwargs['hw_shape']
        records.append(AttentionInput(name, module, tokens[0].detach(), tuple(hw_shape)))

    handles = [m.register_forward_hook(lambda *a, _name=name: hook(_name, *a), with_kwargs=True)
               for name, m in backbone.named_modules() if isinstance(m, InLineAttention)]
    if not handles:
        raise ValueError(f'{type(backbone).__name__} has no InLine attention layer to analyse '
                         f'(attn_type {getattr(backbone, "attn_type", "?")!r})')
    try:
        with torch.no_grad():
            backbone(image)
    finally:
        for handle in handles:
            handle.remove()
    return records


def head_qkv(module, tokens):
    """Raw (pre-kernel) q, k, v of every head: each (h, N, d)."""
    N = tokens.shape[0]
    h, d = module.num_heads, module.head_dims
    return module.qkv(tokens).view(N, 3, h, d).permute(1, 2, 0, 3).unbind(0)


def local_residual_output(module, tokens, v, hw_shape):
    """The 3x3 residual's output per head (h, N, d), or None if the module has no residual."""
    if not getattr(module, 'local_residual', True):
        return None
    h, N, d = v.shape
    C = h * d
    kernels = module.residual(tokens.mean(0).view(1, C, 1)).view(C, 1, 3, 3)
    maps = v.permute(0, 2, 1).reshape(1, C, *hw_shape)
    return F.conv2d(maps, kernels, padding=1, groups=C).view(h, d, N).transpose(1, 2)
