"""The attention layout string, e.g. ``IIIS``, ``IISS`` or ``IIMS2``: the user's interface to the mixers.

One letter per stage, each naming the token mixer (:mod:`.mixers`) of every block of the stage; each family
maps its letters to mixer names in its table (``letters`` of :class:`~.trunk.Family`; InLine-Swin's: ``I`` =
InLine attention, ``S`` = Swin window softmax attention, ``L`` = plain linear attention). ``M`` = mixed: with the
family's pair ``mixed = (a, b)`` (``('I', 'S')``: InLine, then softmax), the first k blocks are ``a``'s mixer and
the rest ``b``'s, k the number written after the letters (shared by every ``M`` stage). ``IIMS2`` with depths
[2, 2, 18, 2] gives stage 3 two InLine blocks followed by 16 softmax blocks.
"""
import re

from .errors import ModelArgumentError


def parse_attn_layout(layout, depths, letters, mixed):
    """Expand ``layout`` into per-stage lists of mixer names (``letters``: letter -> mixer name; ``mixed``: the
    letters ``(a, b)`` of an ``M`` stage of depth d, k x ``a`` then (d - k) x ``b``);
    :class:`~.errors.ModelArgumentError` if malformed."""
    if not isinstance(layout, str):
        raise ModelArgumentError(f'attn_type must be a layout string such as "IIIS", got {type(layout).__name__}')
    match = re.fullmatch(f'([{"".join(letters)}M]+)(\\d*)', layout)
    if match is None:
        names = ', '.join(f'{k} ({v})' for k, v in letters.items())
        raise ModelArgumentError(f'malformed attn_type {layout!r}: expected one letter per stage from {names} and M '
                                 f'(mixed), then the InLine block count of M stages, e.g. "IIIS" or "IIMS2"')
    stage_letters, digits = match.groups()
    if len(stage_letters) != len(depths):
        raise ModelArgumentError(f'attn_type {layout!r} has {len(stage_letters)} stage letters but the model has '
                                 f'{len(depths)} stages (depths={list(depths)})')
    if 'M' in stage_letters and not digits:
        raise ModelArgumentError(f'attn_type {layout!r} has a mixed (M) stage but no InLine block count after the '
                                 f'letters, e.g. "{stage_letters}2"')
    if digits and 'M' not in stage_letters:
        raise ModelArgumentError(f'attn_type {layout!r} gives a block count {digits} but has no mixed (M) stage')
    first, rest = (letters[letter] for letter in mixed)
    layout_per_stage = []
    for stage, letter in enumerate(stage_letters):
        depth = depths[stage]
        if letter != 'M':
            layout_per_stage.append([letters[letter]] * depth)
            continue
        num_inline = int(digits)
        if not 0 < num_inline < depth:
            raise ModelArgumentError(f'attn_type {layout!r}: mixed stage {stage} has {depth} blocks, so its '
                                     f'InLine block count must be between 1 and {depth - 1}, got {num_inline}')
        layout_per_stage.append([first] * num_inline + [rest] * (depth - num_inline))
    return layout_per_stage
