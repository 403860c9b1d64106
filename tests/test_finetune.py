"""docs/finetune.md end to end: its CPU ``mim train`` and ``mim test`` commands, read from the page, run on a
generated COCO-format folder laid out as the page says, with the fine-tuning config shrunk through
``--cfg-options`` (tiny backbone, 256-pixel images, one epoch, no ImageNet weights) to run on a CPU in about a
minute. ``mim test`` reloads the saved Runner checkpoint with torch's safe ``weights_only`` loading."""
import glob
import json
import logging
import logging.handlers
import os
import os.path as osp
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from helpers import NO_WORKERS
from mmengine.config import Config

from inline_backbones.checkpoints.released import SWIN_ARCH_CHECKPOINTS
from inline_backbones.data.shapes import generate_shapes_dataset
from inline_backbones.openmmlab.line import mim_codebase

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
FINETUNE_TOOL = osp.join(ROOT, 'tools', 'misc', 'finetune_config.py')
CLASS_CHECK = dict(type='inline_backbones.ClassCheckHook')
DOC = osp.join(ROOT, 'docs', 'finetune.md')
CONFIG = 'mmdet_configs/mask-rcnn_inline-swin-t_fpn_finetune-custom-coco.py'
TINY = {
    'model.backbone.init_cfg': None,
    'model.backbone.arch._delete_': True,
    'model.backbone.arch.embed_dims': 32,
    'model.backbone.arch.depths': [1, 1, 1, 1],
    'model.backbone.arch.num_heads': [1, 2, 4, 8],
    'model.backbone.attn_type': 'IIIS',
    'model.neck.in_channels': [32, 64, 128, 256],
    'model.neck.out_channels': 64,
    'model.rpn_head.in_channels': 64,
    'model.rpn_head.feat_channels': 64,
    'model.roi_head.bbox_roi_extractor.out_channels': 64,
    'model.roi_head.bbox_head.in_channels': 64,
    'model.roi_head.bbox_head.fc_out_channels': 256,
    'model.roi_head.mask_roi_extractor.out_channels': 64,
    'model.roi_head.mask_head.in_channels': 64,
    'model.roi_head.mask_head.conv_out_channels': 64,
    'model.train_cfg.rpn_proposal.max_per_img': 100,
    'model.test_cfg.rpn.max_per_img': 100,
    'train_dataloader.dataset.pipeline.2.scale': (256, 256),
    'val_dataloader.dataset.pipeline.1.scale': (256, 256),
    'test_dataloader.dataset.pipeline.1.scale': (256, 256),
    'train_cfg.max_epochs': 1,
    'train_cfg.val_begin': 2,                    # no validation during training: mim test evaluates
    'default_hooks.logger.interval': 1,
    **NO_WORKERS,
}


def doc_command(verb):
    """The page's CPU command line ``mim <verb> mmdet <fine-tuning config> ... --gpus 0 -y ...``."""
    with open(DOC) as f:
        lines = [line.strip() for line in f if line.startswith(f'mim {verb} mmdet {CONFIG}') and '--gpus 0 -y' in line]
    assert len(lines) == 1, f'docs/finetune.md has {len(lines)} CPU `mim {verb}` lines for {CONFIG}'
    return shlex.split(lines[0])


def run(command, cwd):
    """``command`` with the venv's mim, the config from this checkout and the tiny-model options."""
    # the page's `mim VERB mmdet ...`, with the codebase name the installed line's mim takes (the same on the default
    # line; docs/installation.md's table gives the fork's)
    command = [osp.join(osp.dirname(sys.executable), 'mim'), command[1], mim_codebase('mmdet')] + [
        osp.join(ROOT, a) if a == CONFIG else a for a in command[3:]]
    command += ['--cfg-options'] + [f'{k}={v}'.replace(' ', '') for k, v in TINY.items()]
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600,
                         env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return out.stdout + out.stderr


def test_config_gives_the_classes_to_every_head_dataset_and_evaluator():
    cfg = Config.fromfile(osp.join(ROOT, CONFIG))
    classes, data_root = cfg.classes, cfg.data_root
    assert cfg.model.roi_head.bbox_head.num_classes == cfg.model.roi_head.mask_head.num_classes == len(classes)
    for split in ('train', 'val', 'test'):
        dataset = cfg[f'{split}_dataloader'].dataset
        assert tuple(dataset.metainfo.classes) == tuple(classes) and dataset.data_root == data_root
    assert cfg.val_evaluator.ann_file == cfg.test_evaluator.ann_file == data_root + 'annotations/instances_val.json'
    assert cfg.model.backbone.init_cfg.checkpoint == SWIN_ARCH_CHECKPOINTS['tiny']
    warmup, steps = cfg.param_scheduler
    assert warmup.end < 300 // cfg.train_dataloader.batch_size      # shorter than an epoch of 300 images
    assert steps.end == cfg.train_cfg.max_epochs > max(steps.milestones)


