"""Checkpoint key filter of the InLine-CSwin family: :func:`checkpoint_filter_fn` (the pattern of
:mod:`.swin_checkpoint`: a state dict already read safely and unwrapped -> the model's keys, checked strictly by
:mod:`inline_backbones.checkpoints.loading`).

Key formats accepted:

1. **Released InLine-CSwin** (the authors' ImageNet files, CSWin's keys), renamed:

   ========================================================  ===========================================
   released                                                  ours
   ========================================================  ===========================================
   ``stage1_conv_embed.0.*`` / ``stage1_conv_embed.2.*``     ``patch_embed.proj.*`` / ``patch_embed.norm.*``
   ``stage{s}.{j}.{qkv,proj}.*``                             ``layers.{s-1}.blocks.{j}.attn.{qkv,proj}.*``
   ``stage{s}.{j}.attns.{b}.get_v.*``                        ``layers.{s-1}.blocks.{j}.attn.lepe.{b}.*``
   ``stage{s}.{j}.attns.0.residual.*``                       ``layers.{s-1}.blocks.{j}.attn.residual.*``
   ``stage{s}.{j}.{norm1,norm2,mlp.fc1,mlp.fc2}.*``          ``layers.{s-1}.blocks.{j}.{...}.*``
   ``merge{m}.{conv,norm}.*``                                ``layers.{m-1}.downsample.{proj,norm}.*``
   ``norm.*``, ``head.*``                                    the same
   ========================================================  ===========================================

2. **Ours** (a saved backbone or timm classifier; a detector's or segmentor's ``backbone.`` part with
   ``prefix='backbone.'``): ``patch_embed.*``, ``layers.*``, ``norm{i}.*`` as they are.

Into the backbone ``head.*`` and the final ``norm.*`` are dropped and its output norms ``norm{i}`` are optional.
Into the classifier they are kept, except a head of another class count than the model's (dropped: the model keeps
its new head).
"""
import re

from ...checkpoints.loading import FilteredStateDict, fit_head, released_or_ours

HINT = 'check arch, attn_type and that this is an InLine-CSwin checkpoint'

_BLOCK = re.compile(r'stage(\d+)\.(\d+)\.(.*)')
_MERGE = re.compile(r'merge(\d+)\.(conv|norm)\.(.*)')
_STEM = {'stage1_conv_embed.0.': 'patch_embed.proj.', 'stage1_conv_embed.2.': 'patch_embed.norm.'}
_BRANCH = re.compile(r'attns\.(\d+)\.(get_v|residual)\.(.*)')
RELEASED_KEYS = ('stage1_conv_embed.', 'stage', 'merge')
OUR_KEYS = ('patch_embed.', 'layers.')


def _block_key(rest):
    """A released block's key after ``stage{s}.{j}.`` -> ours after ``blocks.{j}.``."""
    if rest.startswith(('qkv.', 'proj.')):
        return 'attn.' + rest
    branch = _BRANCH.fullmatch(rest)
    if branch:
        b, kind, tail = branch.groups()
        return f'attn.lepe.{b}.{tail}' if kind == 'get_v' else f'attn.residual.{tail}' if b == '0' else rest
    return rest


def from_released(state_dict):
    """A released InLine-CSwin state dict in our keys (module docstring, format 1); other keys unchanged."""
    converted = {}
    for key, value in state_dict.items():
        stem = next((p for p in _STEM if key.startswith(p)), None)
        block, merge = _BLOCK.fullmatch(key), _MERGE.fullmatch(key)
        if stem:
            key = _STEM[stem] + key[len(stem):]
        elif block:
            s, j, rest = block.groups()
            key = f'layers.{int(s) - 1}.blocks.{j}.{_block_key(rest)}'
        elif merge:
            m, kind, rest = merge.groups()
            key = f'layers.{int(m) - 1}.downsample.{"proj" if kind == "conv" else "norm"}.{rest}'
        converted[key] = value
    return converted


def checkpoint_filter_fn(state_dict, model):
    """``state_dict`` (format 1 or 2) in ``model``'s keys: an ``InLineCSwinTransformer`` backbone or an
    ``InLineCSwinClassifier`` (whether it has ``norm.weight`` and ``head.weight`` decides what is kept)."""
    keys = list(state_dict)
    released = [k for k in keys if k.startswith(RELEASED_KEYS) and not k.startswith(OUR_KEYS)]
    ours = [k for k in keys if k.startswith(OUR_KEYS)]
    released_or_ours(keys, released, ours, 'InLine-CSwin',
                     'released: stage1_conv_embed.*, stage{s}.*, merge{m}.*; ours: patch_embed.*, layers.*')
    own = model.state_dict()
    state_dict = from_released(state_dict)
    optional = tuple(f'norm{i}.' for i in range(len(model.layers)))       # the backbone's output norms
    if 'norm.weight' not in own:                                           # backbone: no final norm
        state_dict = {k: v for k, v in state_dict.items() if not k.startswith('norm.')}
    state_dict, head_optional = fit_head(state_dict, own)
    return FilteredStateDict(state_dict, optional_prefixes=optional + head_optional, hint=HINT)


__all__ = ['HINT', 'checkpoint_filter_fn', 'from_released']
