"""Semantic-segmentation fine-tuning configs: a folder of images and label maps in mmseg's layout, checked and read,
and the config that trains one of the repository's mmseg recipes on it (``tools/misc/finetune_config.py --task seg``,
docs/finetune.md).

The folder, as mmseg's ``BaseSegDataset`` reads it (``img_suffix``, ``seg_map_suffix``; every file of an image
folder that ends in ``img_suffix`` is an image, searched recursively, hidden files skipped)::

    DATA_ROOT/img_dir/{train,val}/NAME<img_suffix>       images
    DATA_ROOT/ann_dir/{train,val}/NAME<seg_map_suffix>   label maps: one channel, each pixel's value its class

Label maps are read as mmseg reads them (``mmcv.imfrombytes(..., flag='unchanged', backend='pillow')``: a palette
PNG gives its indices). Value 255 is the ignore index (mmseg's ``ignore_index``: no loss, not scored; mmseg also
pads label maps with it). ``reduce_zero_label`` says what value 0 is: without it value ``v`` is class ``v`` (0 is a
class, e.g. "background"); with it value 0 marks unlabelled pixels, which are ignored like 255, and value ``v`` is
class ``v - 1`` (ADE20K's maps: 0 is "other", 1..150 the classes).
"""
import colorsys
import os
import os.path as osp
from dataclasses import dataclass

import numpy as np

from ..data.tool_inputs import ToolInputError
from .config_code import as_code, plain

IGNORE_INDEX = 255
SHOWN = 3                      # file names listed in an error
# The warm-up a base without one gets when --warmup-iters asks for it: mmseg's Swin recipe's.
WARMUP = dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0)


@dataclass
class SegFolder:
    """What a dataset folder holds: its splits (``{'train' | 'val': (image folder, label-map folder, number of
    pairs)}``, folders relative to ``root``), the suffixes, the pixels of each map value (256 counts), the classes
    and where their names come from."""

    root: str
    splits: dict
    img_suffix: str
    seg_map_suffix: str
    pixels: np.ndarray
    classes: tuple
    classes_source: str
    reduce_zero_label: bool


def _shown(names):
    """The first few of ``names`` (with ``...`` for the rest)."""
    return ', '.join(names[:SHOWN]) + (', ...' if len(names) > SHOWN else '')


def value_ranges(values):
    """``[0, 1, 2, 3, 7, 255]`` as ``'0-3, 7, 255'``."""
    parts, values = [], sorted(values)
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            first, last = values[start], values[i - 1]
            parts.append(str(first) if first == last else f'{first}-{last}')
            start = i
    return ', '.join(parts) or '(none)'


def _folder_exists(root, sub, what, flag):
    """ToolInputError unless ``root/sub`` is a folder; the message names the flag that sets it and the folders
    ``root`` has."""
    path = osp.join(root, sub)
    if osp.isdir(path):
        return
    has = sorted(n for n in os.listdir(root) if not n.startswith('.') and osp.isdir(osp.join(root, n)))
    raise ToolInputError(f'no {what} folder {path!r} (set it with {flag}; {root!r} has the folders: '
                         f'{", ".join(has) or "(none)"})')


def list_files(folder, suffix=''):
    """The files under ``folder`` whose names end in ``suffix``, as paths relative to it, sorted, found
    recursively; hidden files skipped (as mmengine lists a dataset's folder)."""
    found = []
    for top, _, files in os.walk(folder):
        found += [osp.relpath(osp.join(top, f), folder) for f in files if not f.startswith('.') and f.endswith(suffix)]
    return sorted(found)


def image_suffix(folder):
    """The one extension of the files in the image folder ``folder``; ToolInputError if there are several."""
    counts = {}
    for name in list_files(folder):
        ext = osp.splitext(name)[1]
        counts[ext] = counts.get(ext, 0) + 1
    if len(counts) != 1:
        listed = ', '.join(f'{e or "(no extension)"} ({n})' for e, n in sorted(counts.items())) or 'no file'
        raise ToolInputError(f'{folder!r} has {listed}: say which files are the images with --img-suffix')
    return next(iter(counts))


