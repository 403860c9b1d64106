"""mmdet glue: :class:`ClassCheckHook` stops a detection run before its first iteration when its classes do not
agree, naming what differs and how to write a config that agrees.

Four things name the classes of a run, and mmdet lets them disagree without a word:

* the config's top-level ``classes``, what its author meant. mmengine resolves a config's variables when it reads
  that file, so a child of a fine-tuning config that sets only ``classes`` keeps its base's dataset ``metainfo`` and
  heads' ``num_classes``; mmdet's ``NumClassCheckHook`` compares the heads with the dataset's metainfo, which kept
  the base's classes too, and passes;
* each dataset's ``metainfo['classes']``. mmdet's ``CocoDataset`` keeps the annotations whose category name is
  among them and drops the others: an annotation file with more categories trains on a subset of it; a class the
  file lacks leaves the labels after it shifted by one;
* the heads' ``num_classes``;
* the ``categories`` of each dataset's COCO annotation file. mmdet numbers the labels in the file's order of its
  categories (label ``i`` is the i-th of the file's categories among the classes), whatever the order of
  ``classes``, which only names the labels: classes in another order name them wrongly (in the per-class metrics,
  the logs and the predictions).

With ``C`` the config's ``classes`` (or, in a config without one, the first dataset's), the hook requires: each
dataset's classes are ``C``, in that order; every head's ``num_classes`` is ``len(C)`` (RPN heads aside: their
one class is "object"; the backbone aside); each COCO annotation file's category names, in the file's order, are
``C``. It checks the training and validation datasets before training starts (``before_train``), the validation
datasets before the first validation (``before_val``) and the test datasets before testing (``before_test``), each
dataset once. Any difference is one :class:`ClassMismatchError` listing every list that differs from ``C``, what it
has extra and what it misses, and the command of ``tools/misc/finetune_config.py`` that writes a config from the
annotation file.

Training on some of a file's categories on purpose is ``ClassCheckHook(allow_subset=True)``: ``C`` may then be
some of the file's categories (still in the file's order, all present in it); the runner's log names the
categories whose annotations are left out.

Classes that share no name with a COCO training file's categories leave its dataset without an image, and mmengine
fails as it builds that dataset, before any hook runs; :func:`check_config_classes` makes the same check on the config
alone (``tools/train.py`` and ``tools/test.py`` run it when a run fails, so that the failure is this error).

Configs name it ``dict(type='inline_backbones.ClassCheckHook')`` in ``custom_hooks`` (the package's ``HOOKS``
registry imports this module); it imports mmengine only.
"""
import json
import os.path as osp

from mmengine.fileio import get_local_path
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from ..registry import HOOKS
from .errors import ClassMismatchError  # noqa: F401  (raised here; importable from here too)

TOOL = 'tools/misc/finetune_config.py'
# The modules with a num_classes that are not the detector's class heads: RPN heads (object or not), the
# backbone (mmcv's VGG has one), HTC's semantic head (stuff classes); mmdet's NumClassCheckHook skips them too.
NOT_CLASS_HEADS = ('backbone', 'rpn_head', 'semantic_head')


def coco_categories(ann_file, backend_args=None):
    """The category names of the COCO annotation file ``ann_file``, in the file's order (the order in which mmdet's
    ``CocoDataset`` numbers the labels)."""
    with get_local_path(ann_file, backend_args=backend_args) as local, open(local) as f:
        coco = json.load(f)
    return [category['name'] for category in coco.get('categories', [])]


def leaf_datasets(dataset):
    """The datasets inside mmengine's wrappers (``ConcatDataset``'s ``datasets``, ``RepeatDataset``'s and
    ``ClassBalancedDataset``'s ``dataset``), or ``[dataset]``."""
    if isinstance(getattr(dataset, 'datasets', None), (list, tuple)):
        return [leaf for inner in dataset.datasets for leaf in leaf_datasets(inner)]
    if getattr(dataset, 'dataset', None) is not None and not hasattr(dataset, 'ann_file'):
        return leaf_datasets(dataset.dataset)
    return [dataset]


def class_heads(model):
    """``{module name: num_classes}`` of the model's class heads: its modules with an integer ``num_classes``,
    except those in :data:`NOT_CLASS_HEADS`."""
    if is_model_wrapper(model):
        model = model.module
    return {name: module.num_classes for name, module in model.named_modules()
            if isinstance(getattr(module, 'num_classes', None), int) and not isinstance(module.num_classes, bool)
            and not set(name.split('.')) & set(NOT_CLASS_HEADS)}


def as_classes(classes, what):
    """``classes`` as a tuple of names; ClassMismatchError for a bare string (a tuple of one needs its comma)."""
    if isinstance(classes, str):
        raise ClassMismatchError(f'{what} is the string {classes!r}, not a tuple of names: a tuple of one class is '
                                 f'written ({classes!r},)')
    return tuple(classes)


def _names(names):
    return ', '.join(names) if names else '(none)'


