"""Write a complete fine-tuning config for your COCO-format data (docs/finetune.md).

    python tools/misc/finetune_config.py DATA_ROOT [--train-json annotations/instances_train.json]
        [--val-json annotations/instances_val.json] [--train-images images/train/] [--val-images images/val/]
        [--boxes-only auto|yes|no] [--detector mask-rcnn|cascade] [--out configs/finetune_my_data.py]

The class names come from the training json's ``categories``, in the order the file lists them (mmdet numbers the
labels in that order, whatever the order of ``classes``: label i is the i-th category listed), and
every place that depends on them is written out literally: the dataset ``metainfo`` of each split, the heads'
``num_classes``, the data paths and the evaluators' ``ann_file``. (A child config that only sets ``classes`` and
``data_root`` keeps its base's values: a config's variables are resolved when the base file is read, before
the child's are known.) When no annotation of the training json has a segmentation (``--boxes-only auto``),
the mask branch is removed: Faster R-CNN with the InLine-Swin-T FPN, evaluated on boxes. The config inherits
``mmdet_configs/mask-rcnn_inline-swin-t_fpn_finetune-custom-coco.py`` (schedule, backbone, released ImageNet
weights) and carries its ``inline_backbones.ClassCheckHook`` (:mod:`inline_backbones.class_check`), which stops
training and testing before the first iteration if the config's ``classes``, the datasets' classes, the heads'
``num_classes`` and the annotation files' categories disagree.

``--detector cascade`` writes Cascade Mask R-CNN (Cascade R-CNN for boxes-only data) with the same schedule and data:
the model of ``mmdet_configs/cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py`` written out whole, with the
classes in each of its three box heads and its mask head (a child config cannot change one entry of the base's list
of heads: lists are replaced whole).
"""
import argparse
import json
import os
import os.path as osp
import pprint

CONFIGS = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'mmdet_configs')
BASE = osp.join(CONFIGS, 'mask-rcnn_inline-swin-t_fpn_finetune-custom-coco.py')
CASCADE = osp.join(CONFIGS, 'cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py')
NAMES = {('mask-rcnn', False): 'Mask R-CNN', ('mask-rcnn', True): 'Faster R-CNN',
         ('cascade', False): 'Cascade Mask R-CNN', ('cascade', True): 'Cascade R-CNN'}


def read_classes(path):
    """(class names in the file's order of its categories, whether any annotation has a segmentation) of a COCO
    json."""
    with open(path) as f:
        coco = json.load(f)
    categories = coco.get('categories', [])
    if not categories:
        raise SystemExit(f'{path}: no "categories" in the json: a COCO instances file lists its classes there')
    names = [c['name'] for c in categories]
    if len(set(names)) != len(names):
        raise SystemExit(f'{path}: category names repeat ({names}): each class needs its own name')
    has_masks = any(a.get('segmentation') for a in coco.get('annotations', []))
    return names, has_masks


def _plain(node):
    """``node`` as plain dicts and lists, without the ``_scope_`` keys mmengine adds to what an ``mmdet::`` base
    defines (the config's ``default_scope`` is mmdet's)."""
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items() if k != '_scope_'}
    if isinstance(node, (list, tuple)):
        return type(node)(_plain(v) for v in node)
    return node


def cascade_model(num_classes, boxes_only):
    """The Cascade model of :data:`CASCADE`, whole, with ``num_classes`` in its three box heads and its mask head
    (or no mask branch)."""
    from mmengine.config import Config

    model = _plain(Config.fromfile(CASCADE).model.to_dict())
    for head in model['roi_head']['bbox_head']:
        head['num_classes'] = num_classes
    if boxes_only:
        model['roi_head'].update(mask_roi_extractor=None, mask_head=None)
    else:
        model['roi_head']['mask_head']['num_classes'] = num_classes
    return model


