"""mmdet's and mmseg's Swin / PVT v1 backbone arguments, taken by the InLine backbones: a recipe's backbone dict with
only its ``type`` changed (``type='inline_backbones.InLineSwinTransformer'`` or ``'inline_backbones.InLinePVT'``)
builds the InLine model of the same size.

One table per family (:data:`SWIN_ARGS`: mmdet's and mmseg's ``SwinTransformer``; :data:`PVT_ARGS`: mmdet's
``PyramidVisionTransformer``, PVT v1) says what each upstream argument becomes:

* :class:`Arch`: part of the architecture; the upstream arguments together select the preset of ``arch`` that
  agrees with every one given (a custom arch dict with an ``attn_type``; an error naming the arguments otherwise);
  given with ``arch``, they must agree with it.
* :class:`Honoured`: the InLine backbone's own argument of the same name (window size, MLP ratio, drop rates, ...).
* :class:`Fixed`: something InLine's model always does (Swin's patch norm, GELU, LayerNorm, ...): accepted when the
  value agrees, refused naming the argument, the value and why otherwise.

An upstream Swin or PVT checkpoint in ``init_cfg`` (the recipe's) is refused at construction for a model with
InLine blocks, naming the released InLine checkpoint of the same size (:func:`check_checkpoint`).
"""
import os
import re
from dataclasses import dataclass
from urllib.parse import urlparse

from ..checkpoints.released import PVT_ARCH_CHECKPOINTS, SWIN_ARCH_CHECKPOINTS
from .errors import ModelArgumentError
from .families.swin_checkpoint import mmdet_swin_name


@dataclass(frozen=True)
class Arch:
    """An architecture argument (read by the table's ``arch`` function)."""


@dataclass(frozen=True)
class Honoured:
    """Passed on as it is: the InLine backbone's argument of the same name."""


@dataclass(frozen=True)
class Fixed:
    """What InLine's model always does: ``agrees(value, given)`` (``given``: every upstream argument passed) says
    whether ``value`` describes it; ``does`` says what the model does, for the error."""
    agrees: object
    does: str


@dataclass(frozen=True)
class Table:
    """A family's upstream arguments: ``upstream`` (what errors call the upstream model), ``args`` (name -> kind),
    ``arch(given) -> dict`` (the arch keys the given arguments fix), ``defaults(arch) -> dict`` (what a custom arch
    dict takes for the keys they leave open), ``checkpoints`` (preset name -> released InLine checkpoint),
    ``param_name(name) -> name`` (an upstream parameter's or module's name -> ours, the family's checkpoint
    converter's renaming; None where the names are not converted)."""
    upstream: str
    args: dict
    arch: object
    defaults: object
    checkpoints: dict
    param_name: object = None


def _is(expected):
    return lambda value, given: value == expected


def _is_size(value, given):
    return (isinstance(value, int) and not isinstance(value, bool) and value > 0) or (
        isinstance(value, (list, tuple)) and len(value) in (1, 2) and all(_is_size(v, given) for v in value))


def _is_bool(value, given):
    return isinstance(value, bool)


def _same_list(expected):
    def agrees(value, given):
        return isinstance(value, (list, tuple)) and bool(value) and list(value) == expected[:len(value)]
    return agrees


def _norm_cfg(eps):
    """``dict(type='LN'[, requires_grad=True][, eps=...])`` with the eps InLine's blocks use."""
    def agrees(value, given):
        return (isinstance(value, dict) and value.get('type') in ('LN', 'LayerNorm')
                and value.get('requires_grad', True) is True and value.get('eps', eps) == eps
                and set(value) <= {'type', 'requires_grad', 'eps'})
    return agrees


def _gelu(value, given):
    return isinstance(value, dict) and value.get('type') == 'GELU' and set(value) <= {'type', 'approximate'} and \
        value.get('approximate', 'none') == 'none'


def _swin_strides(value, given):
    return (isinstance(value, (list, tuple)) and len(value) >= 1 and value[0] == given.get('patch_size', 4)
            and all(s == 2 for s in value[1:]))


_NO_PRETRAINED = Fixed(_is(None), "loads weights through init_cfg only; write init_cfg=dict(type='Pretrained', "
                                  'checkpoint=...) instead of the deprecated pretrained=')
