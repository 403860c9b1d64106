"""Checkpoint key filter of the InLine-Swin family: :func:`checkpoint_filter_fn`.

The pattern (timm's ``checkpoint_filter_fn``), one module per family beside its model
(``models/families/<family>_checkpoint.py``): ``checkpoint_filter_fn(state_dict, model)`` takes a state dict already
read safely and unwrapped by :mod:`inline_backbones.checkpoints.loading` and returns it in ``model``'s own keys, as a
:class:`~inline_backbones.checkpoints.loading.FilteredStateDict` naming the model keys the file need not hold; the
generic loader then checks it strictly (missing, unexpected, mis-shaped keys). The filter detects the
format from the keys and raises :class:`~inline_backbones.checkpoints.loading.CheckpointMismatchError` listing them
when they are in none of the formats below. It is the ``checkpoint_filter`` of :class:`InLineSwinTransformer`
(``init_cfg`` ``Pretrained``, :func:`~inline_backbones.checkpoints.loading.load_pretrained`) and of the timm
classifiers (their ``pretrained_filter_fn`` and ``load_pretrained``).

Key formats accepted:

1. **Released InLine-Swin** (the authors' ImageNet files; official Swin's keys), timm classifier, our backbone:
   ``patch_embed.{proj,norm}``, ``layers.i.blocks.j.{norm1,attn.*,norm2,mlp.fc1,mlp.fc2}``,
   ``layers.i.downsample.{norm,reduction}``, ``norm`` (final norm), ``head`` (classifier), and the buffers
   ``relative_position_index`` / ``attn_mask``, always dropped (our modules rebuild them: :data:`RELEASED_BUFFERS`).
   Into the backbone, ``head.*`` and the final ``norm.*`` are dropped and the output norms ``norm0-3`` are
   optional (loaded when the file has them, e.g. a detector's ``backbone.`` part). Into the classifier,
   ``norm`` and ``head`` are kept, except a head of another class count than the model's (``num_classes=N``,
   or 0), which is dropped: the model keeps its new head.
2. **mmdet / mmseg / mmpretrain Swin** (``SwinTransformer`` of mmdet 3.x and mmseg 1.x, both tested; mmpretrain
   1.x uses the same names; softmax windows everywhere, i.e. layout ``'SSSS'``): ``patch_embed.{projection,norm}``,
   ``stages.i.blocks.j.{norm1,attn.w_msa.{qkv,proj,relative_position_bias_table},norm2,ffn.layers.0.0,ffn.layers.1}``,
   ``stages.i.downsample.{norm,reduction}`` with the 4C channels in ``nn.Unfold``'s order, ``norm{i}``.
   Converted to format 1 (the inverse of mmdet's ``swin_converter``, :func:`from_mmdet_swin`), then as 1.
   A detector's or segmentor's checkpoint needs ``prefix='backbone.'``. Backbone only: the classifier
   takes format 1.
"""
import re

from ...checkpoints.loading import CheckpointMismatchError, FilteredStateDict, fit_head, keys_line, prefix_hint

# Buffers of the released models that our modules rebuild instead of keeping in their state dicts.
RELEASED_BUFFERS = ('.relative_position_index', '.attn_mask')

# What the strict check's error tells the user to look at.
HINT = 'check arch, attn_type and that this is an InLine-Swin checkpoint'

# Key prefixes that identify each format (every state dict of the format has some).
RELEASED_KEYS = ('patch_embed.proj.', 'layers.')
MMDET_KEYS = ('patch_embed.projection.', 'stages.')

# Block sub-module names: mmdet / mmpretrain -> released.
_MMDET_BLOCK_NAMES = (('.attn.w_msa.', '.attn.'), ('.ffn.layers.0.0.', '.mlp.fc1.'), ('.ffn.layers.1.', '.mlp.fc2.'))

# Patch merging: released order of the 2x2 neighbours is (0,0), (1,0), (0,1), (1,1) (row offset fastest);
# nn.Unfold's is (0,0), (0,1), (1,0), (1,1). The permutation between them is its own inverse.
_SWIN_FROM_UNFOLD = [0, 2, 1, 3]


