"""A recipe's optimizer keys for the InLine backbone that replaces its Swin / PVT one (behind
:mod:`inline_backbones.openmmlab.upstream_recipe`).

mmengine's ``DefaultOptimWrapperConstructor`` gives the parameter ``p`` of the model's module path ``name`` the
learning rate ``lr * lr_mult`` and weight decay ``weight_decay * decay_mult`` of the **longest** key of
``paramwise_cfg.custom_keys`` that is a substring of ``name`` (that key alone: a multiplier it leaves out is 1), and
only where no key matches, the type rules (``norm_decay_mult``, ``bias_decay_mult``, ...). A recipe's keys name
its upstream backbone's modules (mmdet's Swin: ``backbone.stages.{i}.blocks.{j}.norm``); the InLine backbone's
names differ (``backbone.layers.{i}.blocks.{j}.norm1``), and its local residual has no upstream counterpart. So
the child config gets (:func:`translate_keys`):

* **translated keys**: each key ``backbone.<part>`` of the recipe that names an upstream module the family renames
  (the family table's ``param_name``, its checkpoint converter's renaming) is added under the InLine name with the
  same settings. The recipe's own keys stay (inherited) and match nothing of the InLine backbone;
* **the local residual** (``attn.residual``): weight decay 0, as the recipe's keys do for norms and position
  tables, at the learning rate the recipe gives the same block's attention (its output projection
  ``attn.proj.weight``; e.g. a backbone-wide ``lr_mult=0.1``, which a longer ``attn.residual`` key would otherwise
  override): one key ``attn.residual`` where that is one rate and the key wins for every residual parameter, else
  one key per block;
* **the check** (the :class:`KeyPlan`'s ``cannot``): with the child's keys, every parameter of the InLine backbone
  gets the ``(lr_mult, decay_mult)`` the recipe gives its upstream counterpart, and every residual parameter the rule
  above, both sides computed by mmengine's constructor (:func:`treatments`) on the two backbones.
"""
import logging
import re
from dataclasses import dataclass, field

import torch

RESIDUAL = 'attn.residual'           # the InLine local residual's kernel generator in every InLine block
ANCHOR = 'attn.proj.weight'          # the block's attention weight whose rate the residual takes
PREFIX = 'backbone.'                 # where mmdet's and mmseg's models keep the backbone


@dataclass
class KeyPlan:
    """What :func:`translate_keys` adds to the recipe's ``custom_keys`` (``keys``) and says (``changed``,
    ``cannot``)."""
    keys: dict = field(default_factory=dict)
    changed: list = field(default_factory=list)
    cannot: list = field(default_factory=list)


class _Holder(torch.nn.Module):
    """A model with only a backbone, named as in mmdet's and mmseg's models."""

    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone


def treatments(backbone, paramwise_cfg):
    """``{'backbone.<name>': (lr_mult, decay_mult)}`` for every trainable parameter of ``backbone``, as mmengine's
    ``DefaultOptimWrapperConstructor`` gives them under ``paramwise_cfg`` (base lr and weight decay 1)."""
    from mmengine.logging import MMLogger
    from mmengine.optim import DefaultOptimWrapperConstructor

    holder = _Holder(backbone)
    constructor = DefaultOptimWrapperConstructor(
        dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=1., weight_decay=1.)), paramwise_cfg)
    groups = []
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)             # the constructor logs every parameter's settings
    try:
        constructor.add_params(groups, holder)
    finally:
        logger.setLevel(level)
    names = {id(p): name for name, p in holder.named_parameters()}
    return {names[id(group['params'][0])]: (group.get('lr', 1.), group.get('weight_decay', 1.))
            for group in groups if group['params'][0].requires_grad}


def _shape(key):
    """``key`` with its numbers as ``{i}``, ``{j}``: how a changed line names a family of per-block keys."""
    names = iter(('{i}', '{j}', '{k}'))
    return re.sub(r'(?<=\.)\d+(?=\.|$)', lambda m: next(names, '{n}'), key)


def _block(name):
    """The block of a residual parameter ``<block>.attn.residual.<...>``, or None for another parameter."""
    block, sep, _ = name.partition(f'.{RESIDUAL}.')
    return block if sep else None