def difference(title, names, reference):
    """One line of the error: ``title`` and ``names``, then what they have beyond ``reference`` and what they lack,
    or that only the order differs."""
    extra = [n for n in names if n not in reference]
    missing = [n for n in reference if n not in names]
    line = f'  {title} ({len(names)}): {_names(names)}'
    if extra:
        line += f'\n      extra: {_names(extra)}'
    if missing:
        line += f'\n      missing: {_names(missing)}'
    if not extra and not missing:
        line += '\n      the same names in another order'
    return line


def _relative(path, root):
    return osp.relpath(path, root) if root and osp.isabs(path) == osp.isabs(root) else path


def tool_command(datasets):
    """The ``tools/misc/finetune_config.py`` command that writes a config from the annotation files of ``datasets``
    (``[(split, dataset)]``): its data root, and the training and validation jsons and image folders relative to
    it (a test dataset stands for the validation one where there is none)."""
    by_split = {}
    for split, dataset in datasets:
        by_split.setdefault('val' if split == 'test' else split, dataset)
    anchor = by_split['train'] if 'train' in by_split else by_split.get('val')    # not `or`: that would ask len()
    root = getattr(anchor, 'data_root', None) or ''
    words = ['python', TOOL, (root.rstrip('/') + '/') if root else 'DATA_ROOT']
    for split in ('train', 'val'):
        dataset = by_split.get(split)
        if dataset is None or not getattr(dataset, 'ann_file', None):
            continue
        words += [f'--{split}-json', _relative(dataset.ann_file, root)]
        images = (getattr(dataset, 'data_prefix', None) or {}).get('img')
        if images:
            words += [f'--{split}-images', _relative(images, root).rstrip('/') + '/']
    return ' '.join(words + ['--out', 'configs/finetune_my_data.py'])


def check_classes(classes, datasets, heads, allow_subset=False, source="the config's `classes`"):
    """Compare ``classes`` (``C``: what the config means) with each dataset's ``metainfo['classes']``, the
    ``heads`` (``{name: num_classes}``) and each COCO dataset's annotation file (module docstring); ``datasets`` is
    ``[(split, dataset)]``, wrappers allowed. Raises :class:`ClassMismatchError` naming every difference; returns
    the log lines of a subset allowed by ``allow_subset`` (the categories left out of each file)."""
    reference = as_classes(classes, source)
    problems, notes = [], []
    for split, wrapper in datasets:
        for dataset in leaf_datasets(wrapper):
            own = as_classes(dataset.metainfo.get('classes') or (), f'the {split} dataset\'s metainfo classes')
            if own != reference:
                problems.append(difference(f'{split} dataset ({type(dataset).__name__}) metainfo classes', own,
                                           reference))
            ann_file = getattr(dataset, 'ann_file', None)
            if not ann_file or not hasattr(dataset, 'COCOAPI'):       # not a COCO-format dataset
                continue
            categories = coco_categories(ann_file, getattr(dataset, 'backend_args', None))
            among = tuple(c for c in categories if c in reference)
            left_out = [c for c in categories if c not in reference]
            if tuple(categories) == reference:
                continue
            if allow_subset and among == reference:
                notes.append(f'{split} annotation file {ann_file}: training on {len(reference)} of its '
                             f'{len(categories)} categories (allow_subset=True); the annotations of '
                             f'{_names(left_out)} are left out')
                continue
            problems.append(difference(f'categories of the {split} annotation file {ann_file}', categories,
                                       reference))
            if allow_subset and not [c for c in reference if c not in categories]:
                problems[-1] += ('\n      (allow_subset=True takes some of the categories, but in the file\'s order: '
                                 f'{_names(among)})')
    wrong = {name: n for name, n in heads.items() if n != len(reference)}
    if wrong:
        problems.append('  heads\' num_classes: ' + ', '.join(f'{name} {n}' for name, n in wrong.items())
                        + f' (the classes are {len(reference)})')
    if problems:
        raise ClassMismatchError(
            f'the classes of this run do not agree with {source} ({len(reference)}): {_names(reference)}\n'
            + '\n'.join(problems) + '\n'
            'A config\'s variables are resolved when its file is read, so a child config that sets `classes` keeps '
            'its base\'s dataset metainfo and num_classes; mmdet keeps only the annotations of the classes\' '
            'categories and numbers the labels in the annotation file\'s order of its categories. Write a config '
            'whose every class-dependent value follows the annotation file with\n'
            f'  {tool_command(datasets)}\n'
            '(docs/finetune.md). To train on some of the file\'s categories on purpose, list them in the file\'s order '
            'in `classes`, every dataset\'s metainfo and every head\'s num_classes, and set '
            "custom_hooks = [dict(type='inline_backbones.ClassCheckHook', allow_subset=True)].")
    return notes