def _reduction_from_unfold(weight):
    """(C_out, 4C) with inputs ordered channel-major as ``nn.Unfold`` gives them (c * 4 + k) -> released order
    (k * C + c, neighbours k in Swin's order)."""
    out_channels, in_channels = weight.shape
    weight = weight.reshape(out_channels, in_channels // 4, 4).transpose(1, 2)
    return weight[:, _SWIN_FROM_UNFOLD, :].reshape(out_channels, in_channels)


def _norm_from_unfold(vector):
    """(4C,) LayerNorm weight or bias in ``nn.Unfold``'s order -> released order
    (see :func:`_reduction_from_unfold`)."""
    return vector.reshape(-1, 4).transpose(0, 1)[_SWIN_FROM_UNFOLD, :].reshape(-1)


def from_mmdet_swin(state_dict):
    """An mmdet / mmpretrain ``SwinTransformer`` state dict (no ``backbone.`` prefix) in the released keys.

    Renames ``patch_embed.projection`` -> ``patch_embed.proj``, ``stages`` -> ``layers``, ``attn.w_msa`` ->
    ``attn``, ``ffn.layers.0.0`` / ``ffn.layers.1`` -> ``mlp.fc1`` / ``mlp.fc2``, and puts the 4C input channels
    of each ``downsample.reduction`` / ``downsample.norm`` back into Swin's neighbour order. Other keys
    (``norm{i}``, anything unknown) are kept as they are, for the strict check to judge.
    """
    converted = {}
    for key, value in state_dict.items():
        key, moved = mmdet_swin_name(key), key.startswith('stages.')
        if moved and re.fullmatch(r'layers\.\d+\.downsample\.reduction\.weight', key) and value.dim() == 2:
            value = _reduction_from_unfold(value)
        elif moved and re.fullmatch(r'layers\.\d+\.downsample\.norm\.(weight|bias)', key) and value.dim() == 1:
            value = _norm_from_unfold(value)
        converted[key] = value
    return converted


def mmdet_swin_name(name):
    """The released name of an mmdet / mmpretrain ``SwinTransformer`` parameter, or of the start of one (a module
    path, as optimizer keys name parts of a model): ``patch_embed.projection`` -> ``patch_embed.proj``,
    ``stages`` -> ``layers``, ``attn.w_msa`` -> ``attn``, ``ffn.layers.0.0`` / ``ffn.layers.1`` ->
    ``mlp.fc1`` / ``mlp.fc2``. Other names are returned as they are."""
    if name.startswith('patch_embed.projection'):
        return 'patch_embed.proj' + name[len('patch_embed.projection'):]
    if not name.startswith('stages.'):
        return name
    name = 'layers.' + name[len('stages.'):] + '.'
    for old, new in _MMDET_BLOCK_NAMES:
        name = name.replace(old, new)
    return name[:-1]


def detect_format(state_dict):
    """``'released'`` or ``'mmdet'`` from the keys; :class:`CheckpointMismatchError` listing the keys if
    they are in neither or in both."""
    keys = list(state_dict)
    released = [k for k in keys if k.startswith(RELEASED_KEYS)]
    mmdet = [k for k in keys if k.startswith(MMDET_KEYS)]
    if released and mmdet:
        raise CheckpointMismatchError(
            'its keys mix two InLine-Swin checkpoint formats (released/timm and mmdet/mmpretrain Swin):\n'
            + keys_line('released-format keys', released) + '\n' + keys_line('mmdet-format keys', mmdet))
    if released:
        return 'released'
    if mmdet:
        return 'mmdet'
    raise CheckpointMismatchError(
        'its keys are in no InLine-Swin checkpoint format (released InLine-Swin / timm: '
        f'{", ".join(p + "*" for p in RELEASED_KEYS)}; mmdet / mmpretrain Swin: '
        f'{", ".join(p + "*" for p in MMDET_KEYS)}){prefix_hint(keys)}:\n'
        + keys_line('unexpected in checkpoint', keys))


def checkpoint_filter_fn(state_dict, model):
    """``state_dict`` (format 1 or 2 of the module docstring) in ``model``'s keys, with the model keys the file
    need not hold: the output norms ``norm{i}.`` of a backbone, the new head of a classifier whose class count
    differs from the file's. ``model`` is an :class:`InLineSwinTransformer` (backbone) or an
    ``InLineSwinClassifier``; which keys it has (``norm.``, ``head.``) decides what is kept."""
    if detect_format(state_dict) == 'mmdet':
        state_dict = from_mmdet_swin(state_dict)
    own = model.state_dict()
    state_dict = {k: v for k, v in state_dict.items() if not k.endswith(RELEASED_BUFFERS)}
    optional = tuple(f'norm{i}.' for i in range(len(model.layers)))      # the backbone's output norms
    if 'norm.weight' not in own:                                           # backbone: no final norm
        state_dict = {k: v for k, v in state_dict.items() if not k.startswith('norm.')}
    state_dict, head_optional = fit_head(state_dict, own)
    optional += head_optional
    return FilteredStateDict(state_dict, optional_prefixes=optional, hint=HINT)


__all__ = ['HINT', 'RELEASED_BUFFERS', 'checkpoint_filter_fn', 'detect_format', 'from_mmdet_swin', 'mmdet_swin_name']
