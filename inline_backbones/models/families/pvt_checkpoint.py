"""Checkpoint key filter of the InLine-PVT family: :func:`checkpoint_filter_fn` (the pattern of
:mod:`.swin_checkpoint`: a state dict already read safely and unwrapped -> the model's keys, checked strictly
by :mod:`inline_backbones.checkpoints.loading`).

Key formats accepted:

1. **Released InLine-PVT** (the authors' ImageNet files, official PVT v1's keys without its class token):
   ``pos_embed{i}``, ``patch_embed{i}.{proj,norm}.*``, ``block{i}.{j}.*``, ``head.*`` (stages i = 1..4),
   renamed to ``layers.{i-1}.embed.pos_embed``, ``layers.{i-1}.embed.{proj,norm}.*``,
   ``layers.{i-1}.blocks.{j}.*`` (block contents keep their names: ``norm1``, ``attn.{q,kv,proj,residual,sr,norm}``,
   ``norm2``, ``mlp.fc1``, ``mlp.fc2``).
2. **Ours** (a saved :class:`~.inline_pvt.InLinePVT` or timm classifier; a detector's or segmentor's
   ``backbone.`` part with ``prefix='backbone.'``): ``layers.*`` (+ ``head.*``), as they are.

Into the backbone ``head.*`` is dropped. Into the classifier it is kept, except a head of another class
count than the model's, which is dropped (the model keeps its new head).
"""
import re

from ...checkpoints.loading import FilteredStateDict, fit_head, released_or_ours

HINT = 'check arch, attn_type and that this is an InLine-PVT checkpoint'

_RELEASED = re.compile(r'(pos_embed|patch_embed|block)(\d+)(\..*)?')


def from_released(state_dict):
    """A released InLine-PVT state dict in our keys (module docstring, format 1); other keys unchanged."""
    converted = {}
    for key, value in state_dict.items():
        match = _RELEASED.fullmatch(key)
        if match:
            kind, stage, rest = match.group(1), int(match.group(2)) - 1, match.group(3) or ''
            key = {'pos_embed': f'layers.{stage}.embed.pos_embed{rest}', 'patch_embed': f'layers.{stage}.embed{rest}',
                   'block': f'layers.{stage}.blocks{rest}'}[kind]
        converted[key] = value
    return converted


def checkpoint_filter_fn(state_dict, model):
    """``state_dict`` (format 1 or 2) in ``model``'s keys: an :class:`~.inline_pvt.InLinePVT` backbone or an
    ``InLinePVTClassifier`` (whether it has ``head.weight`` decides what happens to the file's head)."""
    keys = list(state_dict)
    released = [k for k in keys if _RELEASED.fullmatch(k)]
    ours = [k for k in keys if k.startswith('layers.')]
    released_or_ours(keys, released, ours, 'InLine-PVT',
                     'released: pos_embed{i}, patch_embed{i}.*, block{i}.*; ours: layers.*')
    state_dict, optional = fit_head(from_released(state_dict), model.state_dict())
    return FilteredStateDict(state_dict, optional_prefixes=optional, hint=HINT)


__all__ = ['HINT', 'checkpoint_filter_fn', 'from_released']
