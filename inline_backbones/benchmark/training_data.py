"""The training benchmark's data: the shapes generator (:func:`~inline_backbones.data.shapes.write_images`) writing a
train dataset config's own layout, with its classes and at its images' sizes, so that the config's pipeline runs as it
is (nothing is downloaded).

* mmdet: a COCO-format json (the dataset's ``ann_file``) of images of COCO's sizes (640x480, 480x640, 640x427),
  the categories the dataset's classes;
* mmseg: images and PNG label maps (0 background, then the classes; with ``reduce_zero_label``, as ADE20K, 0 is the
  "other" label that the dataset ignores and 1..C are its C classes) of ADE20K's sizes (683x512, 512x683), or all of
  one size where the config's pipeline neither resizes nor crops (:func:`fixed_size_of`).
"""
import importlib
import inspect
import os.path as osp

import numpy as np

from ..data.shapes import write_images

COCO_SIZES = ((480, 640), (640, 480), (427, 640))     # (height, width): COCO train2017's common sizes
ADE_SIZES = ((512, 683), (683, 512))                  # ADE20K training images' common sizes


def dataset_classes(dataset_cfg, task):
    """The dataset's class names: its ``metainfo`` in the config, else its class's ``METAINFO``."""
    classes = (dataset_cfg.get('metainfo') or {}).get('classes')
    if classes:
        return tuple(classes)
    registry = importlib.import_module(f'{task}.registry').DATASETS
    importlib.import_module(f'{task}.datasets')
    cls = registry.get(dataset_cfg['type'])
    if cls is None:
        raise SystemExit(f'unknown dataset type {dataset_cfg["type"]!r} in the {task} registry')
    classes = cls.METAINFO.get('classes')
    if not classes:
        raise SystemExit(f'{dataset_cfg["type"]} has no classes in its METAINFO: give the config a metainfo')
    return tuple(classes)


def _dataset_default(dataset_cfg, task, name, fallback):
    """The dataset config's ``name``, else the default of its class's argument, else ``fallback``."""
    if name in dataset_cfg:
        return dataset_cfg[name]
    cls = importlib.import_module(f'{task}.registry').DATASETS.get(dataset_cfg['type'])
    param = inspect.signature(cls.__init__).parameters.get(name) if cls is not None else None
    return fallback if param is None or param.default is inspect.Parameter.empty else param.default


def _scaled(sizes, factor):
    """``sizes`` (height, width) divided by ``factor`` (``--scale-down``), 32 pixels at least."""
    return [tuple(max(32, int(round(s / factor))) for s in size) for size in sizes]


def generate_coco(root, dataset_cfg, task, num_images, factor, seed):
    """COCO instances with polygon masks in the dataset config's layout under ``root``; returns a summary."""
    classes = dataset_classes(dataset_cfg, task)
    written = write_images(np.random.default_rng(seed), [f'{i:012d}' for i in range(num_images)],
                           osp.join(root, (dataset_cfg.get('data_prefix') or {}).get('img', '')),
                           ann_file=osp.join(root, dataset_cfg['ann_file']), sizes=_scaled(COCO_SIZES, factor),
                           classes=classes)
    return dict(format='coco', images=num_images, objects=written['instances'], classes=len(classes),
                sizes=[list(hw) for hw in written['sizes']])


def generate_seg(root, dataset_cfg, task, num_images, factor, seed, fixed_size=None):
    """Images and PNG label maps in the dataset config's layout under ``root``, of ADE20K's sizes or all of
    ``fixed_size`` (h, w); returns a summary."""
    classes = dataset_classes(dataset_cfg, task)
    reduce_zero = _dataset_default(dataset_cfg, task, 'reduce_zero_label', False)
    prefix = dataset_cfg.get('data_prefix') or {}
    # the maps' 0 is the ignored "other" label where the dataset reduces zero labels, else the first class
    written = write_images(np.random.default_rng(seed), [f'train_{i:08d}' for i in range(num_images)],
                           osp.join(root, prefix.get('img_path', '')),
                           image_suffix=_dataset_default(dataset_cfg, task, 'img_suffix', '.jpg'),
                           label_dir=osp.join(root, prefix.get('seg_map_path', '')),
                           label_suffix=_dataset_default(dataset_cfg, task, 'seg_map_suffix', '.png'),
                           sizes=_scaled([fixed_size] if fixed_size else ADE_SIZES, factor),
                           classes=classes if reduce_zero else classes[1:])
    return dict(format='ade20k' if reduce_zero else 'label maps', images=num_images, classes=len(classes),
                reduce_zero_label=bool(reduce_zero), sizes=[list(hw) for hw in written['sizes']])


def fixed_size_of(dataset_cfg, preprocessor_cfg):
    """The preprocessor's fixed ``size`` where the train pipeline neither resizes nor crops (a config for
    images of one size, such as the shapes configs), else None (ADE20K's sizes)."""
    steps = {t.get('type', '').split('.')[-1] for t in dataset_cfg.get('pipeline') or []}
    if steps & {'Resize', 'RandomResize', 'RandomChoiceResize', 'RandomCrop', 'RandomResizedCrop'}:
        return None
    size = preprocessor_cfg.get('size')
    return tuple(size) if size else None