_CONVERT = Fixed(_is_bool, "recognises the checkpoint's key format itself (released, timm, mmdet/mmseg), so either "
                           'value loads the same file; it takes a bool')

_SWIN_DEFAULTS = dict(embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24])


def _swin_arch(given):
    """mmdet's/mmseg's ``embed_dims``, ``depths``, ``num_heads`` are the arch's; those left out take their upstream
    defaults (Swin-T's), as upstream."""
    if not any(k in given for k in _SWIN_DEFAULTS):
        return {}
    return {k: (list(given[k]) if isinstance(given.get(k), (list, tuple)) else given.get(k, v))
            for k, v in _SWIN_DEFAULTS.items()}


SWIN_ARGS = Table(
    upstream='Swin',
    args=dict(
        pretrain_img_size=Fixed(_is_size, 'takes any input size and has no absolute position embedding '
                                          '(use_abs_pos_embed=False), the only thing this size sets upstream; '
                                          'it takes an int or an (H, W) pair'),
        in_channels=Honoured(), embed_dims=Arch(), depths=Arch(), num_heads=Arch(),
        patch_size=Honoured(), window_size=Honoured(), mlp_ratio=Honoured(),
        strides=Fixed(_swin_strides, 'embeds patches with stride patch_size and merges patches 2x2 after each '
                                     'stage: strides=(patch_size, 2, 2, 2)'),
        out_indices=Honoured(),
        qkv_bias=Honoured(),
        qk_scale=Fixed(_is(None), 'scales attention by head_dim ** -0.5, as qk_scale=None does'),
        patch_norm=Fixed(_is(True), 'has a LayerNorm after the patch embedding (patch_norm=True)'),
        drop_rate=Honoured(), attn_drop_rate=Honoured(), drop_path_rate=Honoured(),
        use_abs_pos_embed=Fixed(_is(False), 'has no absolute position embedding (use_abs_pos_embed=False)'),
        act_cfg=Fixed(_gelu, "uses GELU in its MLPs: act_cfg=dict(type='GELU')"),
        norm_cfg=Fixed(_norm_cfg(1e-5), "uses LayerNorm (eps 1e-5) everywhere: norm_cfg=dict(type='LN')"),
        with_cp=Honoured(),
        pretrained=_NO_PRETRAINED,
        convert_weights=_CONVERT,
        frozen_stages=Honoured(),
        init_cfg=Honoured()),
    arch=_swin_arch,
    defaults=lambda arch: {},
    checkpoints=SWIN_ARCH_CHECKPOINTS,
    param_name=mmdet_swin_name)

_PVT_V1_HEADS = [1, 2, 5, 8]


def _pvt_arch(given):
    """mmdet's PVT: stage widths ``embed_dims * num_heads[i]`` (``embed_dims`` 64, ``num_heads`` PVT v1's 1-2-5-8
    when left out), ``num_layers`` the depths, ``mlp_ratios``, ``sr_ratios``; ``num_heads`` fixes the heads only when
    given (InLine-PVT has twice PVT v1's heads at the same widths)."""
    if not any(k in given for k in ('embed_dims', 'num_layers', 'num_heads', 'mlp_ratios', 'sr_ratios')):
        return {}
    heads = list(given.get('num_heads', _PVT_V1_HEADS))
    arch = dict(embed_dims=[given.get('embed_dims', 64) * h for h in heads])
    for ours, theirs in (('depths', 'num_layers'), ('num_heads', 'num_heads'), ('mlp_ratios', 'mlp_ratios'),
                         ('sr_ratios', 'sr_ratios')):
        if theirs in given:
            arch[ours] = list(given[theirs])
    return arch


def _pvt_stages(value, given):
    lengths = {len(given[k]) for k in ('num_layers', 'num_heads', 'mlp_ratios', 'sr_ratios', 'patch_sizes',
                                       'strides', 'paddings') if isinstance(given.get(k), (list, tuple))}
    return isinstance(value, int) and not isinstance(value, bool) and (lengths or {4}) == {value}