def translate_keys(paramwise_cfg, upstream, inline, table, family):
    """The :class:`KeyPlan` for a recipe whose ``paramwise_cfg`` (with ``custom_keys``) was written for
    ``upstream`` (its backbone module) and now meets ``inline`` (the InLine backbone); ``table`` is the family's
    :class:`~inline_backbones.models.upstream_args.Table`. Its ``cannot`` lists the parameters that still do not
    get what the module docstring says (none for the installed recipes: tested)."""
    custom = paramwise_cfg['custom_keys']
    plan = KeyPlan()
    shapes = {}
    for key, settings in custom.items():
        part = key[len(PREFIX):] if key.startswith(PREFIX) else None
        if not part:
            continue                             # the whole backbone, or any module by substring: same meaning here
        if table.param_name is None:
            plan.cannot.append(f'optimizer key {key!r}: names a part of the {table.upstream} backbone, whose names '
                               f'{family} does not share; not translated')
            continue
        ours = table.param_name(part)
        if ours != part:
            plan.keys[PREFIX + ours] = dict(settings)
            shapes.setdefault((_shape(key), _shape(PREFIX + ours)), []).append(key)
    for (theirs, ours), keys in shapes.items():
        count = f' ({len(keys)} keys)' if len(keys) > 1 else ''
        plan.changed.append(f"optimizer key {theirs!r} -> {ours!r}{count}: the recipe's setting, in {family}'s names")
    wanted = _wanted(paramwise_cfg, plan.keys, upstream, inline, table)
    rates = {_block(name): lr for name, (lr, _) in wanted.items() if _block(name) is not None}
    if not rates:
        plan.cannot += _cannot(_wrong(wanted, treatments(inline, _child(paramwise_cfg, plan.keys)), table), table)
        return plan
    keys = {**plan.keys, RESIDUAL: _residual_setting(next(iter(rates.values())))}
    wrong = _wrong(wanted, treatments(inline, _child(paramwise_cfg, keys)), table)
    if len(set(rates.values())) > 1 or any(_block(line[0]) for line in wrong):
        keys = {**plan.keys, **{f'{block}.{RESIDUAL}': _residual_setting(lr) for block, lr in rates.items()}}
        wrong = _wrong(wanted, treatments(inline, _child(paramwise_cfg, keys)), table)
        plan.changed.append(_residual_line(rates, f'{_shape(next(iter(rates)))}.{RESIDUAL}'))
    else:
        plan.changed.append(_residual_line(rates, RESIDUAL))
    plan.keys = keys
    plan.cannot += _cannot(wrong, table)
    return plan


def _child(paramwise_cfg, keys):
    """The child config's ``paramwise_cfg``: the recipe's, its ``custom_keys`` merged with ``keys`` (as mmengine
    merges a child config's dict into its base's)."""
    return dict(paramwise_cfg, custom_keys={**paramwise_cfg['custom_keys'], **keys})


def _wanted(paramwise_cfg, keys, upstream, inline, table):
    """``{InLine parameter: (lr_mult, decay_mult)}`` it should get: its upstream counterpart's under the recipe's
    ``paramwise_cfg`` (renamed by ``table.param_name``); for a residual parameter, the rate of its block's
    ``attn.proj.weight`` and no decay. Without renaming (``param_name`` None) the residual's only, its block's rate
    read on ``inline`` under the recipe's keys plus ``keys``."""
    if table.param_name is None:
        ours = treatments(inline, _child(paramwise_cfg, keys))
    else:
        theirs = treatments(upstream, paramwise_cfg)
        ours = {PREFIX + table.param_name(name[len(PREFIX):]): value for name, value in theirs.items()}
    wanted = {name: value for name, value in ours.items() if table.param_name is not None}
    for name, _ in inline.named_parameters():
        block = _block(PREFIX + name)
        if block is not None:
            wanted[PREFIX + name] = (ours[f'{block}.{ANCHOR}'][0], 0.)
    return wanted


def _wrong(wanted, got, table):
    """``[(name, got, wanted)]`` for the parameters whose ``got`` treatment is not the ``wanted`` one (those without
    a wanted one count only where the family's names are renamed, i.e. where every parameter has one)."""
    return [(name, value, wanted.get(name)) for name, value in got.items()
            if value != wanted.get(name) and (name in wanted or table.param_name is not None)]


def _cannot(wrong, table):
    """The could-not line for :func:`_wrong`'s list (none when it is empty)."""
    if not wrong:
        return []
    named = ', '.join(f'{name} gets {got} instead of {want}' for name, got, want in wrong[:3])
    more = f' and {len(wrong) - 3} more' if len(wrong) > 3 else ''
    return [f'optimizer: {len(wrong)} backbone parameters do not get the (lr_mult, decay_mult) of their '
            f'{table.upstream} counterparts in the recipe: {named}{more}']


def _residual_setting(rate):
    return dict(decay_mult=0.) if rate == 1. else dict(lr_mult=rate, decay_mult=0.)


def _residual_line(rates, key):
    line = (f"weight decay: none on the InLine local residual's kernel generator ({key}), as the recipe's "
            'custom_keys do for norms and bias tables')
    if set(rates.values()) != {1.}:
        values = ', '.join(f'{r:g}' for r in sorted(set(rates.values())))
        line += f"; at the lr_mult the recipe gives the same block's attention ({values})"
    return line