@pytest.mark.slow
def test_doc_commands_fine_tune_and_test_on_a_coco_folder(tmp_path):
    generate_shapes_dataset(str(tmp_path / 'data' / 'my_dataset'), num_train=4, num_val=2, seed=3)
    train = doc_command('train')
    work_dir = train[train.index('--work-dir') + 1]
    run(train, cwd=tmp_path)
    checkpoint = tmp_path / work_dir / 'epoch_1.pth'
    assert checkpoint.is_file()

    test = doc_command('test')
    at = test.index('--checkpoint') + 1
    assert re.fullmatch(rf'{re.escape(work_dir)}/epoch_\d+\.pth', test[at]), test[at]
    test[at] = str(checkpoint)                   # the page names the last epoch of the full schedule
    test_dir = tmp_path / test[test.index('--work-dir') + 1]
    log = run(test, cwd=tmp_path)
    assert 'coco/bbox_mAP' in log
    (metrics_file,) = glob.glob(str(test_dir / '*' / '*.json'))
    with open(metrics_file) as f:
        metrics = json.load(f)
    assert isinstance(metrics['coco/bbox_mAP'], float) and 0 <= metrics['coco/bbox_mAP'] <= 1
    assert isinstance(metrics['coco/segm_mAP'], float)


def _dataset_without_masks(root):
    for split in ('train', 'val'):
        path = osp.join(root, 'annotations', f'instances_{split}.json')
        with open(path) as f:
            coco = json.load(f)
        for ann in coco['annotations']:
            ann.pop('segmentation', None)
        with open(path, 'w') as f:
            json.dump(coco, f)


def _runner(config, root, work_dir, exclude=None, **extra):
    """A Runner of ``config`` with the tiny model, one epoch (``exclude``: leave out TINY's keys containing it)."""
    from mmengine.config import Config
    from mmengine.runner import Runner

    cfg = Config.fromfile(config)
    options = {k: v for k, v in TINY.items() if ('mask' not in k or cfg.model.roi_head.get('mask_head'))
               and not (exclude and exclude in k)}
    cfg.merge_from_dict({**options, **extra})
    cfg.work_dir = str(work_dir)
    return Runner.from_cfg(cfg)