PVT_ARGS = Table(
    upstream='PVT',
    args=dict(
        pretrain_img_size=Honoured(), in_channels=Honoured(),
        embed_dims=Arch(), num_stages=Fixed(_pvt_stages, 'has one stage per entry of num_layers, num_heads, '
                                                         'sr_ratios, mlp_ratios (4 in every preset): num_stages '
                                                         'must be their length'),
        num_layers=Arch(), num_heads=Arch(),
        patch_sizes=Fixed(_same_list([4, 2, 2, 2]), 'embeds patches with kernels 4, 2, 2, 2: patch_sizes=[4, 2, 2, 2]'),
        strides=Fixed(_same_list([4, 2, 2, 2]), 'embeds patches with strides 4, 2, 2, 2: strides=[4, 2, 2, 2]'),
        paddings=Fixed(_same_list([0, 0, 0, 0]), 'embeds patches without padding: paddings=[0, 0, 0, 0]'),
        sr_ratios=Arch(), out_indices=Honoured(), mlp_ratios=Arch(), qkv_bias=Honoured(),
        drop_rate=Honoured(), attn_drop_rate=Honoured(), drop_path_rate=Honoured(),
        use_abs_pos_embed=Fixed(_is(True), 'adds an absolute position embedding in every stage '
                                           '(use_abs_pos_embed=True)'),
        norm_after_stage=Fixed(_is(False), 'has no norm after its stages (norm_after_stage=False)'),
        use_conv_ffn=Fixed(_is(False), 'has plain MLPs, no convolution in them (use_conv_ffn=False)'),
        act_cfg=Fixed(_gelu, "uses GELU in its MLPs: act_cfg=dict(type='GELU')"),
        norm_cfg=Fixed(_norm_cfg(1e-6), "uses LayerNorm with eps 1e-6 in its blocks: norm_cfg=dict(type='LN', "
                                        'eps=1e-6) (the eps of the embedding and reduction norms is the arch\'s)'),
        pretrained=_NO_PRETRAINED,
        convert_weights=_CONVERT,
        init_cfg=Honoured()),
    arch=_pvt_arch,
    defaults=lambda arch: dict(num_heads=_PVT_V1_HEADS[:len(arch.get('depths', _PVT_V1_HEADS))]),
    checkpoints=PVT_ARCH_CHECKPOINTS)


def translate(table, model_cls, arch, attn_type, kwargs):
    """The InLine backbone's ``(arch, kwargs)`` for ``model_cls(arch, attn_type, **kwargs)`` where ``kwargs`` may
    hold upstream arguments: checks every :class:`Fixed` one, turns the :class:`Arch` ones into ``arch`` (a preset
    name, or a custom dict when ``attn_type`` is given), gives ``init_cfg=dict(checkpoint=...)`` (mmdet PVT's form)
    the type ``'Pretrained'``, and refuses an upstream checkpoint (:func:`check_checkpoint`).
    :class:`~.errors.ModelArgumentError` naming the argument, its value and why where one cannot be taken."""
    family, owner = model_cls.family, model_cls.__name__
    kwargs = dict(kwargs)
    given = {k: kwargs.pop(k) for k in list(kwargs) if not isinstance(table.args.get(k, Honoured()), Honoured)}
    for name, value in given.items():
        kind = table.args[name]
        if isinstance(kind, Fixed) and not kind.agrees(value, {**kwargs, **given}):
            raise ModelArgumentError(f'{owner}: {name}={value!r} cannot be taken: {family.name} {kind.does}. Remove '
                                     f'{name} from the backbone config (or set it to what {family.name} does).')
    partial = table.arch({k: v for k, v in given.items() if isinstance(table.args[k], Arch)})
    presets = [name for name, preset in family.arch_zoo.items()
               if all(_agree(preset.get(k), v) for k, v in partial.items())]
    if arch is not None and partial:
        resolved = family.resolve_arch(arch)
        wrong = {k: v for k, v in partial.items() if not _agree(resolved.get(k), v)}
        if wrong:
            raise ModelArgumentError(
                f'{owner}: arch={arch!r} and the {table.upstream} arguments disagree: '
                + '; '.join(f'{k} {v} (arguments) vs {resolved.get(k)} (arch)' for k, v in wrong.items())
                + f'; give one or the other ({_upstream_names(table)} describe {_describe(partial)}).')
    size = arch if arch is not None else (presets[0] if presets else None)
    init_cfg = kwargs.get('init_cfg')
    if isinstance(init_cfg, dict) and 'checkpoint' in init_cfg and 'type' not in init_cfg:
        kwargs['init_cfg'] = init_cfg = {'type': 'Pretrained', **init_cfg}       # mmdet PVT's init_cfg form
    layout = attn_type if attn_type is not None else (
        family.resolve_arch(size).get('attn_type') if size is not None else None)
    check_checkpoint(table, owner, family, init_cfg, size, layout, partial)
    if arch is not None or not partial:
        return arch, kwargs
    if presets:
        return presets[0], kwargs
    if attn_type is None:
        raise ModelArgumentError(
            f'{owner}: the {table.upstream} arguments describe {_describe(partial)}, which is no {family.name} preset '
            f'(no released InLine model of this size). The presets: '
            + '; '.join(f'{n!r} ({_describe({k: p[k] for k in partial if k in p})})'
                        for n, p in family.arch_zoo.items())
            + f'. To train this size from scratch, give attn_type (a layout, one letter per stage, e.g. '
              f'{next(iter(family.arch_zoo.values()))["attn_type"]!r}) and init_cfg=None.')
    custom = {**table.defaults(partial), **partial}
    return custom, kwargs


