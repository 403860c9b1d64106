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
import subprocess
import sys

import pytest
from mmengine.config import Config

from inline_backbones.released import SWIN_ARCH_CHECKPOINTS
from inline_backbones.shapes_dataset import generate_shapes_dataset

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
    **{f'{split}_dataloader.{key}': value for split in ('train', 'val', 'test')
       for key, value in (('num_workers', 0), ('persistent_workers', False))},
}


def doc_command(verb):
    """The page's CPU command line ``mim <verb> mmdet <fine-tuning config> ... --gpus 0 -y ...``."""
    with open(DOC) as f:
        lines = [line.strip() for line in f if line.startswith(f'mim {verb} mmdet {CONFIG}') and '--gpus 0 -y' in line]
    assert len(lines) == 1, f'docs/finetune.md has {len(lines)} CPU `mim {verb}` lines for {CONFIG}'
    return shlex.split(lines[0])


def run(command, cwd):
    """``command`` with the venv's mim, the config from this checkout and the tiny-model options."""
    command = [osp.join(osp.dirname(sys.executable), 'mim')] + [osp.join(ROOT, a) if a == CONFIG else a
                                                                    for a in command[1:]]
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

    from inline_backbones.class_check import ClassMismatchError

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


def test_a_child_that_sets_only_classes_is_refused_naming_every_list_and_the_fix(tmp_path):
    """The reported case: a child of the fine-tuning config that sets 7 classes and nothing else builds 4-class heads
    and a 4-class dataset (mmengine resolved the base's variables), so mmdet's NumClassCheckHook passes. ClassCheckHook
    compares with the child's `classes` and refuses before training and before testing, with each list, what it
    misses, and the finetune_config.py command for this folder."""
    from mmengine.config import Config

    from inline_backbones.class_check import ClassMismatchError

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


def test_an_annotation_file_with_more_categories_is_refused_unless_a_subset_is_asked_for(tmp_path):
    """The fine-tuning config's 4 classes over a json with 3 more categories: mmdet would train on the 4 and drop the
    rest without a word; ClassCheckHook refuses naming the extra categories, and with allow_subset=True trains,
    with the categories left out in the log."""
    from inline_backbones.class_check import ClassMismatchError

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


def test_classes_in_another_order_than_the_file_are_refused_as_mmdet_numbers_labels_in_the_files_order(tmp_path):
    """mmdet's CocoDataset gives label i to the i-th category the json lists (among the classes), whatever the
    order of `classes`: a json listing the 4 categories in another order would put the config's names on the wrong
    labels. The hook refuses it; tools/misc/finetune_config.py writes the json's order, which passes."""
    from mmdet.datasets import CocoDataset

    from inline_backbones.class_check import ClassMismatchError, check_classes

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
    from inline_backbones.class_check import ClassMismatchError, check_classes

    with pytest.raises(ClassMismatchError, match=r"is the string 'disc', not a tuple of names: a tuple of one class "
                                                 r"is written \('disc',\)"):
        check_classes('disc', [], {})