@pytest.mark.slow
@pytest.mark.mutation
def test_written_config_takes_classes_and_paths_from_the_json(tmp_path):
    """tools/misc/finetune_config.py: classes in category-id order from the json, written into every head, split and
    evaluator; a json with masks gives Mask R-CNN."""
    root = tmp_path / 'my_data'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=0)
    out = tmp_path / 'configs' / 'finetune.py'
    tool = FINETUNE_TOOL
    done = subprocess.run([sys.executable, tool, str(root), '--out', str(out)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    with open(root / 'annotations' / 'instances_train.json') as f:
        names = [c['name'] for c in sorted(json.load(f)['categories'], key=lambda c: c['id'])]
    cfg = Config.fromfile(str(out))
    assert list(cfg.classes) == names and f'{len(names)} classes' in done.stdout
    assert cfg.model.roi_head.bbox_head.num_classes == cfg.model.roi_head.mask_head.num_classes == len(names)
    for split in ('train', 'val', 'test'):
        dataset = cfg[f'{split}_dataloader'].dataset
        assert list(dataset.metainfo.classes) == names and dataset.data_root == str(root) + '/'
    assert cfg.val_evaluator.ann_file == str(root) + '/annotations/instances_val.json'
    assert cfg.val_evaluator.metric == ['bbox', 'segm'] and cfg.custom_hooks == [CLASS_CHECK]


@pytest.mark.slow
@pytest.mark.mutation
def test_boxes_only_data_gives_a_faster_rcnn_that_trains_a_step(tmp_path):
    """A json without segmentations: the written config has no mask branch (Faster R-CNN on InLine-Swin), loads
    boxes only, evaluates boxes, and trains (tiny backbone, one epoch of 2 images) with a finite loss."""
    root = tmp_path / 'boxes'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=1)
    _dataset_without_masks(str(root))
    out = tmp_path / 'boxes.py'
    subprocess.run([sys.executable, FINETUNE_TOOL, str(root), '--out', str(out)],
                   check=True, capture_output=True, timeout=120)
    cfg = Config.fromfile(str(out))
    assert cfg.model.roi_head.mask_head is None and cfg.val_evaluator.metric == ['bbox']
    assert cfg.train_dataloader.dataset.pipeline[1] == dict(type='LoadAnnotations', with_bbox=True, with_mask=False)
    runner = _runner(str(out), root, tmp_path / 'work')
    assert not runner.model.roi_head.with_mask
    assert [type(h).__name__ for h in runner.hooks].count('ClassCheckHook') == 1
    runner.train()
    assert runner.iter == 1
    loss = runner.message_hub.get_scalar('train/loss').current()
    assert loss == loss and 0 < loss < 1e3


@pytest.mark.slow
@pytest.mark.mutation
@pytest.mark.parametrize('boxes_only', [False, True], ids=['cascade-mask-rcnn', 'cascade-rcnn'])
def test_cascade_config_has_the_classes_in_its_three_box_heads_and_trains_a_step(tmp_path, boxes_only):
    """``--detector cascade``: Cascade Mask R-CNN (Cascade R-CNN for boxes-only data) with the classes in each of
    the three box heads (and the mask head), the fine-tuning schedule and data inherited; it builds (tiny backbone
    and heads) and Cascade Mask R-CNN trains a step with a finite loss, ClassCheckHook satisfied (the boxes-only
    training path is Faster R-CNN's test's)."""
    root = tmp_path / 'data'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=3)
    if boxes_only:
        _dataset_without_masks(str(root))
    out = tmp_path / 'cascade.py'
    done = subprocess.run([sys.executable, FINETUNE_TOOL, str(root), '--detector',
                           'cascade', '--out', str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ('(Cascade R-CNN)' if boxes_only else '(Cascade Mask R-CNN)') in done.stdout
    cfg = Config.fromfile(str(out))
    roi = cfg.model.roi_head
    assert cfg.model.type == 'CascadeRCNN' and [h.num_classes for h in roi.bbox_head] == [4, 4, 4]
    assert (roi.mask_head is None) if boxes_only else roi.mask_head.num_classes == 4
    assert cfg.train_cfg.max_epochs == 24 and cfg.custom_hooks == [CLASS_CHECK]
    for head in roi.bbox_head:                     # the tiny model of _runner, for each of the three heads
        head.update(in_channels=64, fc_out_channels=256)
    tiny = tmp_path / 'cascade_tiny.py'
    cfg.dump(str(tiny))
    runner = _runner(str(tiny), root, tmp_path / 'work', exclude='bbox_head')
    assert runner.model.roi_head.with_mask != boxes_only and len(runner.model.roi_head.bbox_head) == 3
    if not boxes_only:
        runner.train()
        assert runner.iter == 1
        loss = runner.message_hub.get_scalar('train/loss').current()
        assert loss == loss and 0 < loss < 1e3


def test_a_head_that_disagrees_with_the_dataset_stops_before_training(tmp_path):
    """The usual inheritance mistake: a child config sets 5 classes and each dataset's metainfo, the base's heads keep
    4; ClassCheckHook (in the fine-tuning config) stops the run before its first iteration, naming the heads and the
    class the annotation file does not have."""
    from mmengine.config import Config

    from inline_backbones.openmmlab.class_check import ClassMismatchError

    root = tmp_path / 'my_data'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=2)
    child = tmp_path / 'child.py'
    classes = ('disc', 'box', 'triangle', 'hexagon', 'star')
    child.write_text(f"_base_ = {osp.join(ROOT, CONFIG)!r}\nclasses = {classes!r}\nmetainfo = dict(classes=classes)\n"
                     f"train_dataloader = dict(dataset=dict(data_root={str(root) + '/'!r}, metainfo=metainfo))\n"
                     f"val_dataloader = dict(dataset=dict(data_root={str(root) + '/'!r}, metainfo=metainfo))\n"
                     f"test_dataloader = val_dataloader\n"
                     f"val_evaluator = dict(ann_file={str(root / 'annotations' / 'instances_val.json')!r})\n"
                     f"test_evaluator = val_evaluator\n")
    assert Config.fromfile(str(child)).model.roi_head.bbox_head.num_classes == 4      # what inheritance gives
    runner = _runner(str(child), root, tmp_path / 'work')
    with pytest.raises(ClassMismatchError) as err:
        runner.train()
    assert runner.iter == 0
    message = str(err.value)
    assert "heads' num_classes: roi_head.bbox_head 4, roi_head.mask_head 4 (the classes are 5)" in message
    assert (f"categories of the train annotation file {root}/annotations/instances_train.json (4): disc, box, "
            'triangle, hexagon\n      missing: star') in message


def _data_at(root):
    """``--cfg-options`` pointing every split and evaluator of the fine-tuning config at the folder ``root``."""
    return {**{f'{split}_dataloader.dataset.data_root': str(root) + '/' for split in ('train', 'val', 'test')},
            **{f'{split}_evaluator.ann_file': str(root / 'annotations' / 'instances_val.json')
               for split in ('val', 'test')}}


def _add_categories(root, names, order=None):
    """Add categories ``names`` to both jsons of ``root`` (each with one annotation: a copy of the first one), and
    list the categories in ``order`` (names) if given."""
    for split in ('train', 'val'):
        path = root / 'annotations' / f'instances_{split}.json'
        coco = json.loads(path.read_text())
        for name in names:
            category = dict(id=max(c['id'] for c in coco['categories']) + 1, name=name)
            coco['categories'].append(category)
            coco['annotations'].append(dict(coco['annotations'][0], id=max(a['id'] for a in coco['annotations']) + 1,
                                            category_id=category['id']))
        if order:
            coco['categories'].sort(key=lambda c: order.index(c['name']))
        path.write_text(json.dumps(coco))


@pytest.mark.slow
@pytest.mark.mutation
def test_a_child_that_sets_only_classes_is_refused_naming_every_list_and_the_fix(tmp_path):
    """The reported case: a child of the fine-tuning config that sets 7 classes and nothing else builds 4-class heads
    and a 4-class dataset (mmengine resolved the base's variables), so mmdet's NumClassCheckHook passes. ClassCheckHook
    compares with the child's `classes` and refuses before training and before testing, with each list, what it
    misses, and the finetune_config.py command for this folder."""
    from mmengine.config import Config

    from inline_backbones.openmmlab.class_check import ClassMismatchError

    root = tmp_path / 'my_data'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=4)
    seven = ('disc', 'box', 'triangle', 'hexagon', 'star', 'ring', 'cross')
    child = tmp_path / 'child.py'
    child.write_text(f'_base_ = {osp.join(ROOT, CONFIG)!r}\nclasses = {seven!r}\n')
    cfg = Config.fromfile(str(child))
    assert cfg.classes == seven and len(cfg.train_dataloader.dataset.metainfo.classes) == 4      # the base's
    runner = _runner(str(child), root, tmp_path / 'work', **_data_at(root))
    with pytest.raises(ClassMismatchError) as err:
        runner.train()
    assert runner.iter == 0
    message = str(err.value)
    assert message.startswith("the classes of this run do not agree with the config's `classes` (7): disc, box, "
                              'triangle, hexagon, star, ring, cross\n')
    for split in ('train', 'val'):
        assert (f'  {split} dataset (CocoDataset) metainfo classes (4): disc, box, triangle, hexagon\n'
                '      missing: star, ring, cross') in message
        assert (f'  categories of the {split} annotation file {root}/annotations/instances_{split}.json (4): disc, '
                'box, triangle, hexagon\n      missing: star, ring, cross') in message
    assert "heads' num_classes: roi_head.bbox_head 4, roi_head.mask_head 4 (the classes are 7)" in message
    command = (f'python tools/misc/finetune_config.py {root}/ --train-json annotations/instances_train.json '
               '--train-images images/train/ --val-json annotations/instances_val.json --val-images images/val/ --out '
               'configs/finetune_my_data.py')
    assert f'\n  {command}\n' in message
    words = shlex.split(command)                  # the command, run (written elsewhere), gives the file's classes
    words[words.index('--out') + 1] = str(tmp_path / 'written.py')
    subprocess.run([sys.executable, *words[1:]], cwd=ROOT, check=True, capture_output=True, timeout=120)
    assert Config.fromfile(str(tmp_path / 'written.py')).classes == ('disc', 'box', 'triangle', 'hexagon')
    test_runner = _runner(str(child), root, tmp_path / 'work_test', **_data_at(root))
    with pytest.raises(ClassMismatchError, match=r'test dataset \(CocoDataset\) metainfo classes \(4\)'):
        test_runner.test()


