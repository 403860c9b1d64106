"""Write a complete fine-tuning config for your COCO-format detection data or your folder of images and label maps
(docs/finetune.md).

    python tools/misc/finetune_config.py DATA_ROOT [--train-json annotations/instances_train.json]
        [--val-json annotations/instances_val.json] [--train-images images/train/] [--val-images images/val/]
        [--boxes-only auto|yes|no] [--detector mask-rcnn|cascade] [--out configs/finetune_my_data.py]
    python tools/misc/finetune_config.py DATA_ROOT --task seg [--img-dir img_dir] [--ann-dir ann_dir]
        [--train-split train] [--val-split val] [--img-suffix .jpg] [--seg-map-suffix .png] [--classes FILE]
        [--palette FILE] [--reduce-zero-label] [--allow-absent-classes] [--base MMSEG_CONFIG] [--crop-size H [W]]
        [--img-scale LONG SHORT] [--iters 20000] [--warmup-iters N] [--val-interval N]
        [--out configs/finetune_my_seg_data.py]

Detection (``--task det``; the default unless DATA_ROOT has mmseg's ``img_dir/`` and ``ann_dir/`` and no training
json):

The class names come from the training json's ``categories``, in the order the file lists them (mmdet numbers the
labels in that order, whatever the order of ``classes``: label i is the i-th category listed), and
every place that depends on them is written out literally: the dataset ``metainfo`` of each split, the heads'
``num_classes``, the data paths and the evaluators' ``ann_file``. (A child config that only sets ``classes`` and
``data_root`` keeps its base's values: a config's variables are resolved when the base file is read, before
the child's are known.) When no annotation of the training json has a segmentation (``--boxes-only auto``),
the mask branch is removed: Faster R-CNN with the InLine-Swin-T FPN, evaluated on boxes. The config inherits
``mmdet_configs/mask-rcnn_inline-swin-t_fpn_finetune-custom-coco.py`` (schedule, backbone, released ImageNet
weights) and carries its ``inline_backbones.ClassCheckHook`` (:mod:`inline_backbones.openmmlab.class_check`), which
stops training and testing before the first iteration if the config's ``classes``, the datasets' classes, the heads'
``num_classes`` and the annotation files' categories disagree.

``--detector cascade`` writes Cascade Mask R-CNN (Cascade R-CNN for boxes-only data) with the same schedule and data:
the model of ``mmdet_configs/cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py`` written out whole, with the
classes in each of its three box heads and its mask head (a child config cannot change one entry of the base's list
of heads: lists are replaced whole).

Semantic segmentation (``--task seg``; :mod:`inline_backbones.openmmlab.finetune_seg`): DATA_ROOT in mmseg's layout,
``img_dir/{train,val}`` and ``ann_dir/{train,val}``, an image ``NAME<img_suffix>`` with its label map
``NAME<seg_map_suffix>`` (one channel, each pixel's value its class; 255 ignored). The tool reads every label map and
says which values it found. The classes are the lines of ``--classes`` (in class order) or, without it, one per value
up to the largest. ``--reduce-zero-label`` when value 0 marks unlabelled pixels (ADE20K's maps): 0 is then ignored and
value v is class v-1; without it 0 is a class (e.g. "background"). The config is a child of one of the repository's
ADE20K recipes (``--base``, UperNet InLine-Swin-T by default) with every value that depends on the data written out:
classes, palette, ``num_classes`` in the decode and auxiliary heads, ``ignore_index``, ``reduce_zero_label``, each
split's dataset, the crop and scale of the pipelines, and the recipe's schedule fitted to ``--iters``.
"""
import argparse
import glob
import json
import os
import os.path as osp
import pprint

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIGS = osp.join(REPO, 'mmdet_configs')
BASE = osp.join(CONFIGS, 'mask-rcnn_inline-swin-t_fpn_finetune-custom-coco.py')
SEG_CONFIGS = osp.join(REPO, 'mmseg_configs')
SEG_BASES = sorted(osp.basename(p) for p in glob.glob(osp.join(SEG_CONFIGS, '*ade20k*.py')))
SEG_BASE = 'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
OUT = {'det': 'configs/finetune_my_data.py', 'seg': 'configs/finetune_my_seg_data.py'}
DET_OPTIONS = ('train_json', 'val_json', 'train_images', 'val_images', 'boxes_only', 'detector')
SEG_OPTIONS = ('img_dir', 'ann_dir', 'train_split', 'val_split', 'img_suffix', 'seg_map_suffix', 'classes', 'palette',
               'reduce_zero_label', 'allow_absent_classes', 'base', 'crop_size', 'img_scale', 'iters', 'warmup_iters',
               'val_interval')
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
        "# annotation files' categories disagree (inline_backbones/openmmlab/class_check.py).",
        "custom_hooks = [dict(type='inline_backbones.ClassCheckHook')]",
        '',
    ]
    return '\n'.join(lines)


