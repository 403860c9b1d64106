"""tools/analysis_tools/benchmark_training.py (:mod:`inline_backbones.benchmark.training`) on a CPU: the config it
builds for a measurement, the data it generates in a config's own layout, real training iterations of the paper's
UperNet and Mask R-CNN InLine-Swin-T configs at a scaled-down size, and a torchrun launch with the DDP wrapper and
SyncBN handling recorded. Timings are not asserted (the GPU figures come from tools/device/gpu_training_check.sh); the
record's structure and content are."""
import json
import os
import os.path as osp
import re
import statistics
import subprocess
import sys

import cv2
import mmcv
import numpy as np
import pytest
import torch

from inline_backbones.benchmark import training
from inline_backbones.benchmark.training_config import load_config, prepare_config
from inline_backbones.benchmark.training_data import generate_coco, generate_seg
from inline_backbones.openmmlab.line import check_one_line
from inline_backbones.openmmlab.task_tools import task_of

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TOOL = osp.join(ROOT, 'tools', 'analysis_tools', 'benchmark_training.py')

UPERNET_T = osp.join(ROOT, 'mmseg_configs', 'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py')
MASK_RCNN_T = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py')
PVT_RETINA = osp.join(ROOT, 'mmdet_configs', 'retinanet_inline-pvt-t_fpn_1x_coco.py')
MINI_UPERNET = osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py')


def _prepared(config, argv, tmp_path):
    args = training.parse_args([config, *argv])
    cfg = load_config(config, str(tmp_path))
    return prepare_config(cfg, args, str(tmp_path / 'data'), str(tmp_path), task_of(cfg))


def test_the_measurement_config(tmp_path):
    """Iteration loop of --iters with no validation, no checkpoints saved or loaded, the generated data's
    root, AmpOptimWrapper with the dtype, the pipeline's sizes divided by --scale-down and nothing else."""
    cfg = _prepared(MASK_RCNN_T, ['--iters', '7', '--amp', 'bf16', '--padding-aware', 'off', '--scale-down', '8',
                                  '--batch-size', '3', '--workers', '0'], tmp_path)
    assert dict(cfg.train_cfg) == dict(type='IterBasedTrainLoop', max_iters=7, val_interval=8)
    assert cfg.val_dataloader is None and cfg.test_dataloader is None and cfg.val_evaluator is None
    assert cfg.default_hooks.checkpoint is None and cfg.load_from is None and cfg.model.backbone.init_cfg is None
    assert cfg.train_dataloader.dataset.data_root == str(tmp_path / 'data')
    assert cfg.train_dataloader.dataset.ann_file == 'annotations/instances_train2017.json'   # the config's layout
    assert (cfg.train_dataloader.batch_size, cfg.train_dataloader.num_workers) == (3, 0)
    assert not cfg.train_dataloader.persistent_workers
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper' and cfg.optim_wrapper.dtype == 'bfloat16'
    assert cfg.optim_wrapper.loss_scale == 'dynamic' and cfg.optim_wrapper.optimizer.lr == 1e-4
    assert cfg.model.backbone.padding_aware is False
    ms_branch, crop_branch = cfg.train_dataloader.dataset.pipeline[3].transforms
    assert ms_branch[0].scales[0] == (60, 167) and ms_branch[0].scales[-1] == (100, 167)   # (480|800, 1333) / 8
    assert crop_branch[1].crop_size == (48, 75) and crop_branch[1].crop_type == 'absolute_range'
    assert cfg.train_dataloader.dataset.filter_cfg.min_size == 4
    assert cfg.model.data_preprocessor.pad_size_divisor == 32          # not a size: untouched

    fp16 = _prepared(UPERNET_T, ['--amp', 'fp16'], tmp_path)
    assert fp16.optim_wrapper.dtype == 'float16' and fp16.model.backbone.padding_aware is True   # config default
    assert fp16.train_dataloader.dataset.pipeline[3].crop_size == (512, 512)                    # full size
    assert fp16.model.data_preprocessor.size == (512, 512)


def test_padding_aware_on_brings_the_region_preprocessor_and_plain_backbones_refuse_it(tmp_path):
    cfg = _prepared(PVT_RETINA, ['--padding-aware', 'on'], tmp_path)
    assert cfg.model.backbone.padding_aware is True
    assert cfg.model.data_preprocessor.type == 'inline_backbones.RegionDetDataPreprocessor'
    assert 'inline_backbones.openmmlab.det_preprocessor' in cfg.custom_imports['imports']
    assert _prepared(PVT_RETINA, [], tmp_path).model.data_preprocessor.type == 'DetDataPreprocessor'
    with pytest.raises(SystemExit, match='not an InLine backbone'):
        _prepared('mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py', ['--padding-aware', 'on'], tmp_path)