@pytest.mark.slow
@pytest.mark.mutation
def test_an_annotation_file_with_more_categories_is_refused_unless_a_subset_is_asked_for(tmp_path):
    """The fine-tuning config's 4 classes over a json with 3 more categories: mmdet would train on the 4 and drop the
    rest without a word; ClassCheckHook refuses naming the extra categories, and with allow_subset=True trains,
    with the categories left out in the log."""
    from inline_backbones.openmmlab.class_check import ClassMismatchError

    root = tmp_path / 'more'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=5)
    _add_categories(root, ['star', 'ring', 'cross'])
    runner = _runner(osp.join(ROOT, CONFIG), root, tmp_path / 'work', **_data_at(root))
    with pytest.raises(ClassMismatchError) as err:
        runner.train()
    assert runner.iter == 0
    message = str(err.value)
    assert (f'categories of the train annotation file {root}/annotations/instances_train.json (7): disc, box, '
            'triangle, hexagon, star, ring, cross\n      extra: star, ring, cross') in message
    assert 'metainfo classes' not in message and "heads' num_classes" not in message
    assert "dict(type='inline_backbones.ClassCheckHook', allow_subset=True)" in message

    subset = _runner(osp.join(ROOT, CONFIG), root, tmp_path / 'subset', **_data_at(root),
                     custom_hooks=[dict(CLASS_CHECK, allow_subset=True)])
    handler = logging.handlers.BufferingHandler(capacity=10_000)
    subset.logger.addHandler(handler)
    try:
        subset.train()
    finally:
        subset.logger.removeHandler(handler)
    assert subset.iter == 1
    text = '\n'.join(record.getMessage() for record in handler.buffer)
    assert (f'train annotation file {root}/annotations/instances_train.json: training on 4 of its 7 categories '
            '(allow_subset=True); the annotations of star, ring, cross are left out') in text
    assert 'ClassCheckHook: the 4 classes agree with the train, val datasets' in text


