"""An mmdet/mmseg Swin or PVT v1 recipe with an InLine backbone: the child config that inherits the recipe and
swaps its backbone, and the list of what changed and what could not (behind ``tools/misc/inline_recipe.py``).

:func:`plan` reads the recipe and decides:

* **the backbone**: the recipe's ``SwinTransformer`` / ``PyramidVisionTransformer`` (PVT v1) arguments become the
  InLine backbone's by the family's table (:func:`~inline_backbones.models.upstream_args.translate`): the size
  arguments select the InLine preset of that size, the honoured ones are written out, the ones InLine always does
  are dropped (or refused, with the table's reason). The backbone dict is written whole (``_delete_=True``), so the
  child config says everything the InLine backbone takes;
* **the weights**: the released InLine ImageNet checkpoint of that size replaces the recipe's Swin / PVT one (none is
  released for a size without a preset: the layout given with ``layout`` then trains from scratch). The released
  InLine-Swin models have 7x7 softmax windows, so a recipe's window 12 (its 384-px models) becomes 7 to load them;
* **padding-aware mode** with the region preprocessor, where the recipe's data path is mmdet's
  ``DetDataPreprocessor`` or mmseg's ``SegDataPreProcessor`` (whose subclasses attach each image's region); another
  preprocessor (e.g. ``TrackDataPreprocessor``) keeps the mode off;
* **the optimizer's keys**: a recipe's ``paramwise_cfg.custom_keys`` that name parts of its Swin
  (``backbone.stages.{i}.blocks.{j}.norm``) are added in the InLine backbone's names, and InLine's local residual
  (``attn.residual``) is kept out of weight decay at the rate the recipe gives its block's attention; every
  backbone parameter is then checked to get what the recipe gives its Swin counterpart
  (:mod:`~inline_backbones.openmmlab.recipe_optimizer`).

:func:`render` writes the child config's text. Errors are :class:`RecipeError` with one line saying what and why.
"""
import ast
import functools
import os
import os.path as osp
import textwrap
from dataclasses import dataclass, field

from ..models.upstream_args import PVT_ARGS, SWIN_ARGS, Arch, Fixed, translate
from . import recipe_optimizer
from .config_code import as_code, plain
from .errors import RecipeError  # noqa: F401  (raised here; importable from here too)

# The upstream backbone type -> (InLine backbone class name, the family's argument table, family name).
BACKBONES = {'SwinTransformer': ('InLineSwinTransformer', SWIN_ARGS, 'InLine-Swin'),
             'PyramidVisionTransformer': ('InLinePVT', PVT_ARGS, 'InLine-PVT')}
# The recipe's preprocessor type -> (the region preprocessor that subclasses it, the module that registers it).
REGION_PREPROCESSORS = {
    'DetDataPreprocessor': ('inline_backbones.RegionDetDataPreprocessor',
                            'inline_backbones.openmmlab.det_preprocessor'),
    'SegDataPreProcessor': ('inline_backbones.RegionSegDataPreProcessor',
                            'inline_backbones.openmmlab.seg_preprocessor')}
RELEASED_WINDOW = 7          # the softmax window of every released InLine-Swin model
# mmseg's own test padding of the InLine configs: a side below the last stage's stride (32 px) is padded to it
SEG_TEST_PAD = dict(size=(32, 32))
INSTALLED_CONFIGS = osp.join('.mim', 'configs')
# The first base of a child of an `mmseg::` recipe: resolves the name on both OpenMMLab lines (config_scopes.py).
REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))     # inline_backbones/openmmlab/ -> the repository
SCOPES_BASE = osp.join(REPO, 'mmseg_configs', '_base_', 'openmmlab_scopes.py')
COMMENT_WIDTH = 116          # the written config's comment lines (a URL longer than that stays whole)


@dataclass
class Swap:
    """What :func:`render` writes: ``base`` (what ``_base_`` names), ``task`` (``'mmdet'`` / ``'mmseg'``),
    ``family``, the child's ``backbone`` (whole), ``data_preprocessor`` (merged into the recipe's, or None),
    ``custom_imports``, ``optim_wrapper`` (merged, or None), ``load_from`` (whether the child clears the recipe's),
    and for the user ``changed`` and ``cannot`` (lines)."""
    base: str
    task: str
    family: str
    backbone: dict
    data_preprocessor: dict = None
    custom_imports: list = field(default_factory=list)
    optim_wrapper: dict = None
    load_from: bool = False
    changed: list = field(default_factory=list)
    cannot: list = field(default_factory=list)


