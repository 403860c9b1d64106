"""docs/finetune.md end to end: its CPU ``mim train`` and ``mim test`` commands, read from the page, run on a
generated COCO-format folder laid out as the page says, with the fine-tuning config shrunk through
``--cfg-options`` (tiny backbone, 256-pixel images, one epoch, no ImageNet weights) to run on a CPU in about a
minute. ``mim test`` reloads the saved Runner checkpoint with torch's safe ``weights_only`` loading."""
import glob
import json
import os
import os.path as osp
import re
import shlex
import subprocess
import sys

import pytest
from mmengine.config import Config
from shapes_dataset import generate_shapes_dataset

from inline_backbones.released import SWIN_ARCH_CHECKPOINTS

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
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
    """tools/finetune_config.py: classes in category-id order from the json, written into every head, split and
    evaluator; a json with masks gives Mask R-CNN."""
    root = tmp_path / 'my_data'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=0)
    out = tmp_path / 'configs' / 'finetune.py'
    tool = osp.join(ROOT, 'tools', 'finetune_config.py')
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
    assert cfg.val_evaluator.metric == ['bbox', 'segm'] and cfg.custom_hooks == [dict(type='NumClassCheckHook')]


def test_boxes_only_data_gives_a_faster_rcnn_that_trains_a_step(tmp_path):
    """A json without segmentations: the written config has no mask branch (Faster R-CNN on InLine-Swin), loads
    boxes only, evaluates boxes, and trains (tiny backbone, one epoch of 2 images) with a finite loss."""
    root = tmp_path / 'boxes'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=1)
    _dataset_without_masks(str(root))
    out = tmp_path / 'boxes.py'
    subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'finetune_config.py'), str(root), '--out', str(out)],
                   check=True, capture_output=True, timeout=120)
    cfg = Config.fromfile(str(out))
    assert cfg.model.roi_head.mask_head is None and cfg.val_evaluator.metric == ['bbox']
    assert cfg.train_dataloader.dataset.pipeline[1] == dict(type='LoadAnnotations', with_bbox=True, with_mask=False)
    runner = _runner(str(out), root, tmp_path / 'work')
    assert not runner.model.roi_head.with_mask
    runner.train()
    assert runner.iter == 1
    loss = runner.message_hub.get_scalar('train/loss').current()
    assert loss == loss and 0 < loss < 1e3


@pytest.mark.parametrize('boxes_only', [False, True], ids=['cascade-mask-rcnn', 'cascade-rcnn'])
def test_cascade_config_has_the_classes_in_its_three_box_heads_and_trains_a_step(tmp_path, boxes_only):
    """``--detector cascade``: Cascade Mask R-CNN (Cascade R-CNN for boxes-only data) with the classes in each of
    the three box heads (and the mask head), the fine-tuning schedule and data inherited; it builds (tiny backbone
    and heads) and Cascade Mask R-CNN trains a step with a finite loss, NumClassCheckHook satisfied (the boxes-only
    training path is Faster R-CNN's test's)."""
    root = tmp_path / 'data'
    generate_shapes_dataset(str(root), num_train=2, num_val=1, seed=3)
    if boxes_only:
        _dataset_without_masks(str(root))
    out = tmp_path / 'cascade.py'
    done = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'finetune_config.py'), str(root), '--detector',
                           'cascade', '--out', str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ('(Cascade R-CNN)' if boxes_only else '(Cascade Mask R-CNN)') in done.stdout
    cfg = Config.fromfile(str(out))
    roi = cfg.model.roi_head
    assert cfg.model.type == 'CascadeRCNN' and [h.num_classes for h in roi.bbox_head] == [4, 4, 4]
    assert (roi.mask_head is None) if boxes_only else roi.mask_head.num_classes == 4
    assert cfg.train_cfg.max_epochs == 24 and cfg.custom_hooks == [dict(type='NumClassCheckHook')]
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
    """The usual inheritance mistake: a child config sets 5 classes, the base's heads keep 4; mmdet's
    NumClassCheckHook (in the fine-tuning config) stops the run before its first iteration, naming both counts."""
    from mmengine.config import Config

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
    mismatch = r'The `num_classes` \(4\) in .* does not matches the length of `classes` 5'
    with pytest.raises(AssertionError, match=mismatch):
        runner.train()
    assert runner.iter == 0