@pytest.mark.slow
@pytest.mark.mutation
def test_classes_in_another_order_than_the_file_are_refused_as_mmdet_numbers_labels_in_the_files_order(tmp_path):
    """mmdet's CocoDataset gives label i to the i-th category the json lists (among the classes), whatever the
    order of `classes`: a json listing the 4 categories in another order would put the config's names on the wrong
    labels. The hook refuses it; tools/misc/finetune_config.py writes the json's order, which passes."""
    from mmdet.datasets import CocoDataset

    from inline_backbones.openmmlab.class_check import ClassMismatchError, check_classes

    root = tmp_path / 'reordered'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=6)
    order = ['hexagon', 'disc', 'triangle', 'box']
    _add_categories(root, [], order=order)
    classes = ('disc', 'box', 'triangle', 'hexagon')
    dataset = CocoDataset(data_root=str(root) + '/', ann_file='annotations/instances_train.json',
                          metainfo=dict(classes=classes), data_prefix=dict(img='images/train/'), pipeline=[])
    coco = json.loads((root / 'annotations' / 'instances_train.json').read_text())
    names = {c['id']: c['name'] for c in coco['categories']}
    first = dataset.get_data_info(0)
    raw = [a for a in coco['annotations'] if a['image_id'] == first['img_id']]
    assert [order.index(names[a['category_id']]) for a in raw] == [i['bbox_label'] for i in first['instances']]
    with pytest.raises(ClassMismatchError, match=r'instances_train.json \(4\): hexagon, disc, triangle, box\n'
                                                 r'      the same names in another order'):
        check_classes(classes, [('train', dataset)], {})
    out = tmp_path / 'reordered.py'
    subprocess.run([sys.executable, FINETUNE_TOOL, str(root), '--out', str(out)],
                   check=True, capture_output=True, timeout=120)
    written = Config.fromfile(str(out)).classes
    assert list(written) == order
    assert check_classes(written, [('train', CocoDataset(
        data_root=str(root) + '/', ann_file='annotations/instances_train.json', metainfo=dict(classes=written),
        data_prefix=dict(img='images/train/'), pipeline=[]))], {'roi_head.bbox_head': 4}) == []


def test_a_class_string_without_its_comma_is_refused():
    """`classes = ('disc')` is a string, which would be read as 4 one-letter classes."""
    from inline_backbones.openmmlab.class_check import ClassMismatchError, check_classes

    with pytest.raises(ClassMismatchError, match=r"is the string 'disc', not a tuple of names: a tuple of one class "
                                                 r"is written \('disc',\)"):
        check_classes('disc', [], {})


# Semantic segmentation: tools/misc/finetune_config.py --task seg (inline_backbones/openmmlab/finetune_seg.py),
# docs/finetune.md section 9.
SEG_DOC_CONFIG = 'configs/finetune_my_seg_data.py'
SHAPES_CLASSES = ('background', 'disc', 'box', 'triangle', 'hexagon')
# The written UperNet InLine-Swin-T shrunk to train on a CPU in a second: a child of the written config.
SEG_TINY = """_base_ = './written.py'
model = dict(
    backbone=dict(init_cfg=None, arch=dict(_delete_=True, embed_dims=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]),
                  attn_type='IIIS', drop_path_rate=0.0),
    decode_head=dict(in_channels=[32, 64, 128, 256], channels=32),
    auxiliary_head=dict(in_channels=128, channels=16))
train_cfg = dict(max_iters=2, val_interval=2)
default_hooks = dict(logger=dict(interval=1))
train_dataloader = dict(num_workers=0, persistent_workers=False)
val_dataloader = dict(num_workers=0, persistent_workers=False)
test_dataloader = val_dataloader
"""


def _seg_folder(root, num_train=2, num_val=1, seed=0):
    """A generated shapes folder in mmseg's layout (img_dir/, ann_dir/, no COCO json); label values 0-4."""
    generate_shapes_dataset(str(root), num_train=num_train, num_val=num_val, seed=seed)
    os.rename(root / 'images', root / 'img_dir')
    os.rename(root / 'labels', root / 'ann_dir')
    shutil.rmtree(root / 'annotations')
    return root


def _map_values(root):
    """The values of the label maps under ``root/ann_dir``, read with OpenCV."""
    import cv2
    import numpy as np

    return sorted({int(v) for path in glob.glob(str(root / 'ann_dir' / '*' / '*.png'))
                   for v in np.unique(cv2.imread(path, cv2.IMREAD_UNCHANGED))})


def _write_seg_config(capsys, *argv):
    """tools/misc/finetune_config.py run with ``argv``: (the written config, what it printed)."""
    from tool_modules import load_tool

    out = argv[argv.index('--out') + 1]
    load_tool('tools/misc/finetune_config.py').main(list(argv))
    return Config.fromfile(out), capsys.readouterr().out