def is_upstream_checkpoint(checkpoint):
    """Whether ``checkpoint`` (a path or URL) names an upstream Swin or PVT checkpoint: a file named ``swin_...`` /
    ``pvt_...`` (``swin_tiny_patch4_window7_224.pth``, mmseg's ``swin_tiny_..._20220317-1cdeb081.pth``,
    ``pvt_tiny.pth``, ``pvt_v2_b0.pth``), or one of the Swin / PVT authors' release pages."""
    if not isinstance(checkpoint, str):
        return False
    name = os.path.basename(urlparse(checkpoint).path if '://' in checkpoint else checkpoint)
    return bool(re.match(r'(swin|pvt)(v2)?[_-]', name, re.I)) or any(
        host in checkpoint for host in ('github.com/SwinTransformer/', 'github.com/whai362/PVT'))


def check_checkpoint(table, owner, family, init_cfg, size, layout, partial):
    """Refuse an ``init_cfg`` whose checkpoint is an upstream Swin / PVT one (:func:`is_upstream_checkpoint`) for
    a model with InLine blocks (a layout of only ``S``, plain Swin / PVT v1, takes them). The error names the
    released InLine checkpoint of the model's size (``size``: a preset name) and the line to write, or says that
    none is released."""
    cfgs = init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]
    for cfg in cfgs:
        checkpoint = cfg.get('checkpoint') if isinstance(cfg, dict) else None
        if not is_upstream_checkpoint(checkpoint):
            continue
        if layout is not None and set(re.sub(r'\d', '', layout)) == {'S'}:
            continue                                   # plain Swin / PVT v1: their weights are its weights
        head = (f'{owner}: init_cfg.checkpoint {checkpoint!r} is a {table.upstream} checkpoint (the upstream '
                f"recipe's); its weights are not {family.name}'s and are never loaded into an InLine model. ")
        link = table.checkpoints.get(size) if isinstance(size, str) else None
        if link is not None:
            raise ModelArgumentError(
                head + f'The released {family.name} checkpoint of this size (arch {size!r}) is {link}: '
                f"write model.backbone.init_cfg.checkpoint='{link}' (on the command line: --cfg-options "
                f'model.backbone.init_cfg.checkpoint={link}), or init_cfg=None to train from scratch.')
        what = f'arch {size!r}' if size is not None else _describe(partial) or 'this arch'
        raise ModelArgumentError(
            head + f'No {family.name} checkpoint of this size ({what}) is released (released: '
            f'{sorted(table.checkpoints)}): write model.backbone.init_cfg=None to train from scratch, '
            'or point model.backbone.init_cfg.checkpoint at an InLine checkpoint of your own.')


def _agree(ours, theirs):
    if isinstance(ours, (list, tuple)) or isinstance(theirs, (list, tuple)):
        return (isinstance(ours, (list, tuple)) and isinstance(theirs, (list, tuple)) and len(ours) == len(theirs)
                and all(_agree(a, b) for a, b in zip(ours, theirs, strict=True)))
    return ours == theirs


def _describe(partial):
    return ', '.join(f'{k} {v}' for k, v in partial.items())


def _upstream_names(table):
    return ', '.join(k for k, kind in table.args.items() if isinstance(kind, Arch))