def pair_maps(root, img_path, seg_map_path, img_suffix, seg_map_suffix):
    """The label map of every image of ``root/img_path`` in ``root/seg_map_path`` (mmseg's rule: the image's path
    with ``img_suffix`` replaced by ``seg_map_suffix``), as full paths. ToolInputError for a folder without images,
    and for images without a map or maps without an image (a few of each named)."""
    images = list_files(osp.join(root, img_path), img_suffix)
    if not images:
        raise ToolInputError(f'no image ending in {img_suffix!r} in {osp.join(root, img_path)!r} (--img-suffix)')
    maps = [name.replace(img_suffix, seg_map_suffix) for name in images]
    found = set(list_files(osp.join(root, seg_map_path), seg_map_suffix))
    lone_images = [i for i, m in zip(images, maps, strict=True) if m not in found]
    lone_maps = sorted(found - set(maps))
    if lone_images or lone_maps:
        problems = []
        if lone_images:
            problems.append(f'{len(lone_images)} of the {len(images)} images in {osp.join(root, img_path)!r} have no '
                            f'label map NAME{seg_map_suffix} in {osp.join(root, seg_map_path)!r}: '
                            + _shown(lone_images))
        if lone_maps:
            problems.append(f'{len(lone_maps)} label maps have no image NAME{img_suffix}: {_shown(lone_maps)}')
        raise ToolInputError('; '.join(problems) + ' (an image NAME<img_suffix> goes with the label map '
                             'NAME<seg_map_suffix>: --img-suffix, --seg-map-suffix)')
    return [osp.join(root, seg_map_path, m) for m in maps]


def read_label_map(path):
    """The label map at ``path`` as mmseg's ``LoadAnnotations`` reads it, before it keeps the low 8 bits:
    ToolInputError for a file that is no image, a colour image or values above 255."""
    import mmcv

    with open(path, 'rb') as f:
        label_map = mmcv.imfrombytes(f.read(), flag='unchanged', backend='pillow')
    if label_map is None:
        raise ToolInputError(f'{path!r} is not an image: a label map is a one-channel PNG of class values')
    label_map = label_map.squeeze()
    if label_map.ndim != 2:
        raise ToolInputError(f'{path!r} has {label_map.shape[-1]} channels: a label map has one, each pixel\'s value '
                             'its class (turn colours into class values, or save a palette PNG)')
    if label_map.max() > 255:
        raise ToolInputError(f'{path!r} has values up to {label_map.max()}: mmseg keeps only the low 8 bits of a '
                             'label map (classes 0-254, 255 ignored)')
    return label_map.astype(np.uint8)


def scan_values(paths):
    """``(pixels, found_in)``: the number of pixels of each value 0-255 in the label maps ``paths``, and the first
    few files in which each value appears (``{value: [path, ...]}``)."""
    pixels, found_in = np.zeros(256, np.int64), {}
    for path in paths:
        counts = np.bincount(read_label_map(path).ravel(), minlength=256)
        pixels += counts
        for value in np.flatnonzero(counts).tolist():
            files = found_in.setdefault(value, [])
            if len(files) < SHOWN + 1:
                files.append(path)
    return pixels, found_in


def read_names(path, what):
    """The non-empty lines of the text file ``path`` (blank lines at the end allowed, not between)."""
    if not osp.isfile(path):
        raise ToolInputError(f'{what} file not found: {path!r}')
    with open(path) as f:
        lines = [line.strip() for line in f.read().rstrip().splitlines()]
    if '' in lines:
        raise ToolInputError(f'{path!r}: line {lines.index("") + 1} is empty: one {what} a line, none left out')
    return lines


def read_classes(path):
    """The class names of ``path`` (one a line, in class order), distinct."""
    names = read_names(path, 'class')
    repeated = sorted({n for n in names if names.count(n) > 1})
    if not names or repeated:
        raise ToolInputError(f'{path!r}: ' + (f'names repeat ({", ".join(repeated)}): each class needs its own name'
                                               if names else 'no class name'))
    return tuple(names)