def test_segmentation_config_follows_the_folder(tmp_path, capsys):
    """A folder in mmseg's layout (found without --task) and a classes file: the config's classes, palette,
    num_classes of both heads, ignore_index, reduce_zero_label, datasets, crop and schedule are the folder's and the
    options'; the tool says which values the maps hold."""
    root = _seg_folder(tmp_path / 'seg')
    (tmp_path / 'classes.txt').write_text('\n'.join(SHAPES_CLASSES) + '\n')
    out = str(tmp_path / 'configs' / 'seg.py')
    cfg, printed = _write_seg_config(capsys, str(root), '--classes', str(tmp_path / 'classes.txt'), '--crop-size',
                                     '256', '--iters', '1000', '--out', out)
    assert _map_values(root) == [0, 1, 2, 3, 4]
    assert 'values found: 0-4' in printed and '5 classes (names from' in printed
    assert 'reduce_zero_label=False: value v is class v' in printed
    assert cfg.classes == SHAPES_CLASSES and cfg.num_classes == 5 and cfg.ignore_index == 255
    assert len(cfg.palette) == 5 and len(set(cfg.palette)) == 5
    assert cfg.model.decode_head.num_classes == cfg.model.auxiliary_head.num_classes == 5
    assert cfg.model.decode_head.ignore_index == cfg.model.auxiliary_head.ignore_index == 255
    assert cfg.model.data_preprocessor.size == (256, 256) and cfg.model.data_preprocessor.seg_pad_val == 255
    assert cfg.model.backbone.type == 'inline_backbones.InLineSwinTransformer'
    for split, loader in (('train', cfg.train_dataloader), ('val', cfg.val_dataloader), ('val', cfg.test_dataloader)):
        dataset = loader.dataset
        assert dataset.type == 'BaseSegDataset' and dataset.data_root == str(root) + '/'
        assert dataset.data_prefix == dict(img_path=f'img_dir/{split}', seg_map_path=f'ann_dir/{split}')
        assert (dataset.img_suffix, dataset.seg_map_suffix) == ('.jpg', '.png')
        assert dataset.metainfo == dict(classes=SHAPES_CLASSES, palette=cfg.palette)
        assert dataset.reduce_zero_label is False and dataset.ignore_index == 255
        assert [s for s in dataset.pipeline if s.type == 'LoadAnnotations'] == [dict(type='LoadAnnotations')]
    steps = {s.type: s for s in cfg.train_dataloader.dataset.pipeline}
    assert steps['RandomCrop'].crop_size == (256, 256) and steps['RandomResize'].scale == (1024, 256)
    assert [s.scale for s in cfg.test_dataloader.dataset.pipeline if s.type == 'Resize'] == [(1024, 256)]
    assert cfg.val_evaluator.type == 'IoUMetric' and cfg.val_evaluator.ignore_index == 255
    assert cfg.train_cfg.max_iters == 1000
    assert cfg.train_cfg.val_interval == cfg.default_hooks.checkpoint.interval == 100
    warmup, poly = cfg.param_scheduler
    assert (warmup.type, warmup.end, poly.type, poly.begin, poly.end) == ('LinearLR', 100, 'PolyLR', 100, 1000)

    again, _ = _write_seg_config(capsys, str(root), '--classes', str(tmp_path / 'classes.txt'), '--out',
                                 str(tmp_path / 'again.py'))
    assert again.palette == cfg.palette                                   # generated the same way every run


def test_segmentation_classes_from_the_values_and_reduce_zero_label(tmp_path, capsys):
    """Without a classes file, one class per value up to the largest; --reduce-zero-label ignores 0 and numbers the
    classes from value 1 (in the datasets, whose LoadAnnotations take it); a palette file is taken as written."""
    root = _seg_folder(tmp_path / 'seg')
    plain, printed = _write_seg_config(capsys, str(root), '--task', 'seg', '--out', str(tmp_path / 'plain.py'))
    assert plain.classes == tuple(f'value_{v}' for v in _map_values(root))
    assert "names from the label maps' values" in printed
    palette = [(0, 0, 0), (255, 0, 0), (0, 255, 0), (0, 0, 255)]
    (tmp_path / 'palette.txt').write_text('\n'.join(' '.join(map(str, c)) for c in palette))
    reduced, printed = _write_seg_config(capsys, str(root), '--reduce-zero-label', '--palette',
                                         str(tmp_path / 'palette.txt'), '--out', str(tmp_path / 'reduced.py'))
    assert reduced.classes == tuple(f'value_{v}' for v in _map_values(root) if v) and reduced.palette == palette
    assert reduced.model.decode_head.num_classes == reduced.model.auxiliary_head.num_classes == 4
    assert 'ignored pixels: 0 (' in printed and 'value 0 is unlabelled, value v is class v-1' in printed
    assert [loader.dataset.reduce_zero_label for loader in (reduced.train_dataloader, reduced.val_dataloader)] == [
        True, True]


@pytest.mark.parametrize('base', ['inline-cswin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
                                  'fpn_inline-pvt-t_8xb2-40k_ade20k-512x512.py'])
