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

from inline_backbones.data import generate_shapes_dataset
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