def reference_classes(classes, datasets):
    """``(classes, source)``: what the check compares with, the config's ``classes`` or, where it has none (None),
    the first of ``datasets``' (``[(split, dataset)]``) metainfo classes, and how the error names it."""
    if classes is not None:
        return classes, "the config's `classes`"
    split, dataset = datasets[0]
    return (dataset.metainfo.get('classes') or (),
            f'the {split} dataset\'s metainfo classes (the config has no `classes`)')


def config_heads(model_cfg, prefix=''):
    """``{name: num_classes}`` of a model config's class heads, as :func:`class_heads` names the modules they build:
    every dict with an integer ``num_classes``, by its dotted path in ``model_cfg`` (list items by index), except
    those in :data:`NOT_CLASS_HEADS`."""
    if isinstance(model_cfg, (list, tuple)):
        items = enumerate(model_cfg)
    elif isinstance(model_cfg, dict):
        items = model_cfg.items()
    else:
        return {}
    heads = {}
    num_classes = model_cfg.get('num_classes') if isinstance(model_cfg, dict) else None
    if (isinstance(num_classes, int) and not isinstance(num_classes, bool)
            and not set(prefix.split('.')) & set(NOT_CLASS_HEADS)):
        heads[prefix] = num_classes
    for key, value in items:
        heads.update(config_heads(value, f'{prefix}.{key}' if prefix else str(key)))
    return heads


def _leaf_dataset_cfgs(dataset_cfg):
    """The dataset configs inside mmengine's wrapper configs (``datasets``, ``dataset``), as :func:`leaf_datasets`."""
    if isinstance(dataset_cfg.get('datasets'), (list, tuple)):
        return [leaf for inner in dataset_cfg['datasets'] for leaf in _leaf_dataset_cfgs(inner)]
    if isinstance(dataset_cfg.get('dataset'), dict):
        return _leaf_dataset_cfgs(dataset_cfg['dataset'])
    return [dataset_cfg]


def check_config_classes(cfg, splits):
    """:class:`ClassCheckHook`'s check on the config ``cfg`` alone, where it carries the hook: the datasets of the
    ``splits`` (``'train'``, ``'val'``, ``'test'``) whose dataloaders it sets, built without reading their data
    (``lazy_init=True``), and the heads' ``num_classes`` as ``cfg.model`` gives them (:func:`config_heads`). Raises
    :class:`ClassMismatchError` where they disagree; returns the hook's log lines otherwise.

    For a run that fails before the hook can check (a training set that its classes leave empty fails as it is
    built)."""
    from mmengine.registry import DATASETS, DefaultScope

    hooks = [h for h in cfg.get('custom_hooks') or []
             if h.get('type') in ('inline_backbones.ClassCheckHook', ClassCheckHook)]
    if not hooks:
        return []
    datasets = []
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope')):
        for split in splits:
            loader = cfg.get(f'{split}_dataloader')
            if loader:
                datasets += [(split, DATASETS.build({**leaf, 'lazy_init': True}))
                             for leaf in _leaf_dataset_cfgs(loader.dataset)]
    if not datasets:
        return []
    classes, source = reference_classes(cfg.get('classes'), datasets)
    return check_classes(classes, datasets, config_heads(cfg.model), hooks[0].get('allow_subset', False), source)


@HOOKS.register_module()
class ClassCheckHook(Hook):
    """Stop training, validation or testing before it starts when the config's ``classes``, the datasets'
    classes, the heads' ``num_classes`` and the COCO annotation files' categories disagree (module docstring).

    Args:
        allow_subset (bool): Let the classes be some of an annotation file's categories (in the file's order); the
            categories left out are logged. Defaults to False: the classes are the file's categories, exactly.
    """

    priority = 'VERY_HIGH'

    def __init__(self, allow_subset=False):
        self.allow_subset = bool(allow_subset)
        self._checked = set()

    def _check(self, runner, datasets):
        datasets = [(split, d) for split, d in datasets if id(d) not in self._checked]
        if not datasets:
            return
        classes, source = reference_classes(runner.cfg.get('classes'), datasets)
        heads = class_heads(runner.model)
        for note in check_classes(classes, datasets, heads, self.allow_subset, source):
            runner.logger.info(note)
        runner.logger.info(f'ClassCheckHook: the {len(tuple(classes))} classes agree with the '
                           + ', '.join(split for split, _ in datasets) + f' datasets, their annotation files and '
                           f'{len(heads)} heads')
        self._checked.update(id(d) for _, d in datasets)

    def before_train(self, runner):
        """The training dataset, and the validation dataset where the run validates (its loop is built by now)."""
        datasets = [('train', runner.train_dataloader.dataset)]
        if runner.val_loop is not None:
            datasets.append(('val', runner.val_loop.dataloader.dataset))
        self._check(runner, datasets)

    def before_val(self, runner):
        self._check(runner, [('val', runner.val_loop.dataloader.dataset)])

    def before_test(self, runner):
        self._check(runner, [('test', runner.test_loop.dataloader.dataset)])