def test_upstream_configs_load_by_scope_name(tmp_path):
    cfg = _prepared('mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
                    ['--iters', '3'], tmp_path)
    assert cfg.model.backbone.type == 'SwinTransformer' and cfg.model.backbone.init_cfg is None
    assert cfg.train_cfg.max_iters == 3 and task_of(cfg) == 'mmseg'


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the refusal on a machine without a GPU')
def test_amp_without_a_gpu_is_refused_with_the_reason(tmp_path):
    with pytest.raises(SystemExit, match='needs a GPU.*AmpOptimWrapper'):
        training.main([UPERNET_T, '--amp', 'fp16', '--work-dir', str(tmp_path)])


def test_generated_coco_follows_the_config_layout_and_classes(tmp_path):
    from pycocotools.coco import COCO

    dataset = dict(type='CocoDataset', ann_file='annotations/train.json', data_prefix=dict(img='imgs/'))
    info = generate_coco(str(tmp_path), dataset, 'mmdet', 6, 1, seed=1)
    coco = COCO(str(tmp_path / 'annotations' / 'train.json'))
    assert len(coco.getImgIds()) == 6 and len(coco.getCatIds()) == 80 == info['classes']
    assert coco.loadCats(1)[0]['name'] == 'person'                       # CocoDataset's own class names
    assert info['sizes'] == [[427, 640], [480, 640], [640, 480]]         # COCO's image sizes
    assert len(coco.getAnnIds()) == info['objects'] >= 6
    for img in coco.loadImgs(coco.getImgIds()):
        assert img['file_name'] == f'{img["id"] - 1:012d}.jpg'
        assert cv2.imread(str(tmp_path / 'imgs' / img['file_name'])).shape[:2] == (img['height'], img['width'])
        anns = coco.loadAnns(coco.getAnnIds(imgIds=img['id']))
        assert 1 <= len(anns) <= 5
        for ann in anns:
            x, y, w, h = ann['bbox']
            assert 0 <= x and x + w <= img['width'] and 0 <= y and y + h <= img['height']
            assert coco.annToMask(ann).sum() >= 64 * (min(img['height'], img['width']) / 256) ** 2 * 0.7


def test_generated_ade_labels_use_the_reduced_zero_label(tmp_path):
    dataset = dict(type='ADE20KDataset', data_prefix=dict(img_path='images/training',
                                                          seg_map_path='annotations/training'))
    info = generate_seg(str(tmp_path), dataset, 'mmseg', 4, 1, seed=0)
    assert info['reduce_zero_label'] and info['classes'] == 150 and info['sizes'] == [[512, 683], [683, 512]]
    labels = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted((tmp_path / 'annotations' /
                                                                         'training').glob('*.png'))]
    assert len(labels) == 4 and all(lab.dtype == np.uint8 and lab.ndim == 2 for lab in labels)
    assert {lab.shape for lab in labels} == {(512, 683), (683, 512)}
    values = np.unique(np.concatenate([lab.ravel() for lab in labels]))
    assert values.min() == 0 and values.max() <= 150 and len(values) > 4     # 0: "other", ignored; 1..150 classes
    assert len(list((tmp_path / 'images' / 'training').glob('*.jpg'))) == 4


def _check_record(record, out, iters, warmup):
    assert json.loads(out.read_text()) == json.loads(json.dumps(record))
    rows = record['per_iter']
    assert [r['iter'] for r in rows] == list(range(1, iters + 1)) and record['iters'] == iters
    assert record['median_s_per_iter'] == statistics.median(r['iter_s'] for r in rows[warmup:])
    assert record['median_step_s'] == statistics.median(r['step_s'] for r in rows[warmup:])
    assert all(0 < r['step_s'] <= r['iter_s'] for r in rows)
    assert record['losses_finite'] is True and record['first_loss'] == rows[0]['losses']['loss']
    assert record['peak_memory_mb'] == max(r['peak_mb'] for r in rows) > 0
    assert record['peak_memory_kind'] == 'cpu_max_rss (whole process)'
    v = record['versions']
    assert v['mmcv'] == mmcv.__version__ and (v['mmcv_ops'] == 'cpu' or v['mmcv_ops'].startswith('cuda'))
    assert v['openmmlab_line'] == check_one_line() in ('official', 'onedl')
    assert v['torch'] == torch.__version__
    # the command reproduces the run: this tool with the config and the options it was given
    command = record['command']
    assert re.search(r'tools/benchmark_training\.py \S*\.py .*--iters ' + str(iters), command), command