def render(args, classes, boxes_only):
    """The config's text."""
    base = osp.relpath(BASE, osp.dirname(osp.abspath(args.out)))
    root = args.data_root.rstrip('/') + '/'
    lines = [
        f'# Fine-tuning config written by tools/misc/finetune_config.py for {root} ({len(classes)} classes'
        + (', boxes only: ' if boxes_only else ', boxes and masks: ') + NAMES[args.detector, boxes_only] + ').',
        '# Every value that depends on your data is written out here, not inherited (docs/finetune.md).',
        f'_base_ = {base!r}',
        '',
        f'data_root = {root!r}',
        f'classes = {tuple(classes)!r}',
        'metainfo = dict(classes=classes)',
        '',
    ]
    heads = f'bbox_head=dict(num_classes={len(classes)})'
    if args.detector == 'cascade':
        model = pprint.pformat({'_delete_': True, **cascade_model(len(classes), boxes_only)}, width=116,
                               sort_dicts=False)
        lines += [f'# The model of {osp.basename(CASCADE)}, written out whole,',
                  '# with your classes in its three box heads' + ('' if boxes_only else ' and its mask head')
                  + ' (lists of heads are replaced whole).',
                  'model = ' + model.replace('\n', '\n' + ' ' * len('model = '))]
    elif boxes_only:
        lines.append(f'model = dict(roi_head=dict({heads}, mask_roi_extractor=None, mask_head=None))')
    else:
        lines.append(f'model = dict(roi_head=dict({heads}, mask_head=dict(num_classes={len(classes)})))')
    with_mask = 'False' if boxes_only else 'True'
    metrics = ['bbox'] if boxes_only else ['bbox', 'segm']
    lines += [
        '',
        'image_scale = (1333, 800)',
        'train_pipeline = [',
        "    dict(type='LoadImageFromFile'),",
        f"    dict(type='LoadAnnotations', with_bbox=True, with_mask={with_mask}),",
        "    dict(type='Resize', scale=image_scale, keep_ratio=True),",
        "    dict(type='RandomFlip', prob=0.5),",
        "    dict(type='PackDetInputs'),",
        ']',
        'test_pipeline = [',
        "    dict(type='LoadImageFromFile'),",
        "    dict(type='Resize', scale=image_scale, keep_ratio=True),",
        f"    dict(type='LoadAnnotations', with_bbox=True, with_mask={with_mask}),",
        "    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),",
        ']',
        'train_dataloader = dict(',
        f'    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file={args.train_json!r},',
        f'                 data_prefix=dict(img={args.train_images!r}), pipeline=train_pipeline))',
        'val_dataloader = dict(',
        f'    dataset=dict(data_root=data_root, metainfo=metainfo, ann_file={args.val_json!r},',
        f'                 data_prefix=dict(img={args.val_images!r}), pipeline=test_pipeline))',
        'test_dataloader = val_dataloader',
        f'val_evaluator = dict(ann_file=data_root + {args.val_json!r}, metric={metrics!r})',
        'test_evaluator = val_evaluator',
        '',
        "# Stops before the first iteration if `classes`, the datasets' classes, the heads' num_classes and the",
        "# annotation files' categories disagree (inline_backbones/class_check.py).",
        "custom_hooks = [dict(type='inline_backbones.ClassCheckHook')]",
        '',
    ]
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data_root', help='the dataset folder (paths below are relative to it)')
    parser.add_argument('--train-json', default='annotations/instances_train.json')
    parser.add_argument('--val-json', default='annotations/instances_val.json')
    parser.add_argument('--train-images', default='images/train/')
    parser.add_argument('--val-images', default='images/val/')
    parser.add_argument('--boxes-only', choices=['auto', 'yes', 'no'], default='auto',
                        help='auto: boxes only when the training json has no segmentation')
    parser.add_argument('--detector', choices=['mask-rcnn', 'cascade'], default='mask-rcnn',
                        help='Mask R-CNN (Faster R-CNN for boxes only) or Cascade Mask R-CNN (Cascade R-CNN)')
    parser.add_argument('--out', default='configs/finetune_my_data.py')
    args = parser.parse_args(argv)
    train_json = osp.join(args.data_root, args.train_json)
    if not osp.isfile(train_json):
        parser.error(f'no training annotations at {train_json} (set --train-json relative to DATA_ROOT)')
    classes, has_masks = read_classes(train_json)
    boxes_only = args.boxes_only == 'yes' or (args.boxes_only == 'auto' and not has_masks)
    if args.boxes_only == 'no' and not has_masks:
        parser.error(f'{train_json} has no segmentation: a {NAMES[args.detector, False]} cannot learn masks from it '
                     '(--boxes-only auto)')
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w') as f:
        f.write(render(args, classes, boxes_only))
    print(f'wrote {args.out}: {len(classes)} classes {tuple(classes)}, '
          + ('boxes only' if boxes_only else 'boxes and masks') + f' ({NAMES[args.detector, boxes_only]})')


if __name__ == '__main__':
    main()