def base_name(recipe):
    """What ``_base_`` writes for ``recipe``: ``mmdet::``/``mmseg::`` names as given; a file inside an installed
    package's configs (``.../mmdet/.mim/configs/swin/x.py``) as its ``mmdet::swin/x.py`` name; another path
    absolute (a child written elsewhere still finds it)."""
    if '::' in recipe:
        return recipe
    path = osp.abspath(recipe)
    head, sep, tail = path.partition(osp.sep + INSTALLED_CONFIGS + osp.sep)
    if sep and osp.basename(head) in ('mmdet', 'mmseg'):
        return f'{osp.basename(head)}::{tail.replace(osp.sep, "/")}'
    return path


def recipe_path(recipe):
    """The file of ``recipe``: ``mmdet::x/y.py`` / ``mmseg::x/y.py`` in the installed package's configs (as
    mmengine finds ``_base_`` names), or the path. RecipeError naming what is missing."""
    package, sep, rel = recipe.partition('::')
    if sep:
        if package not in ('mmdet', 'mmseg'):
            raise RecipeError(f'{recipe}: {package}:: is no package of recipes here; mmdet:: and mmseg:: are')
        from mmengine.utils import get_installed_path
        try:
            path = osp.join(get_installed_path(package), INSTALLED_CONFIGS, rel)
        except Exception:
            raise RecipeError(f'{recipe}: {package} is not installed') from None
    else:
        path = recipe
    if not osp.isfile(path):
        raise RecipeError(f'{recipe}: no such config ({path})')
    return path


def _short_type(value):
    return value.rpartition('.')[2] if isinstance(value, str) else value


def plan(recipe, padding_aware=True, layout=None):
    """The :class:`Swap` for ``recipe`` (``mmdet::...``, ``mmseg::...`` or a config path). ``padding_aware=False``
    keeps the recipe's preprocessor and the mode off (the paper's protocol); ``layout`` (e.g. ``'IIIS'``) sets the
    InLine layout, and is required for a size with no InLine preset (trained from scratch)."""
    from mmengine.config import Config

    cfg = Config.fromfile(recipe_path(recipe))
    task = cfg.get('default_scope')
    if task not in ('mmdet', 'mmseg'):
        raise RecipeError(f'{recipe}: default_scope is {task!r}; an mmdet or mmseg recipe is expected')
    model = plain(cfg.to_dict().get('model') or {})
    upstream = dict(model.get('backbone') or {})
    kind = _short_type(upstream.get('type'))
    if kind not in BACKBONES:
        hint = (' (PVT v2 has no InLine counterpart: the InLine-PVT models are PVT v1\'s)'
                if kind == 'PyramidVisionTransformerV2' else '')
        raise RecipeError(f'{recipe}: its backbone is {kind!r}{hint}; the InLine backbones replace Swin '
                          f'(SwinTransformer) and PVT v1 (PyramidVisionTransformer)')
    cls_name, table, family = BACKBONES[kind]
    swap = Swap(base=base_name(recipe), task=task, family=family, backbone={})
    _swap_backbone(swap, upstream, cls_name, table, layout)
    _swap_preprocessor(swap, model.get('data_preprocessor'), padding_aware)
    swap.custom_imports = _imports(cfg.get('custom_imports'), swap)
    inline = build_backbone(swap.backbone, recipe)
    _swap_optimizer(swap, plain(cfg.to_dict().get('optim_wrapper') or {}), upstream, inline, table)
    if cfg.get('load_from'):
        swap.load_from = True
        swap.cannot.append(f'load_from: the recipe fine-tunes a whole {table.upstream} model ({cfg.load_from}); '
                           'cleared (load_from = None): its backbone weights are not InLine\'s, and mmengine\'s '
                           'load_from is not strict, so it would load the neck and heads and skip the backbone '
                           'without an error')
    return swap


def _model_class(cls_name):
    from .. import models
    return getattr(models, cls_name)