@pytest.mark.slow
def test_upernet_inline_swin_t_trains_at_a_scaled_down_size(tmp_path):
    """The paper's UperNet InLine-Swin-T config, its own pipeline (0.5-2x resize, crops, photometric
    distortion) at 1/8 of the sizes, padding-aware off: two iterations, finite losses, a full record."""
    out = tmp_path / 'rec.json'
    record = training.main([UPERNET_T, '--iters', '2', '--warmup', '1', '--workers', '0', '--num-images',
                                      '4', '--scale-down', '8', '--padding-aware', 'off', '--work-dir',
                                      str(tmp_path), '--out', str(out)])
    _check_record(record, out, 2, 1)
    assert record['padding_aware'] is False and record['backbone']['arch'] == 'tiny'
    assert record['data']['sizes'] == [[64, 85], [85, 64]] and record['scale_down'] == 8
    assert {'decode.loss_ce', 'aux.loss_ce'} <= set(record['per_iter'][0]['losses'])
    assert record['distributed']['wrapped'] is False and record['total_batch'] == 2
    assert record['optim_wrapper'] == 'OptimWrapper'


@pytest.mark.slow
def test_mask_rcnn_inline_swin_t_trains_with_mmcv_roi_ops(tmp_path):
    """Mask R-CNN InLine-Swin-T 1x (multi-scale + crop pipeline at 1/16 size, padding-aware on as the config
    has it): one iteration runs RoIAlign from mmcv's compiled ops (the CPU build here) and gives mask loss."""
    out = tmp_path / 'rec.json'
    record = training.main([MASK_RCNN_T, '--iters', '1', '--warmup', '0', '--workers', '0',
                                      '--num-images', '2', '--batch-size', '1', '--scale-down', '16',
                                      '--work-dir', str(tmp_path), '--out', str(out)])
    _check_record(record, out, 1, 0)
    assert record['padding_aware'] is True
    assert record['data_preprocessor'] == 'inline_backbones.RegionDetDataPreprocessor'
    assert {'loss_rpn_cls', 'loss_cls', 'loss_bbox', 'loss_mask'} <= set(record['per_iter'][0]['losses'])
    assert record['data']['format'] == 'coco' and record['data']['classes'] == 80


@pytest.mark.slow
def test_torchrun_launch_wraps_in_ddp_and_records_the_syncbn_choice(tmp_path):
    """torchrun --nproc_per_node 1 ... --launcher pytorch: MMDistributedDataParallel around the model, and
    (no GPU here) the SyncBN heads turned into BN under gloo, listed in the record."""
    config = tmp_path / 'mini_syncbn.py'
    config.write_text(f"_base_ = {MINI_UPERNET!r}\n"
                      "norm_cfg = dict(type='SyncBN', requires_grad=True)\n"
                      "model = dict(decode_head=dict(norm_cfg=norm_cfg), auxiliary_head=dict(norm_cfg=norm_cfg))\n")
    out = tmp_path / 'ddp.json'
    result = subprocess.run([osp.join(osp.dirname(sys.executable), 'torchrun'), '--nproc_per_node', '1',
                             '--master_port', '29531', TOOL, str(config),
                             '--launcher', 'pytorch', '--iters', '2', '--warmup', '1', '--workers', '0',
                             '--num-images', '4', '--scale-down', '4', '--work-dir', str(tmp_path / 'w'),
                             '--out', str(out)],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    record = json.loads(out.read_text())
    dist = record['distributed']
    assert dist['launcher'] == 'pytorch' and dist['world_size'] == 1 and dist['backend'] == 'gloo'
    assert dist['wrapped'] is True and dist['wrapper'] == 'MMDistributedDataParallel'
    assert dist['syncbn_to_bn'] == ['model.decode_head.norm_cfg', 'model.auxiliary_head.norm_cfg']
    assert dist['syncbn_layers'] == 0 and record['losses_finite'] is True
    assert record['data']['sizes'] == [[64, 64]] and record['data']['classes'] == 5   # the config's 256^2 / 4


def test_backbone_only_times_forward_and_backward(tmp_path):
    out = tmp_path / 'bb.json'
    record = training.main([MINI_UPERNET, '--backbone-only', '--iters', '2', '--warmup', '1',
                                      '--scale-down', '4', '--batch-size', '1', '--work-dir', str(tmp_path),
                                      '--out', str(out)])
    assert record['kind'] == 'backbone' and record['input_size'] == [64, 64] and record['batch_size'] == 1
    assert record['median_step_s'] == record['per_iter'][1]['step_s'] and record['losses_finite']
    assert json.loads(out.read_text())['median_step_s'] == record['median_step_s']
