"""The resolved training recipe of every InLine-PVT COCO / ADE20K config (``Config.fromfile``, ``mmdet::`` /
``mmseg::`` bases resolved), pinned against the PVT protocol the paper's tables follow:

* Mask R-CNN 1x (PVT's and Agent-Attention's ``mask_rcnn_pvt_*_fpn_1x_coco.py``): AdamW lr 2e-4, wd 1e-4 on every
  parameter, 12 epochs, steps 8 and 11 (mmdet's 500-iteration warm-up from 0.001), 8 GPUs x 2 images, drop path
  0.1 for T/S/M and 0.2 for L, FPN in-channels 64-128-320-512;
* RetinaNet 1x (mmdet's ``pvt/retinanet_pvt-*_fpn_1x_coco.py``): AdamW lr 1e-4, wd 1e-4, the same schedule and
  batch, drop path 0.1 (mmdet's PVT default), FPN from stage 2 with extra convolutions on its input;
* Semantic FPN on ADE20K (PVT's ``fpn_pvt_*_ade20k_40k.py``): 512x512 crops, 40k iterations, 8 GPUs x 2 images,
  AdamW lr 2e-4, wd 1e-4, poly power 0.9 down to 0, no warm-up, drop path 0.1; nothing left of what mmseg's
  ResNet sem_fpn base ships (SGD 0.01, wd 5e-4, 160k, eta_min 1e-4, 4 images per GPU, ``pretrained``).

The configs only load here; tests/test_mmdet_configs.py and tests/test_mmseg_configs.py build each one and run it.
"""
import glob
import os.path as osp

import pytest
from mmengine.config import Config

from inline_backbones.released import PVT_ARCH_CHECKPOINTS, RELEASED_CHECKPOINTS

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
ARCHS = {'t': 'tiny', 's': 'small', 'm': 'medium', 'l': 'large'}
# The authors' README (LeapLabTHU/InLine): the Tsinghua cloud share of each released InLine-PVT checkpoint,
# written out here so that a wrong id in inline_backbones/released.py fails.
RELEASED_IDS = {'tiny': '90ac52b1555b401eb5e6', 'small': '1ab953b2479d433080a3',
                'medium': 'a72aec31e6084bc0a280', 'large': 'efd91318ba964f01b288'}
IMPORTS = dict(imports=['inline_backbones'], allow_failed_imports=False)
PVT_CHANNELS = [64, 128, 320, 512]

MASK_RCNN = {f'mask-rcnn_inline-pvt-{s}_fpn_1x_coco.py': (arch, 0.2 if s == 'l' else 0.1) for s, arch in ARCHS.items()}
RETINANET = {f'retinanet_inline-pvt-{s}_fpn_1x_coco.py': (arch, 0.1) for s, arch in ARCHS.items()}
SEM_FPN = {f'fpn_inline-pvt-{s}_8xb2-40k_ade20k-512x512.py': (arch, 0.1) for s, arch in ARCHS.items()}


def load(folder, name):
    return Config.fromfile(osp.join(ROOT, folder, name))


def plain(node):
    """``node`` as plain dicts and lists, without the ``_scope_`` keys mmengine adds to what a base defines."""
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items() if k != '_scope_'}
    if isinstance(node, (list, tuple)):
        return type(node)(plain(v) for v in node)
    return node


def pretrained_entries(node, path='model'):
    """Every ``pretrained`` key under ``node`` that holds something (a base's ResNet weights, for instance)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == 'pretrained' and value is not None:
                yield f'{path}.{key}', value
            yield from pretrained_entries(value, f'{path}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from pretrained_entries(value, f'{path}.{i}')


def assert_backbone(cfg, arch, drop_path):
    """Exactly our backbone: nothing of the base's ResNet (depth, norm_cfg, style, ...) left beside it."""
    assert cfg.custom_imports == IMPORTS
    assert plain(cfg.model.backbone) == dict(
        type='inline_backbones.InLinePVT', arch=arch, drop_path_rate=drop_path, out_indices=(0, 1, 2, 3),
        init_cfg=dict(type='Pretrained', checkpoint=f'https://cloud.tsinghua.edu.cn/f/{RELEASED_IDS[arch]}/?dl=1'))
    assert cfg.model.backbone.init_cfg.checkpoint == PVT_ARCH_CHECKPOINTS[arch]
    assert list(pretrained_entries(cfg.model)) == []


def assert_plain_adamw(cfg, lr):
    """fp32 AdamW with torch's default betas and weight decay 1e-4 on every parameter, no clipping (PVT's)."""
    assert cfg.optim_wrapper.type == 'OptimWrapper'          # --amp makes it AmpOptimWrapper
    assert plain(cfg.optim_wrapper.optimizer) == dict(type='AdamW', lr=lr, weight_decay=1e-4)
    assert 'paramwise_cfg' not in cfg.optim_wrapper
    assert cfg.optim_wrapper.get('clip_grad') is None