def seg_base(name):
    """The path of the segmentation recipe ``name`` (a file of mmseg_configs/, with or without its folder)."""
    from inline_backbones.data.tool_inputs import ToolInputError

    base = osp.basename(name)
    if base not in SEG_BASES:
        raise ToolInputError(f'--base {name}: not one of the ADE20K recipes of mmseg_configs/: ' + ', '.join(SEG_BASES))
    return osp.join(SEG_CONFIGS, base)


def write_seg(args):
    """The segmentation route: read and check the folder, say what it holds, write the config. A user's mistake is
    a ToolInputError."""
    from inline_backbones.data.tool_inputs import ToolInputError
    from inline_backbones.openmmlab import finetune_seg

    folder = finetune_seg.read_folder(
        args.data_root, args.img_dir, args.ann_dir, args.train_split, args.val_split, args.img_suffix,
        args.seg_map_suffix, args.classes, args.reduce_zero_label, args.allow_absent_classes)
    base = seg_base(args.base)
    recipe = finetune_seg.base_recipe(base)
    crop = tuple(args.crop_size or recipe['model']['data_preprocessor']['size'])
    crop = crop * 2 if len(crop) == 1 else crop
    img_scale, warmup = finetune_seg.recipe_defaults(recipe, crop, args.iters)
    img_scale = tuple(args.img_scale or img_scale)
    warmup = warmup if args.warmup_iters is None else args.warmup_iters
    val_interval = args.val_interval or max(args.iters // 10, 1)
    if not 0 <= warmup < args.iters:
        raise ToolInputError(f'--warmup-iters {warmup}: the warm-up must end before training does '
                             f'(--iters {args.iters})')
    palette = (finetune_seg.read_palette(args.palette, len(folder.classes)) if args.palette
               else finetune_seg.generate_palette(len(folder.classes)))
    text = finetune_seg.render(folder, base, recipe, args.out, palette, crop, img_scale, args.iters, warmup,
                               val_interval)
    for line in finetune_seg.describe(folder):
        print(line)
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w') as f:
        f.write(text)
    print(f'wrote {args.out}: {len(folder.classes)} classes, {osp.basename(base)}, crops {crop[0]}x{crop[1]}, '
          f'{args.iters} iterations')


def choose_task(args, parser):
    """``'det'`` or ``'seg'``: ``--task``, or for ``auto`` seg when DATA_ROOT has the image and label-map folders and
    no training json. Options of the other task are refused."""
    task = args.task
    if task == 'auto':
        layout = all(osp.isdir(osp.join(args.data_root, d)) for d in (args.img_dir, args.ann_dir))
        task = 'seg' if layout and not osp.isfile(osp.join(args.data_root, args.train_json)) else 'det'
    other = [f'--{dest.replace("_", "-")}' for dest in (SEG_OPTIONS if task == 'det' else DET_OPTIONS)
             if getattr(args, dest) != parser.get_default(dest)]
    if other:
        parser.error(f'{", ".join(other)}: for --task {"seg" if task == "det" else "det"}, and this is --task {task}')
    return task


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data_root', help='the dataset folder (paths below are relative to it)')
    parser.add_argument('--task', choices=['auto', 'det', 'seg'], default='auto',
                        help='det: COCO json, a detector; seg: images and label maps, a segmentor; auto: seg when '
                        'DATA_ROOT has the --img-dir and --ann-dir folders and no --train-json, else det')
    parser.add_argument('--out', help=f'default: {OUT["det"]} (det), {OUT["seg"]} (seg)')
    det = parser.add_argument_group('detection (--task det)')
    det.add_argument('--train-json', default='annotations/instances_train.json')
    det.add_argument('--val-json', default='annotations/instances_val.json')
    det.add_argument('--train-images', default='images/train/')
    det.add_argument('--val-images', default='images/val/')
    det.add_argument('--boxes-only', choices=['auto', 'yes', 'no'], default='auto',
                     help='auto: boxes only when the training json has no segmentation')
    det.add_argument('--detector', choices=['mask-rcnn', 'cascade'], default='mask-rcnn',
                     help='Mask R-CNN (Faster R-CNN for boxes only) or Cascade Mask R-CNN (Cascade R-CNN)')
    seg = parser.add_argument_group('semantic segmentation (--task seg)')
    seg.add_argument('--img-dir', default='img_dir', help='the images: IMG_DIR/TRAIN_SPLIT, IMG_DIR/VAL_SPLIT')
    seg.add_argument('--ann-dir', default='ann_dir', help='the label maps: ANN_DIR/TRAIN_SPLIT, ANN_DIR/VAL_SPLIT')
    seg.add_argument('--train-split', default='train')
    seg.add_argument('--val-split', default='val')
    seg.add_argument('--img-suffix', help="the images' file ending (default: their one extension, e.g. .jpg)")
    seg.add_argument('--seg-map-suffix', default='.png', help="the label maps' file ending")
    seg.add_argument('--classes', metavar='FILE', help='class names, one a line, in class order (default: value_0, '
                     "value_1, ... up to the maps' largest value)")
    seg.add_argument('--palette', metavar='FILE', help='one colour a class, R G B a line (default: generated, the '
                     'same every run)')
    seg.add_argument('--reduce-zero-label', action='store_true',
                     help='value 0 marks unlabelled pixels (ADE20K-style maps): ignore it, value v is class v-1 '
                     '(without: 0 is a class, e.g. background)')
    seg.add_argument('--allow-absent-classes', action='store_true',
                     help='accept classes file names beyond the largest value in the maps (classes with no pixel)')
    seg.add_argument('--base', default=SEG_BASE, help=f'the recipe, an ADE20K config of mmseg_configs/ '
                     f'(default {SEG_BASE})')
    seg.add_argument('--crop-size', type=int, nargs='+', metavar='SIZE',
                     help="training crops: H W, or H for square ones (default: the recipe's, 512)")
    seg.add_argument('--img-scale', type=int, nargs=2, metavar=('LONG', 'SHORT'),
                     help="images are resized to fit LONG x SHORT (aspect ratio kept; training: 0.5-2x it, then "
                     "cropped); default: the recipe's 2048 x 512 times the crop's height / 512")
    seg.add_argument('--iters', type=int, default=20000, help='training iterations')
    seg.add_argument('--warmup-iters', type=int, help="linear warm-up (default: the recipe's, 1500 for UperNet, "
                     'none for Semantic FPN, at most a tenth of --iters)')
    seg.add_argument('--val-interval', type=int, help='validation and checkpoint every N iterations (default: a '
                     'tenth of --iters)')
    args = parser.parse_args(argv)
    task = choose_task(args, parser)
    args.out = args.out or OUT[task]
    if args.crop_size is not None and not 1 <= len(args.crop_size) <= 2:
        parser.error('--crop-size takes H, or H W')
    if task == 'seg':
        write_seg(args)
        return
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
    from inline_backbones.cli import run_tool

    run_tool(main, 'finetune_config')
