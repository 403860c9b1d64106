"""The attention layout string of InLine-Swin, e.g. ``IIIS``, ``IISS`` or ``IIMS2``.

One letter per stage: ``I`` = every block InLine attention, ``S`` = every block Swin window softmax
attention, ``L`` = every block plain linear attention (the ablation of :mod:`.linear_attention`),
``M`` = mixed: the first k blocks InLine, the rest softmax, with k the number written after
the letters (shared by every ``M`` stage). ``IIMS2`` with depths [2, 2, 18, 2] gives stage 3 two InLine
blocks followed by 16 softmax blocks.
"""
import re

_LAYOUT = re.compile(r'([ISLM]+)(\d*)')


def parse_attn_layout(layout, depths):
    """Expand ``layout`` into per-stage lists of ``'inline'`` / ``'window'`` / ``'linear'``; raise
    ValueError if malformed."""
    if not isinstance(layout, str):
        raise TypeError(f'attn_type must be a layout string such as "IIIS", got {type(layout).__name__}')
    match = _LAYOUT.fullmatch(layout)
    if match is None:
        raise ValueError(f'malformed attn_type {layout!r}: expected one letter per stage from I (InLine), '
                         f'S (softmax window), L (plain linear) and M (mixed), then the InLine block count '
                         f'of M stages, e.g. "IIIS" or "IIMS2"')
    letters, digits = match.groups()
    if len(letters) != len(depths):
        raise ValueError(f'attn_type {layout!r} has {len(letters)} stage letters but the model has '
                         f'{len(depths)} stages (depths={list(depths)})')
    if 'M' in letters and not digits:
        raise ValueError(f'attn_type {layout!r} has a mixed (M) stage but no InLine block count after the '
                         f'letters, e.g. "{letters}2"')
    if digits and 'M' not in letters:
        raise ValueError(f'attn_type {layout!r} gives a block count {digits} but has no mixed (M) stage')
    layout_per_stage = []
    for stage, (letter, depth) in enumerate(zip(letters, depths)):
        if letter == 'L':
            layout_per_stage.append(['linear'] * depth)
            continue
        num_inline = {'I': depth, 'S': 0}.get(letter)
        if letter == 'M':
            num_inline = int(digits)
            if not 0 < num_inline < depth:
                raise ValueError(f'attn_type {layout!r}: mixed stage {stage} has {depth} blocks, so its '
                                 f'InLine block count must be between 1 and {depth - 1}, got {num_inline}')
        layout_per_stage.append(['inline'] * num_inline + ['window'] * (depth - num_inline))
    return layout_per_stage