def assert_coco_1x(cfg):
    assert cfg.train_dataloader.batch_size == 2            # x 8 GPUs = 16
    assert plain(cfg.auto_scale_lr) == dict(enable=False, base_batch_size=16)
    assert cfg.train_cfg.max_epochs == 12
    assert plain(cfg.param_scheduler) == [
        dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
        dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1)]
    # Single-scale 1333x800 with flips; images are padded to a multiple of 32 (the backbone's total stride).
    assert [t.type for t in cfg.train_dataloader.dataset.pipeline][2:] == ['Resize', 'RandomFlip', 'PackDetInputs']
    assert (cfg.train_pipeline[2].scale, cfg.train_pipeline[2].keep_ratio) == ((1333, 800), True)
    preprocessor = cfg.model.data_preprocessor
    assert (preprocessor.mean, preprocessor.std) == ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375])
    assert preprocessor.bgr_to_rgb and preprocessor.pad_size_divisor == 32


def test_every_pvt_config_is_pinned_here():
    """The twelve configs, each checked below."""
    det = {osp.basename(p) for p in glob.glob(osp.join(ROOT, 'mmdet_configs', '*inline-pvt*'))}
    seg = {osp.basename(p) for p in glob.glob(osp.join(ROOT, 'mmseg_configs', '*inline-pvt*'))}
    assert det == set(MASK_RCNN) | set(RETINANET)
    assert seg == set(SEM_FPN)
    assert len(det) == 8 and len(seg) == 4


def test_released_pvt_links():
    assert PVT_ARCH_CHECKPOINTS == {arch: f'https://cloud.tsinghua.edu.cn/f/{id_}/?dl=1'
                                    for arch, id_ in RELEASED_IDS.items()}
    assert {RELEASED_CHECKPOINTS[f'inline_pvt_{arch[0]}'] for arch in RELEASED_IDS} == set(
        PVT_ARCH_CHECKPOINTS.values())


@pytest.mark.parametrize('name', sorted(MASK_RCNN))
def test_mask_rcnn_recipe(name):
    arch, drop_path = MASK_RCNN[name]
    cfg = load('mmdet_configs', name)
    assert cfg.model.type == 'MaskRCNN'
    assert_backbone(cfg, arch, drop_path)
    assert_plain_adamw(cfg, 2e-4)
    assert_coco_1x(cfg)
    assert plain(cfg.model.neck) == dict(type='FPN', in_channels=PVT_CHANNELS, out_channels=256, num_outs=5)
    assert cfg.model.roi_head.bbox_head.num_classes == cfg.model.roi_head.mask_head.num_classes == 80
    assert cfg.train_dataloader.dataset.pipeline[1].with_mask


@pytest.mark.parametrize('name', sorted(RETINANET))
def test_retinanet_recipe(name):
    arch, drop_path = RETINANET[name]
    cfg = load('mmdet_configs', name)
    assert cfg.model.type == 'RetinaNet'
    assert_backbone(cfg, arch, drop_path)
    assert_plain_adamw(cfg, 1e-4)
    assert_coco_1x(cfg)
    assert plain(cfg.model.neck) == dict(type='FPN', in_channels=PVT_CHANNELS, out_channels=256, start_level=1,
                                         add_extra_convs='on_input', num_outs=5)
    assert cfg.model.bbox_head.num_classes == 80


@pytest.mark.parametrize('name', sorted(SEM_FPN))
def test_semantic_fpn_recipe(name):
    arch, drop_path = SEM_FPN[name]
    cfg = load('mmseg_configs', name)
    assert cfg.model.type == 'EncoderDecoder'
    assert 'pretrained' not in cfg.model.backbone and cfg.model.pretrained is None
    assert_backbone(cfg, arch, drop_path)
    assert_plain_adamw(cfg, 2e-4)
    # No SGD left at the top level either (mmseg's schedule defines `optimizer` there and wraps it).
    assert plain(cfg.optimizer) == dict(type='AdamW', lr=2e-4, weight_decay=1e-4)
    assert cfg.train_dataloader.batch_size == 2            # x 8 GPUs = 16
    assert plain(cfg.param_scheduler) == [
        dict(type='PolyLR', eta_min=0.0, power=0.9, begin=0, end=40000, by_epoch=False)]
    assert plain(cfg.train_cfg) == dict(type='IterBasedTrainLoop', max_iters=40000, val_interval=4000)
    checkpoint = cfg.default_hooks.checkpoint
    assert (checkpoint.by_epoch, checkpoint.interval, checkpoint.max_keep_ckpts, checkpoint.save_best) == (
        False, 4000, 3, 'mIoU')
    assert plain(cfg.model.neck) == dict(type='FPN', in_channels=PVT_CHANNELS, out_channels=256, num_outs=4)
    head = cfg.model.decode_head
    assert (head.type, head.in_channels, head.feature_strides, head.num_classes) == (
        'FPNHead', [256] * 4, [4, 8, 16, 32], 150)
    assert 'auxiliary_head' not in cfg.model
    assert cfg.crop_size == (512, 512) and cfg.model.data_preprocessor.size == (512, 512)
    crop = [t for t in cfg.train_dataloader.dataset.pipeline if t.type == 'RandomCrop']
    assert [t.crop_size for t in crop] == [(512, 512)]
    assert cfg.train_dataloader.dataset.type == 'ADE20KDataset'