def _swap_backbone(swap, upstream, cls_name, table, layout):
    """The child's backbone: the InLine preset (or ``layout``'s custom arch), the honoured arguments, the released
    checkpoint, padding-aware mode (set later by the preprocessor's decision)."""
    cls = _model_class(cls_name)
    given = {k: v for k, v in upstream.items() if k not in ('type', '_delete_', 'init_cfg')}
    try:
        arch, kwargs = translate(table, cls, None, layout, given)
    except ValueError as err:
        message = str(err).replace(f'{cls_name}: ', f'{swap.base}: ', 1)
        if 'give attn_type' in message:
            message += " Here: --layout with one letter per stage, e.g. --layout IIIS."
        raise RecipeError(message) from None
    dropped = sorted(k for k in given if k not in kwargs and isinstance(table.args.get(k), Fixed))
    preset = arch if isinstance(arch, str) else None
    link = table.checkpoints.get(preset) if preset is not None else None
    backbone = {'_delete_': True, 'type': f'inline_backbones.{cls_name}', 'arch': arch}
    if layout is not None:
        backbone['attn_type'] = layout
    backbone.update(kwargs)
    what = (f"arch {preset!r} (layout {layout or cls.arch_zoo[preset]['attn_type']})" if preset is not None
            else f'a custom arch {arch} (layout {layout})')
    swap.changed.append(f"backbone: {table.upstream} {_size(given, table)} -> {swap.family} {what}")
    if dropped:
        swap.changed.append('dropped, as InLine always does what they say: '
                            + ', '.join(f'{k}={given[k]!r}' for k in dropped))
    old = (upstream.get('init_cfg') or {}).get('checkpoint') if isinstance(upstream.get('init_cfg'), dict) else None
    if link is not None:
        backbone['init_cfg'] = dict(type='Pretrained', checkpoint=link)
        swap.changed.append(f'weights: {old or "none"} -> the released {swap.family} ImageNet-1k checkpoint {link}')
        window = kwargs.get('window_size', RELEASED_WINDOW)
        if table is SWIN_ARGS and window != RELEASED_WINDOW:
            backbone['window_size'] = RELEASED_WINDOW
            swap.changed.append(f'window_size: {window} -> {RELEASED_WINDOW}, the released checkpoint\'s softmax '
                                f'windows ({2 * RELEASED_WINDOW - 1}x{2 * RELEASED_WINDOW - 1} relative position '
                                'bias tables); the InLine stages attend globally at any window size')
    else:
        backbone['init_cfg'] = None
        swap.cannot.append(f'weights: no released {swap.family} checkpoint of this size; the backbone trains from '
                           f'scratch (init_cfg=None; the recipe had {old or "none"})')
    swap.backbone = backbone


def _size(given, table):
    keys = [k for k, kind in table.args.items() if isinstance(kind, Arch) and k in given]
    return '(' + ', '.join(f'{k}={given[k]}' for k in keys) + ')' if keys else '(its defaults)'


def _swap_preprocessor(swap, preprocessor, padding_aware):
    """The region preprocessor and padding-aware mode, where the recipe's preprocessor is the plain one."""
    kind = _short_type((preprocessor or {}).get('type'))
    region = REGION_PREPROCESSORS.get(kind)
    if not padding_aware:
        swap.backbone['padding_aware'] = False
        swap.changed.append('padding-aware mode: off (asked), the recipe\'s preprocessor kept')
        return
    if region is None:
        swap.backbone['padding_aware'] = False
        swap.cannot.append(f'padding-aware mode: off. It needs each image\'s region, which the region '
                           f'preprocessors attach as subclasses of mmdet\'s DetDataPreprocessor and mmseg\'s '
                           f'SegDataPreProcessor; this recipe\'s is {kind!r}')
        return
    swap.backbone['padding_aware'] = True
    swap.data_preprocessor = {'type': region[0]}
    line = f'padding-aware mode: on; data_preprocessor: {kind} -> {region[0]} (same arguments, plus each ' \
           'image\'s region)'
    if kind == 'SegDataPreProcessor' and not preprocessor.get('test_cfg'):
        swap.data_preprocessor['test_cfg'] = dict(SEG_TEST_PAD)
        line += '; test images with a side below 32 px padded to 32 and cropped back'
    swap.changed.append(line)


def _swap_optimizer(swap, optim_wrapper, upstream, inline, table):
    """The recipe's ``paramwise_cfg.custom_keys`` in the InLine backbone's names, the local residual's key, and the
    check that every backbone parameter gets what the recipe gives its upstream counterpart
    (:mod:`~inline_backbones.openmmlab.recipe_optimizer`)."""
    paramwise = optim_wrapper.get('paramwise_cfg') or {}
    custom = paramwise.get('custom_keys')
    if not isinstance(custom, dict):
        return
    if optim_wrapper.get('constructor') not in (None, 'DefaultOptimWrapperConstructor'):
        swap.cannot.append(f"optimizer: the recipe's constructor {optim_wrapper['constructor']!r} reads its own "
                           "keys; its custom_keys are kept as they are, not translated to the InLine backbone's names")
        return
    keys = recipe_optimizer.translate_keys(paramwise, upstream_backbone(swap.task, upstream, swap.base), inline,
                                           table, swap.family)
    swap.optim_wrapper = {'paramwise_cfg': {'custom_keys': keys.keys}}
    swap.changed += keys.changed
    swap.cannot += keys.cannot