def read_palette(path, count):
    """The colours of ``path``, one ``R G B`` (0-255, spaces or commas) a line, one per class (``count``)."""
    palette = []
    for number, line in enumerate(read_names(path, 'colour'), 1):
        words = line.replace(',', ' ').split()
        if len(words) != 3 or not all(w.isdigit() and int(w) <= 255 for w in words):
            raise ToolInputError(f'{path!r} line {number}: {line!r} is not a colour R G B (three numbers 0-255)')
        palette.append(tuple(int(w) for w in words))
    if len(palette) != count:
        raise ToolInputError(f'{path!r} has {len(palette)} colours for {count} classes: one a class, in class order')
    return palette


def generate_palette(count):
    """``count`` distinct colours, the same for every run: hues a golden-ratio step apart, saturated and bright."""
    return [tuple(round(255 * c) for c in colorsys.hsv_to_rgb((i * 0.618034) % 1.0, 0.75, 0.9))
            for i in range(count)]


def choose_classes(pixels, found_in, names=None, source=None, reduce_zero_label=False, allow_absent=False):
    """The classes: ``names`` (from the classes file ``source``), checked against the map values, or, without
    them, one class per value up to the largest (named ``value_<v>``). ToolInputError for a value that is neither a
    class nor ignored, and for classes file names beyond the largest value present (unless ``allow_absent``)."""
    shift = int(reduce_zero_label)
    values = [v for v in np.flatnonzero(pixels).tolist() if v != IGNORE_INDEX and not (reduce_zero_label and v == 0)]
    if not values:
        raise ToolInputError('the label maps have no class value: every pixel is '
                             + ('0 or 255 (both ignored with --reduce-zero-label)' if reduce_zero_label else '255'))
    if names is None:
        return tuple(f'value_{v}' for v in range(shift, values[-1] + 1))
    count = len(names)
    rule = f'values {shift}-{count - 1 + shift}' + (' (0 ignored: --reduce-zero-label)' if shift else '')
    above = [v for v in values if v - shift >= count]
    if above:
        files = sorted({f for v in above for f in found_in[v]})
        hint = (' If value 0 marks unlabelled pixels rather than a class, add --reduce-zero-label: value v is then '
                'class v-1 and 0 is ignored.' if not shift and above == [count] and 0 in values else '')
        raise ToolInputError(f'label values {value_ranges(above)} are not classes of {source} ({count} names: '
                             f'{rule}) nor the ignore index {IGNORE_INDEX}: found in {_shown(files)}.{hint}')
    absent = names[values[-1] - shift + 1:]
    if absent and not allow_absent:
        hint = (' If value 0 is a class (not unlabelled pixels), leave out --reduce-zero-label.'
                if shift and len(absent) == 1 and pixels[0] else '')
        raise ToolInputError(f'{source} has {count} classes ({rule}) but the largest class value in the label maps is '
                             f'{values[-1]}: {", ".join(absent)} would have no pixel. Fix the file, or add '
                             f'--allow-absent-classes if these images have none of them.{hint}')
    return tuple(names)


def read_folder(root, img_dir='img_dir', ann_dir='ann_dir', train_split='train', val_split='val', img_suffix=None,
                seg_map_suffix='.png', classes_file=None, reduce_zero_label=False, allow_absent=False):
    """Check the folder ``root`` (module docstring; the splits' folders are ``img_dir/<split>`` and
    ``ann_dir/<split>``) and read its label maps: a :class:`SegFolder`. ``img_suffix`` None takes the one extension
    of the training images. Every problem is a ToolInputError."""
    if not osp.isdir(root):
        raise ToolInputError(f'data folder not found: {root!r}')
    prefixes = {role: (osp.join(img_dir, split), osp.join(ann_dir, split))
                for role, split in (('train', train_split), ('val', val_split))}
    for role, (img_path, seg_map_path) in prefixes.items():
        _folder_exists(root, img_path, f'{role} image', f'--img-dir / --{role}-split')
        _folder_exists(root, seg_map_path, f'{role} label-map', f'--ann-dir / --{role}-split')
    if img_suffix is None:
        img_suffix = image_suffix(osp.join(root, prefixes['train'][0]))
    maps = {role: pair_maps(root, *prefix, img_suffix, seg_map_suffix) for role, prefix in prefixes.items()}
    pixels, found_in = scan_values([path for paths in maps.values() for path in paths])
    names = read_classes(classes_file) if classes_file else None
    classes = choose_classes(pixels, found_in, names, classes_file, reduce_zero_label, allow_absent)
    return SegFolder(root=root, splits={role: (*prefix, len(maps[role])) for role, prefix in prefixes.items()},
                     img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, pixels=pixels,
                     classes=classes, classes_source=classes_file or "the label maps' values",
                     reduce_zero_label=reduce_zero_label)