def test_segmentation_config_on_another_recipe_has_the_classes_in_every_head(tmp_path, capsys, base):
    """--base: InLine-CSwin UperNet (decode and auxiliary heads), InLine-PVT Semantic FPN (a decode head only, no
    warm-up in its recipe)."""
    root = _seg_folder(tmp_path / 'seg')
    cfg, _ = _write_seg_config(capsys, str(root), '--base', f'mmseg_configs/{base}', '--iters', '500', '--out',
                               str(tmp_path / 'seg.py'))
    assert cfg.model.decode_head.num_classes == 5
    if 'pvt' in base:
        assert cfg.model.backbone.type == 'inline_backbones.InLinePVT' and 'auxiliary_head' not in cfg.model
        assert [(s.type, s.begin, s.end) for s in cfg.param_scheduler] == [('PolyLR', 0, 500)]
    else:
        assert cfg.model.backbone.type == 'inline_backbones.InLineCSwinTransformer'
        assert cfg.model.auxiliary_head.num_classes == 5
        assert [s.type for s in cfg.param_scheduler] == ['LinearLR', 'PolyLR']


def test_segmentation_options_are_refused_for_detection_and_the_other_way(tmp_path, capsys):
    """A COCO folder stays detection (its command line unchanged) and refuses segmentation options without --task
    seg; a folder in mmseg's layout refuses detection options; an unknown --base and a warm-up as long as the run are
    one-line errors."""
    from tool_modules import load_tool

    from inline_backbones.data.tool_inputs import ToolInputError

    main = load_tool('tools/misc/finetune_config.py').main
    coco = tmp_path / 'coco'
    generate_shapes_dataset(str(coco), num_train=1, num_val=1, seed=0)
    with pytest.raises(SystemExit):
        main([str(coco), '--img-dir', 'images', '--ann-dir', 'labels', '--reduce-zero-label'])
    assert ('--img-dir, --ann-dir, --reduce-zero-label: for --task seg, and this is --task det'
            in capsys.readouterr().err)
    seg = _seg_folder(tmp_path / 'seg', num_train=1, num_val=1)
    with pytest.raises(SystemExit):
        main([str(seg), '--detector', 'cascade'])
    assert '--detector: for --task det, and this is --task seg' in capsys.readouterr().err
    with pytest.raises(ToolInputError, match=r'^--base upernet\.py: not one of the ADE20K recipes of mmseg_configs/: '
                                             r'fpn_inline-pvt-l_8xb2-40k_ade20k-512x512\.py, '):
        main([str(seg), '--base', 'upernet.py', '--out', str(tmp_path / 'seg.py')])
    with pytest.raises(ToolInputError, match=r'^--warmup-iters 100: the warm-up must end before training does '
                                             r'\(--iters 100\)$'):
        main([str(seg), '--iters', '100', '--warmup-iters', '100', '--out', str(tmp_path / 'seg.py')])
    assert not (tmp_path / 'seg.py').exists()


