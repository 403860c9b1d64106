"""Checkpoint key filter of the InLine-DeiT family: :func:`checkpoint_filter_fn` (the pattern of
:mod:`.swin_checkpoint`: a state dict already read safely and unwrapped -> the model's keys, checked strictly by
:mod:`inline_backbones.checkpoints.loading`).

Key formats accepted:

1. **Released InLine-DeiT** (the authors' ImageNet files, timm's ViT keys): ``blocks.{j}.*`` becomes
   ``layers.0.blocks.{j}.*`` (the one stage of the trunk); ``cls_token``, ``pos_embed``, ``patch_embed.proj.*``,
   ``norm.*``, ``head.*`` keep their names.
2. **Ours** (a saved classifier): ``layers.0.blocks.{j}.*`` and the rest as they are.

A position embedding of another grid than the model's (``model.patch_embed.grid_size``: a file of DeiT-T's 224 px in
a model built for 384 px) is resampled as timm's ViT resamples it, by timm's ``resample_abs_pos_embed`` (the class
token's entry kept, the grid's interpolated bicubically with antialiasing), and the log says so. A head of another
class count than the model's is dropped (the model keeps its new head).
"""
import logging
import re

from timm.layers import resample_abs_pos_embed

from ...checkpoints.loading import FilteredStateDict, fit_head, released_or_ours

HINT = 'check arch, img_size and that this is an InLine-DeiT checkpoint'

_BLOCK = re.compile(r'blocks\.(\d+)\.(.*)')
RELEASED_KEYS = ('blocks.',)
OUR_KEYS = ('layers.',)

_logger = logging.getLogger(__name__)


def from_released(state_dict):
    """A released InLine-DeiT state dict in our keys (module docstring, format 1); other keys unchanged."""
    converted = {}
    for key, value in state_dict.items():
        block = _BLOCK.fullmatch(key)
        converted[f'layers.0.blocks.{block[1]}.{block[2]}' if block else key] = value
    return converted


def fit_position_embedding(state_dict, model):
    """``state_dict`` with its ``pos_embed`` on the model's grid (resampled where the file's grid differs)."""
    pos_embed, own = state_dict.get('pos_embed'), model.state_dict().get('pos_embed')
    if pos_embed is None or own is None or pos_embed.shape == own.shape or pos_embed.dim() != 3:
        return state_dict                             # as it is: the strict check names any other mismatch
    prefix = model.family.prefix_tokens
    grid = tuple(model.patch_embed.grid_size)
    _logger.info('checkpoint pos_embed has %d grid positions, the model %d x %d: resampled bicubically',
                 pos_embed.shape[1] - prefix, *grid)
    return {**state_dict, 'pos_embed': resample_abs_pos_embed(pos_embed, new_size=grid, num_prefix_tokens=prefix)}


def checkpoint_filter_fn(state_dict, model):
    """``state_dict`` (format 1 or 2) in the keys of ``model``, an ``InLineDeiTClassifier``."""
    keys = list(state_dict)
    released = [k for k in keys if k.startswith(RELEASED_KEYS)]
    ours = [k for k in keys if k.startswith(OUR_KEYS)]
    released_or_ours(keys, released, ours, 'InLine-DeiT', 'released: blocks.*; ours: layers.*')
    state_dict = fit_position_embedding(from_released(state_dict), model)
    state_dict, head_optional = fit_head(state_dict, model.state_dict())
    return FilteredStateDict(state_dict, optional_prefixes=head_optional, hint=HINT)


__all__ = ['HINT', 'checkpoint_filter_fn', 'fit_position_embedding', 'from_released']