def describe(folder):
    """Lines saying what the folder holds: the maps, their values, what each class is and its share of the pixels."""
    counts = ', '.join(f'{n} {split}' for split, (_, _, n) in folder.splits.items())
    values = np.flatnonzero(folder.pixels).tolist()
    shift = int(folder.reduce_zero_label)
    labelled = sum(int(folder.pixels[v]) for v in values if v != IGNORE_INDEX and not (shift and v == 0))
    ignored = [f'{v} ({100 * folder.pixels[v] / folder.pixels.sum():.1f}% of the pixels)'
               for v in (0, IGNORE_INDEX) if folder.pixels[v] and (v == IGNORE_INDEX or shift)]
    lines = [f'label maps: {counts} ({folder.seg_map_suffix}, images {folder.img_suffix}); values found: '
             f'{value_ranges(values)}',
             f'ignored pixels: {", ".join(ignored) or "none"}; '
             + ('reduce_zero_label=True: value 0 is unlabelled, value v is class v-1' if shift else
                'reduce_zero_label=False: value v is class v (0 included)'),
             f'{len(folder.classes)} classes (names from {folder.classes_source}):']
    for index, name in enumerate(folder.classes):
        share = 100 * folder.pixels[index + shift] / labelled
        lines.append(f'  {index:3d} {name} (value {index + shift}): {share:.1f}% of the labelled pixels'
                     + ('' if folder.pixels[index + shift] else ', none'))
    return lines


class _Variable(str):
    """A name written into the config as itself (a variable of the config), not as a string."""

    def __repr__(self):
        return str(self)


def adapt_pipeline(pipeline):
    """The base's pipeline with the config's variables ``img_scale`` in its resizes and ``crop_size`` in
    ``RandomCrop``, and ``LoadAnnotations`` without a ``reduce_zero_label`` of its own: it takes the dataset's
    (mmseg deprecates setting it in the transform); the other steps as they are."""
    changes = {'RandomResize': dict(scale=_Variable('img_scale')), 'Resize': dict(scale=_Variable('img_scale')),
               'RandomCrop': dict(crop_size=_Variable('crop_size'))}
    return [{k: v for k, v in dict(step, **changes.get(step['type'], {})).items()
             if not (step['type'] == 'LoadAnnotations' and k == 'reduce_zero_label')} for step in pipeline]


def schedule(base_schedulers, warmup_iters, iters):
    """The base's warm-up (``LinearLR``, or mmseg's Swin one) ending at ``warmup_iters`` (none at 0) and its poly
    decay (``PolyLR``) from there to ``iters``."""
    poly = dict(next(s for s in base_schedulers if s['type'] == 'PolyLR'), begin=warmup_iters, end=iters)
    if not warmup_iters:
        return [poly]
    warmup = next((s for s in base_schedulers if s['type'] == 'LinearLR'), WARMUP)
    return [dict(warmup, begin=0, end=warmup_iters), poly]


def base_recipe(base):
    """The resolved config ``base`` (a path) as plain dicts."""
    from mmengine.config import Config

    return plain(Config.fromfile(base).to_dict())