def upstream_backbone(task, upstream, where):
    """The recipe's own backbone (mmdet's or mmseg's ``SwinTransformer`` / ``PyramidVisionTransformer``) from its
    dict without its ``init_cfg`` (nothing downloaded), on the meta device: built on the CPU (mmdet's Swin reads its
    drop-path rates with ``.item()``, which the meta device cannot) and moved there, once per dict and process."""
    cfg = dict(upstream, init_cfg=None)
    try:
        return _upstream_backbone(task, repr(cfg))
    except (KeyError, TypeError, ValueError) as err:
        raise RecipeError(f'{where}: its own backbone does not build ({err}), so its optimizer keys cannot be '
                          'compared with the InLine backbone\'s') from None


@functools.cache
def _upstream_backbone(task, cfg):
    from mmengine.registry import DefaultScope

    if task == 'mmdet':
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules
    else:
        from mmseg.registry import MODELS
        from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    with DefaultScope.overwrite_default_scope(task):
        return MODELS.build(ast.literal_eval(cfg)).to('meta')


def _imports(existing, swap):
    """The recipe's ``custom_imports`` (a name or a list) with the package and its preprocessor's module added."""
    names = []
    if existing:
        imports = existing.get('imports', [])
        names = [imports] if isinstance(imports, str) else list(imports)
    wanted = ['inline_backbones']
    if swap.data_preprocessor is not None:
        wanted.append(next(module for name, module in REGION_PREPROCESSORS.values()
                           if name == swap.data_preprocessor['type']))
    return names + [n for n in wanted if n not in names]


def render(swap, tool='tools/misc/inline_recipe.py'):
    """The child config's text: a header saying what it is, ``_base_``, ``custom_imports``, the model's new parts,
    the optimizer's key, and the changes as comments."""
    def comment(line):
        return textwrap.wrap(line, COMMENT_WIDTH, initial_indent='#   ', subsequent_indent='#     ',
                             break_long_words=False, break_on_hyphens=False)

    lines = [f'# {swap.family} in {swap.base}:', f'# the recipe with its backbone swapped, written by {tool}.',
             '# What changed (docs/upstream_recipes.md says why):']
    lines += [text for line in swap.changed for text in comment(line)]
    if swap.cannot:
        lines.append('# What could not be done:')
        lines += [text for line in swap.cannot for text in comment(line)]
    base = [SCOPES_BASE, swap.base] if swap.base.startswith('mmseg::') else swap.base
    lines += [f'_base_ = {base!r}', '',
              f'custom_imports = dict(imports={swap.custom_imports!r},',
              '                      allow_failed_imports=False)', '']
    model = {}
    if swap.data_preprocessor is not None:
        model['data_preprocessor'] = swap.data_preprocessor
    model['backbone'] = swap.backbone
    lines.append('model = ' + as_code(model))
    if swap.optim_wrapper is not None:
        lines += ['', 'optim_wrapper = ' + as_code(swap.optim_wrapper)]
    if swap.load_from:
        lines += ['', 'load_from = None']
    return '\n'.join(lines) + '\n'


def default_out(recipe, folder='configs'):
    """``configs/<recipe's name with swin/pvt made inline-swin/inline-pvt>.py``."""
    name = osp.basename(recipe.partition('::')[2] or recipe)
    for word in ('swin', 'pvt'):
        at = name.lower().find(word)
        if at >= 0:
            return osp.join(folder, name[:at] + 'inline-' + name[at:])
    return osp.join(folder, 'inline_' + name)


def write(swap, out):
    """Write the child config to ``out`` (folders made). Returns ``out``."""
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        f.write(render(swap))
    return out


def build_backbone(backbone, where):
    """The InLine backbone of a child's ``backbone`` dict, built on the meta device (nothing allocated, nothing
    downloaded); RecipeError with ``where`` and the backbone's own message where it does not build."""
    import torch

    cls = _model_class(backbone['type'].rpartition('.')[2])
    try:
        with torch.device('meta'):
            return cls(**{k: v for k, v in backbone.items() if k not in ('type', '_delete_')})
    except (TypeError, ValueError) as err:
        raise RecipeError(f'{where}: the InLine backbone does not build: {err}') from None


def check_written(out, swap):
    """Load the written child config and build its backbone (:func:`build_backbone`): the config the user gets is
    one that builds. Returns the backbone."""
    from mmengine.config import Config

    backbone = dict(Config.fromfile(out).model.backbone)
    if backbone.get('type') != swap.backbone['type']:
        raise RecipeError(f'{out}: the written config\'s backbone is {backbone.get("type")!r}, not '
                          f'{swap.backbone["type"]!r}')
    return build_backbone(backbone, out)