def _label_map(path, values):
    """A 16x16 label map at ``path`` with the ``values`` in horizontal bands."""
    import cv2
    import numpy as np

    cv2.imwrite(str(path), np.repeat(np.array(values, np.uint8), 16 // len(values) + 1)[:16, None].repeat(16, 1))


def test_segmentation_folder_errors_are_one_line_and_name_the_fix(tmp_path):
    """Missing folders, images and maps whose names do not pair, label values that are no class, a classes file
    with more names than the maps reach and a colour label map are refused with one line naming them."""
    import cv2
    import numpy as np

    from inline_backbones.data.tool_inputs import ToolInputError
    from inline_backbones.openmmlab.finetune_seg import read_folder

    def refused(root, pattern, **options):
        with pytest.raises(ToolInputError, match=pattern) as err:
            read_folder(str(root), **options)
        assert '\n' not in str(err.value)

    root = _seg_folder(tmp_path / 'seg', num_train=4, num_val=1)
    refused(tmp_path / 'nowhere', r"^data folder not found: '.*/nowhere'$")
    refused(root, r"^no train image folder '.*/seg/images/train' \(set it with --img-dir / --train-split; '.*/seg' "
                  r'has the folders: ann_dir, img_dir\)$', img_dir='images')
    refused(root, r"^no val image folder '.*/seg/img_dir/validation' \(set it with --img-dir / --val-split",
            val_split='validation')
    refused(root, r"^no train label-map folder '.*/seg/labels/train' \(set it with --ann-dir / --train-split",
            ann_dir='labels')
    for name in ('00002', '00003', '00004'):
        os.rename(root / 'ann_dir' / 'train' / f'{name}.png', root / 'ann_dir' / 'train' / f'{name}_mask.png')
    refused(root, r'^3 of the 4 images in .* have no label map NAME\.png in .*: 00002\.jpg, 00003\.jpg, 00004\.jpg; '
                  r'3 label maps have no image NAME\.jpg: 00002_mask\.png, 00003_mask\.png, 00004_mask\.png ')
    for name in ('00002', '00003', '00004'):
        (root / 'ann_dir' / 'train' / f'{name}_mask.png').unlink()
        (root / 'img_dir' / 'train' / f'{name}.jpg').unlink()

    classes = tmp_path / 'classes.txt'
    classes.write_text('background\ndisc\nbox\ntriangle\n')             # 4 names, values 0-4 in the maps
    refused(root, r'^label values 4 are not classes of .*classes.txt \(4 names: values 0-3\) nor the ignore index '
                  r'255: found in .*\. If value 0 marks unlabelled pixels rather than a class, add '
                  r'--reduce-zero-label', classes_file=str(classes))
    _label_map(root / 'ann_dir' / 'val' / '00001.png', [0, 1, 7, 9, 255])
    refused(root, r"^label values 7, 9 are not classes of .* nor the ignore index 255: found in '?.*val/00001\.png",
            classes_file=str(classes), reduce_zero_label=True)
    classes.write_text('\n'.join(SHAPES_CLASSES + ('star', 'ring')) + '\n')
    _label_map(root / 'ann_dir' / 'val' / '00001.png', [0, 1, 255])
    refused(root, r'has 7 classes \(values 0-6\) but the largest class value in the label maps is 4: star, ring would '
                  r'have no pixel\. .*--allow-absent-classes', classes_file=str(classes))
    assert read_folder(str(root), classes_file=str(classes), allow_absent=True).classes[-2:] == ('star', 'ring')
    cv2.imwrite(str(root / 'ann_dir' / 'val' / '00001.png'), np.zeros((16, 16, 3), np.uint8))
    refused(root, r"00001\.png' has 3 channels: a label map has one")


def seg_doc_commands():
    """The shell commands of docs/finetune.md's segmentation section that make, configure, train, test and infer
    with its example folder, in the page's order."""
    with open(DOC) as f:
        section = f.read().split('## 9. Semantic segmentation')[1]
    starts = ('python tools/misc/make_shapes_dataset.py --root data/my_seg_dataset', 'printf ',
              'python tools/misc/finetune_config.py data/my_seg_dataset', f'python tools/train.py {SEG_DOC_CONFIG}',
              f'python tools/test.py {SEG_DOC_CONFIG}', f'python tools/infer.py {SEG_DOC_CONFIG}')
    lines = [line.strip() for line in section.splitlines() if line.startswith(starts)]
    assert [next(s for s in starts if line.startswith(s)) for line in lines] == list(starts), lines
    return lines


@pytest.mark.slow
def test_doc_commands_fine_tune_test_and_infer_a_segmentor(tmp_path, monkeypatch, capsys):
    """docs/finetune.md's segmentation route on a small generated folder (3 training and 2 validation images): the
    page's commands as written, run in this process (each tool as ``python tools/<tool>.py`` runs it; a process of
    its own would spend most of the time importing mmseg again), with the model of the written config shrunk (a
    child config at the page's path, SEG_TINY) and 2 iterations: the config from the folder, training, the test's
    mIoU, the inference's label maps."""
    import runpy

    import cv2

    make, printf, write, train, test, infer = seg_doc_commands()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('LOCAL_RANK', '0')         # mmseg's tools set it where it is missing: not for later tests
    root = shlex.split(make)[shlex.split(make).index('--root') + 1]
    generate_shapes_dataset(root, num_train=3, num_val=2, seed=3)
    subprocess.run(printf, shell=True, check=True)
    _write_seg_config(capsys, *shlex.split(write)[2:])
    os.rename(SEG_DOC_CONFIG, 'configs/written.py')
    with open(SEG_DOC_CONFIG, 'w') as f:
        f.write(SEG_TINY)

    def run_tool(command):
        """``python tools/<tool>.py ...`` in this process: its words, and what it printed."""
        words = shlex.split(command)
        monkeypatch.setattr(sys, 'argv', words[1:])
        runpy.run_path(osp.join(ROOT, words[1]), run_name='__main__')
        printed = capsys.readouterr()
        return words, printed.out + printed.err

    words, _ = run_tool(train)
    work_dir = words[words.index('--work-dir') + 1]
    (log,) = glob.glob(osp.join(work_dir, '*', '*.log'))
    with open(log) as f:
        log = f.read()
    assert 'Iter(train) [2/2]' in log and 'mIoU' in log
    checkpoint = f'{work_dir}/iter_2.pth'
    assert osp.isfile(checkpoint)
    for command in (test, infer):
        assert shlex.split(command)[3] == f'{work_dir}/iter_4000.pth'     # the page's: the last of its 4000
    words, _ = run_tool(test.replace(f'{work_dir}/iter_4000.pth', checkpoint))
    (metrics_file,) = glob.glob(osp.join(words[words.index('--work-dir') + 1], '*', '*.json'))
    with open(metrics_file) as f:
        metrics = json.load(f)
    assert isinstance(metrics['mIoU'], float) and 0 <= metrics['mIoU'] <= 100
    words, printed = run_tool(infer.replace(f'{work_dir}/iter_4000.pth', checkpoint))
    out_dir = words[words.index('--out-dir') + 1]
    assert f'[infer] visualisations written to {out_dir}/vis' in printed
    predictions = sorted(glob.glob(osp.join(out_dir, 'pred', '*.png')))
    assert [osp.basename(p) for p in predictions] == ['00001.png', '00002.png']
    assert all(cv2.imread(p, cv2.IMREAD_UNCHANGED).max() < len(SHAPES_CLASSES) for p in predictions)
    assert len(glob.glob(osp.join(out_dir, 'vis', '*.jpg'))) == 2