def recipe_defaults(recipe, crop_size, iters):
    """``(img_scale, warmup_iters)`` for a crop of ``crop_size`` and ``iters`` iterations: the resize scale of the
    recipe's test pipeline times the crop's height over the recipe's (ADE20K's 2048x512 for 512 crops), and its
    warm-up length, at most a tenth of the iterations (0 where it has none)."""
    base_crop = recipe['model']['data_preprocessor']['size']
    resize = next(s for s in recipe['test_dataloader']['dataset']['pipeline'] if s['type'] == 'Resize')
    img_scale = tuple(round(side * crop_size[0] / base_crop[0]) for side in resize['scale'])
    warmup = next((s['end'] for s in recipe['param_scheduler'] if s['type'] == 'LinearLR'), 0)
    return img_scale, min(warmup, iters // 10)


def render(folder, base, recipe, out, palette, crop_size, img_scale, iters, warmup_iters, val_interval):
    """The config's text: a child of the mmseg config ``base`` (a path; ``recipe``: it resolved) with every value
    that depends on the data written out (classes, palette, ``num_classes`` in each head, ``ignore_index``,
    ``reduce_zero_label``, the dataset of each split, the pipelines' crop and scale) and the schedule of ``iters``
    iterations."""
    heads = [name for name in ('decode_head', 'auxiliary_head') if recipe['model'].get(name)]
    root = folder.root.rstrip('/') + '/'
    reduce = folder.reduce_zero_label
    zero = 'value 0 is unlabelled (ignored), value v is class v-1' if reduce else 'value v is class v, 0 included'
    lines = [
        f'# Segmentation fine-tuning config written by tools/misc/finetune_config.py for {root}',
        f'# ({len(folder.classes)} classes, names from {folder.classes_source}).',
        f'# reduce_zero_label={reduce}: {zero}; value {IGNORE_INDEX} is ignored.',
        '# Every value that depends on your data is written out here, not inherited (docs/finetune.md).',
        f'_base_ = {osp.relpath(base, osp.dirname(osp.abspath(out)))!r}',
        '',
        f'data_root = {root!r}',
        f'classes = {folder.classes!r}',
        f'palette = {palette!r}',
        'metainfo = dict(classes=classes, palette=palette)',
        'num_classes = len(classes)',
        f'ignore_index = {IGNORE_INDEX}',
        f'reduce_zero_label = {reduce}',
        f'crop_size = {tuple(crop_size)!r}',
        f'img_scale = {tuple(img_scale)!r}     # (longer side, shorter side) at most, aspect ratio kept',
        '',
        '# num_classes in every head (' + ', '.join(heads) + ')',
        'model = dict(',
        '    data_preprocessor=dict(size=crop_size, seg_pad_val=ignore_index),',
        ',\n'.join(f'    {head}=dict(num_classes=num_classes, ignore_index=ignore_index)' for head in heads) + ')',
        '',
        "# The base's pipelines with your crop and scale (LoadAnnotations takes reduce_zero_label from the dataset)",
    ]
    for name, pipeline in (('train_pipeline', recipe['train_dataloader']['dataset']['pipeline']),
                           ('test_pipeline', recipe['test_dataloader']['dataset']['pipeline'])):
        lines += [f'{name} = ['] + [f'    {as_code(step, 4)},' for step in adapt_pipeline(pipeline)] + [']']
    lines += [
        "dataset = dict(type='BaseSegDataset', data_root=data_root, metainfo=metainfo, "
        f'img_suffix={folder.img_suffix!r},',
        f'               seg_map_suffix={folder.seg_map_suffix!r}, reduce_zero_label=reduce_zero_label, '
        'ignore_index=ignore_index)',
    ]
    for split, loader, pipeline in (('train', 'train_dataloader', 'train_pipeline'),
                                    ('val', 'val_dataloader', 'test_pipeline')):
        img_path, seg_map_path, _ = folder.splits[split]
        lines += [f'{loader} = dict(dataset=dict(',
                  f'    _delete_=True, **dataset, pipeline={pipeline},',
                  f'    data_prefix=dict(img_path={img_path!r}, seg_map_path={seg_map_path!r})))']
    lines += [
        'test_dataloader = val_dataloader',
        'val_evaluator = dict(ignore_index=ignore_index)',
        'test_evaluator = val_evaluator',
        '',
        f'# {iters} iterations, a validation and a checkpoint every {val_interval}: the base\'s schedule fitted to '
        f'them ({warmup_iters}',
        '# warm-up iterations, then its poly decay)',
        f'max_iters = {iters}',
        f'train_cfg = dict(max_iters=max_iters, val_interval={val_interval})',
        'param_scheduler = [',
        *[f'    {as_code(s, 4)},' for s in schedule(recipe['param_scheduler'], warmup_iters, iters)],
        ']',
        f'default_hooks = dict(checkpoint=dict(interval={val_interval}))',
        '',
    ]
    return '\n'.join(lines)
