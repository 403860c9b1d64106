"""The resolved training recipe of every COCO / ADE20K config (``Config.fromfile``, ``mmdet::`` /
``mmseg::`` bases resolved), pinned against the recipes each family's paper follows. The configs only load here;
tests/test_mmdet_configs.py and tests/test_mmseg_configs.py build each one and run it.

InLine-Swin, against the Swin recipes the README compares with:

* detection: SwinTransformer/Swin-Transformer-Object-Detection ``configs/swin/*`` (mmdet 2.x): AdamW
  lr 1e-4, wd 0.05, 2 images x 8 GPUs, linear warm-up 500 iterations from 0.001 (``schedule_1x.py``,
  inherited by its 1x and 3x configs), drop path Mask R-CNN Swin-T 1x 0.1 / 3x 0.2, Swin-S 3x 0.2;
  Cascade Swin-T 1x 0.0 / 3x 0.2, Swin-S 3x 0.2, Swin-B 3x 0.3. No Swin run exists for S/B 1x and for
  Mask R-CNN Swin-B: ours take the 3x / Cascade-B value (stated in the README);
* segmentation: mmseg's ``swin/swin-*-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py`` (= Swin's
  ``upernet_swin_*_512x512_160k_ade20k.py``): AdamW lr 6e-5, wd 0.01, drop path 0.3 for T/S/B, warm-up
  1500 iterations from 1e-6, poly decay (power 1) to 0 at 160k.

InLine-CSwin, against CSWin's recipes (microsoft/CSWin-Transformer):

* segmentation: ``segmentation/configs/cswin/upernet_cswin_{tiny,small,base}.py``: mmseg's Swin recipe above with
  drop path 0.3 / 0.4 / 0.6 for T / S / B;
* detection: CSWin released no configs and its paper follows Swin's schedules: the InLine-Swin configs of the same
  kind, schedule and size (their drop path), with the CSwin backbone and its widths (64-128-256-512 for T/S,
  96-192-384-768 for B).

InLine-PVT, against the PVT protocol the paper's tables follow:

* Mask R-CNN 1x (PVT's and Agent-Attention's ``mask_rcnn_pvt_*_fpn_1x_coco.py``): AdamW lr 2e-4, wd 1e-4 on every
  parameter, 12 epochs, steps 8 and 11 (mmdet's 500-iteration warm-up from 0.001), 8 GPUs x 2 images, drop path
  0.1 for T/S/M and 0.2 for L, FPN in-channels 64-128-320-512;
* RetinaNet 1x (mmdet's ``pvt/retinanet_pvt-*_fpn_1x_coco.py``): AdamW lr 1e-4, wd 1e-4, the same schedule and
  batch, drop path 0.1 (mmdet's PVT default), FPN from stage 2 with extra convolutions on its input;
* Semantic FPN on ADE20K (PVT's ``fpn_pvt_*_ade20k_40k.py``): 512x512 crops, 40k iterations, 8 GPUs x 2 images,
  AdamW lr 2e-4, wd 1e-4, poly power 0.9 down to 0, no warm-up, drop path 0.1; nothing left of what mmseg's
  ResNet sem_fpn base ships (SGD 0.01, wd 5e-4, 160k, eta_min 1e-4, 4 images per GPU, ``pretrained``).
"""
import copy
import glob
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config

from inline_backbones.checkpoints.released import (
    CSWIN_ARCH_CHECKPOINTS,
    PVT_ARCH_CHECKPOINTS,
    RELEASED_CHECKPOINTS,
    SWIN_ARCH_CHECKPOINTS,
    arch_checkpoints,
)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

# InLine-Swin: config -> (arch, drop path, epochs, LR steps)
DETECTION = {
    'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py': ('tiny', 0.1, 12, [8, 11]),
    'mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py': ('tiny', 0.2, 36, [27, 33]),
    'mask-rcnn_inline-swin-s_fpn_ms-crop-1x_coco.py': ('small', 0.2, 12, [8, 11]),
    'mask-rcnn_inline-swin-s_fpn_ms-crop-3x_coco.py': ('small', 0.2, 36, [27, 33]),
    'mask-rcnn_inline-swin-b_fpn_ms-crop-1x_coco.py': ('base', 0.3, 12, [8, 11]),
    'mask-rcnn_inline-swin-b_fpn_ms-crop-3x_coco.py': ('base', 0.3, 36, [27, 33]),
    'cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py': ('tiny', 0.0, 12, [8, 11]),
    'cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-3x_coco.py': ('tiny', 0.2, 36, [27, 33]),
    'cascade-mask-rcnn_inline-swin-s_fpn_ms-crop-1x_coco.py': ('small', 0.2, 12, [8, 11]),
    'cascade-mask-rcnn_inline-swin-s_fpn_ms-crop-3x_coco.py': ('small', 0.2, 36, [27, 33]),
    'cascade-mask-rcnn_inline-swin-b_fpn_ms-crop-1x_coco.py': ('base', 0.3, 12, [8, 11]),
    'cascade-mask-rcnn_inline-swin-b_fpn_ms-crop-3x_coco.py': ('base', 0.3, 36, [27, 33]),
}
SEGMENTATION = {
    'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py': 'tiny',
    'inline-swin-small-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py': 'small',
    'inline-swin-base-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py': 'base',
}

# InLine-CSwin: config -> (arch, drop path, epochs, LR steps); ADE20K config -> (arch, drop path)
CSWIN_SIZES = {'t': 'tiny', 's': 'small', 'b': 'base'}
CSWIN_DETECTION = {name.replace('inline-swin', 'inline-cswin'): spec for name, spec in DETECTION.items()
                   if not name.startswith('cascade') or '3x' in name}
CSWIN_SEGMENTATION = {f'inline-cswin-{arch}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py': (arch, drop_path)
                      for arch, drop_path in (('tiny', 0.3), ('small', 0.4), ('base', 0.6))}
CSWIN_WIDTHS = {'tiny': [64, 128, 256, 512], 'small': [64, 128, 256, 512], 'base': [96, 192, 384, 768]}
# The authors' README: the Tsinghua cloud share of each released InLine-CSwin checkpoint.
CSWIN_IDS = {'tiny': '49fa2ecc543647c4b970', 'small': '59f4e65f776f4052b93c', 'base': '91e17121df284ae38521'}

ARCHS = {'t': 'tiny', 's': 'small', 'm': 'medium', 'l': 'large'}
# The authors' README (LeapLabTHU/InLine): the Tsinghua cloud share of each released InLine-PVT checkpoint,
# written out here so that a wrong id in inline_backbones/checkpoints/released.py fails.
RELEASED_IDS = {'tiny': '90ac52b1555b401eb5e6', 'small': '1ab953b2479d433080a3',
                'medium': 'a72aec31e6084bc0a280', 'large': 'efd91318ba964f01b288'}
IMPORTS = dict(imports=['inline_backbones'], allow_failed_imports=False)
PVT_CHANNELS = [64, 128, 320, 512]
# InLine-PVT: config -> (arch, drop path)
MASK_RCNN = {f'mask-rcnn_inline-pvt-{s}_fpn_1x_coco.py': (arch, 0.2 if s == 'l' else 0.1) for s, arch in ARCHS.items()}
RETINANET = {f'retinanet_inline-pvt-{s}_fpn_1x_coco.py': (arch, 0.1) for s, arch in ARCHS.items()}
SEM_FPN = {f'fpn_inline-pvt-{s}_8xb2-40k_ade20k-512x512.py': (arch, 0.1) for s, arch in ARCHS.items()}


# Parameters out of weight decay (the configs' comment gives the reasons): norms, Swin blocks' relative position
# bias tables and the InLine local residual's kernel generator (weights and biases).
NO_DECAY_KEYS = {key: dict(decay_mult=0.) for key in ('relative_position_bias_table', 'norm', 'attn.residual')}


def assert_weight_decay_applied(cfg, base_wd):
    """The optimizer mmengine builds from the config for a small InLine-Swin (layout IIIS: InLine and Swin
    blocks) plus a neck gives exactly the norms, the bias tables and ``attn.residual`` no weight decay."""
    from mmengine.optim import build_optim_wrapper

    from inline_backbones import InLineSwinTransformer

    model = torch.nn.Module()
    model.backbone = InLineSwinTransformer(arch=dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[1, 2, 2, 4]),
                                           attn_type='IIIS')
    model.neck = torch.nn.Conv2d(128, 8, 1)
    wrapper = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    names = {id(p): n for n, p in model.named_parameters()}
    decay = {names[id(p)]: group['weight_decay'] for group in wrapper.optimizer.param_groups for p in group['params']}
    assert set(decay) == set(names.values())
    no_decay = {n for n, wd in decay.items() if wd == 0}
    assert all(wd == base_wd for wd in decay.values() if wd != 0)
    no_decay_keys = ('.norm', 'relative_position_bias_table', '.residual.')
    assert no_decay == {n for n in decay if any(k in n for k in no_decay_keys)}
    for name in ('backbone.layers.0.blocks.0.attn.residual.2.bias', 'backbone.layers.0.blocks.0.attn.residual.0.weight',
                 'backbone.layers.0.blocks.0.norm1.weight', 'backbone.norm0.bias',
                 'backbone.layers.3.blocks.0.attn.relative_position_bias_table'):
        assert decay[name] == 0, name
    for name in ('backbone.layers.0.blocks.0.attn.qkv.weight', 'backbone.layers.0.blocks.0.attn.qkv.bias',
                 'backbone.patch_embed.proj.weight', 'neck.weight', 'neck.bias'):
        assert decay[name] == base_wd, name


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


def assert_pvt_backbone(cfg, arch, drop_path):
    """Exactly our InLine-PVT backbone: nothing of the base's ResNet (depth, norm_cfg, style, ...) left beside it."""
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


def configs(folder, pattern):
    """The names of ``folder``'s configs matching ``pattern``."""
    return {osp.basename(p) for p in glob.glob(osp.join(ROOT, folder, pattern))}


def test_every_coco_and_ade20k_config_is_pinned_here():
    """So that each one is checked below, including its released link: the InLine-Swin configs, and the twelve
    InLine-PVT ones."""
    assert {n for n in configs('mmdet_configs', '*inline-swin*_coco.py')} == set(DETECTION)
    assert {n for n in configs('mmseg_configs', '*inline-swin*ade20k*.py')} == set(SEGMENTATION)
    assert configs('mmdet_configs', '*inline-cswin*') == set(CSWIN_DETECTION) and len(CSWIN_DETECTION) == 9
    assert configs('mmseg_configs', '*inline-cswin*') == set(CSWIN_SEGMENTATION)
    assert {n for n in configs('mmdet_configs', '*_coco.py') if 'finetune' not in n} == (
        set(DETECTION) | set(CSWIN_DETECTION) | set(MASK_RCNN) | set(RETINANET))
    det, seg = configs('mmdet_configs', '*inline-pvt*'), configs('mmseg_configs', '*inline-pvt*')
    assert det == set(MASK_RCNN) | set(RETINANET)
    assert seg == set(SEM_FPN)
    assert len(det) == 8 and len(seg) == 4


def test_released_links_have_the_share_shape_and_the_authors_ids():
    assert len(set(RELEASED_CHECKPOINTS.values())) == len(RELEASED_CHECKPOINTS) == 16   # InLine 13, FLatten-Swin 3
    for url in RELEASED_CHECKPOINTS.values():
        assert re.fullmatch(r'https://cloud\.tsinghua\.edu\.cn/f/[0-9a-f]{20}/\?dl=1', url), url
    assert SWIN_ARCH_CHECKPOINTS['tiny'] == 'https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1'
    for family, sizes in (('swin', ('tiny', 'small', 'base')), ('pvt', ('tiny', 'small', 'medium', 'large'))):
        assert arch_checkpoints(f'inline_{family}_') == {
            size: RELEASED_CHECKPOINTS[f'inline_{family}_{size[0]}'] for size in sizes}
    assert PVT_ARCH_CHECKPOINTS == arch_checkpoints('inline_pvt_')
    assert PVT_ARCH_CHECKPOINTS == {arch: f'https://cloud.tsinghua.edu.cn/f/{id_}/?dl=1'
                                    for arch, id_ in RELEASED_IDS.items()}
    assert {RELEASED_CHECKPOINTS[f'inline_pvt_{arch[0]}'] for arch in RELEASED_IDS} == set(
        PVT_ARCH_CHECKPOINTS.values())
    assert CSWIN_ARCH_CHECKPOINTS == arch_checkpoints('inline_cswin_') == {
        arch: f'https://cloud.tsinghua.edu.cn/f/{id_}/?dl=1' for arch, id_ in CSWIN_IDS.items()}


@pytest.mark.parametrize('name', sorted(CSWIN_DETECTION))
def test_cswin_detection_recipe(name):
    """The InLine-Swin config of the same kind, schedule and size, with the InLine-CSwin backbone written whole."""
    arch, drop_path, epochs, steps = CSWIN_DETECTION[name]
    cfg = load('mmdet_configs', name)
    swin = load('mmdet_configs', name.replace('inline-cswin', 'inline-swin'))
    assert plain(cfg.model.backbone) == dict(
        type='inline_backbones.InLineCSwinTransformer', padding_aware=True, arch=arch, drop_path_rate=drop_path,
        out_indices=(0, 1, 2, 3), with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=CSWIN_ARCH_CHECKPOINTS[arch]))
    assert cfg.model.neck.in_channels == CSWIN_WIDTHS[arch]
    mine, theirs = plain(cfg.to_dict()), plain(swin.to_dict())
    for c in (mine, theirs):
        del c['model']['backbone'], c['model']['neck']['in_channels'], c['pretrained']
    assert mine == theirs
    assert (cfg.train_cfg.max_epochs, cfg.param_scheduler[1].milestones) == (epochs, steps)


@pytest.mark.parametrize('name', sorted(CSWIN_SEGMENTATION))
def test_cswin_segmentation_recipe(name):
    """CSWin's UperNet recipe: the InLine-Swin-T config's with CSWin's drop path and the CSwin backbone whole."""
    arch, drop_path = CSWIN_SEGMENTATION[name]
    cfg = load('mmseg_configs', name)
    swin = load('mmseg_configs', 'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py')
    assert plain(cfg.model.backbone) == dict(
        type='inline_backbones.InLineCSwinTransformer', padding_aware=True, arch=arch, drop_path_rate=drop_path,
        out_indices=(0, 1, 2, 3), with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=CSWIN_ARCH_CHECKPOINTS[arch]))
    assert cfg.model.decode_head.in_channels == CSWIN_WIDTHS[arch]
    assert cfg.model.auxiliary_head.in_channels == CSWIN_WIDTHS[arch][2]
    mine, theirs = plain(cfg.to_dict()), plain(swin.to_dict())
    for c in (mine, theirs):
        del c['model']['backbone'], c['model']['decode_head']['in_channels'], c['pretrained']
        del c['model']['auxiliary_head']['in_channels']
    assert mine == theirs


@pytest.mark.parametrize('name', sorted(DETECTION))
def test_detection_recipe(name):
    arch, drop_path, epochs, steps = DETECTION[name]
    cfg = load('mmdet_configs', name)
    backbone = cfg.model.backbone
    assert (backbone.arch, backbone.drop_path_rate) == (arch, drop_path)
    assert plain(backbone.init_cfg) == dict(type='Pretrained', checkpoint=SWIN_ARCH_CHECKPOINTS[arch])
    assert cfg.optim_wrapper.type == 'OptimWrapper'        # fp32 by default; --amp makes it AmpOptimWrapper
    assert plain(cfg.optim_wrapper.optimizer) == dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05)
    custom_keys = plain(cfg.optim_wrapper.paramwise_cfg.custom_keys)
    custom_keys.pop('absolute_pos_embed', None)      # Swin's key, from mmdet's base: matches no parameter here
    assert custom_keys == NO_DECAY_KEYS
    assert_weight_decay_applied(cfg, 0.05)
    assert cfg.train_dataloader.batch_size == 2
    assert plain(cfg.auto_scale_lr) == dict(enable=False, base_batch_size=16)
    assert cfg.train_cfg.max_epochs == epochs
    warmup, steps_cfg = plain(cfg.param_scheduler)
    assert warmup == dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500)
    assert steps_cfg == dict(type='MultiStepLR', begin=0, end=epochs, by_epoch=True, milestones=steps, gamma=0.1)
    assert plain(cfg.default_hooks.checkpoint) == dict(type='CheckpointHook', interval=1, max_keep_ckpts=3,
                                                save_best='coco/bbox_mAP', rule='greater')
    if name.startswith('cascade'):
        assert [h.norm_cfg.type for h in cfg.model.roi_head.bbox_head] == ['SyncBN'] * 3   # as Swin's


@pytest.mark.parametrize('name', sorted(SEGMENTATION))
def test_segmentation_recipe(name):
    cfg = load('mmseg_configs', name)
    arch = SEGMENTATION[name]
    assert (cfg.model.backbone.arch, cfg.model.backbone.drop_path_rate) == (arch, 0.3)
    assert plain(cfg.model.backbone.init_cfg) == dict(type='Pretrained', checkpoint=SWIN_ARCH_CHECKPOINTS[arch])
    assert cfg.optim_wrapper.type == 'OptimWrapper'
    assert plain(cfg.optim_wrapper.optimizer) == dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.01)
    custom_keys = plain(cfg.optim_wrapper.paramwise_cfg.custom_keys)
    custom_keys.pop('absolute_pos_embed', None)
    assert custom_keys == NO_DECAY_KEYS
    assert_weight_decay_applied(cfg, 0.01)
    assert cfg.train_dataloader.batch_size == 2
    assert cfg.train_cfg.max_iters == 160000
    warmup, poly = plain(cfg.param_scheduler)
    assert warmup == dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500)
    assert poly == dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False)
    checkpoint = cfg.default_hooks.checkpoint
    assert (checkpoint.interval, checkpoint.max_keep_ckpts, checkpoint.save_best, checkpoint.rule) == (
        16000, 3, 'mIoU', 'greater')
    assert cfg.model.decode_head.norm_cfg.type == 'SyncBN'


@pytest.mark.parametrize('folder, name, paths', [
    ('mmdet_configs', 'cascade-mask-rcnn_inline-swin-b_fpn_ms-crop-3x_coco.py',
     [f'model.roi_head.bbox_head.{i}.norm_cfg' for i in range(3)]),
    ('mmseg_configs', 'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
     ['model.decode_head.norm_cfg', 'model.auxiliary_head.norm_cfg']),
    ('mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py', []),
])
def test_cpu_processes_get_bn_for_every_syncbn(folder, name, paths):
    """tools/train.py's CPU multi-process path: the --cfg-options it adds leave no SyncBN in the model."""
    from inline_backbones.openmmlab.task_tools import syncbn_to_bn_options

    cfg = load(folder, name)
    options = syncbn_to_bn_options(cfg.model)
    assert options == [f'{path}.type=BN' for path in paths]
    cfg.merge_from_dict(dict(opt.split('=') for opt in options))
    assert syncbn_to_bn_options(cfg.model) == []
    for path in paths:
        node = cfg
        for key in path.split('.'):
            node = node[int(key)] if key.isdigit() else node[key]
        assert plain(node) == dict(type='BN', requires_grad=True)


def pvt_detector(name, table, detector, lr):
    """The config ``name`` of ``table`` (config -> arch, drop path), checked to be ``detector`` on the InLine-PVT
    backbone with plain AdamW at ``lr`` and the COCO 1x schedule."""
    arch, drop_path = table[name]
    cfg = load('mmdet_configs', name)
    assert cfg.model.type == detector
    assert_pvt_backbone(cfg, arch, drop_path)
    assert_plain_adamw(cfg, lr)
    assert_coco_1x(cfg)
    return cfg


@pytest.mark.parametrize('name', sorted(MASK_RCNN))
def test_mask_rcnn_recipe(name):
    cfg = pvt_detector(name, MASK_RCNN, 'MaskRCNN', 2e-4)
    assert plain(cfg.model.neck) == dict(type='FPN', in_channels=PVT_CHANNELS, out_channels=256, num_outs=5)
    assert cfg.model.roi_head.bbox_head.num_classes == cfg.model.roi_head.mask_head.num_classes == 80
    assert cfg.train_dataloader.dataset.pipeline[1].with_mask


@pytest.mark.parametrize('name', sorted(RETINANET))
def test_retinanet_recipe(name):
    cfg = pvt_detector(name, RETINANET, 'RetinaNet', 1e-4)
    assert plain(cfg.model.neck) == dict(type='FPN', in_channels=PVT_CHANNELS, out_channels=256, start_level=1,
                                         add_extra_convs='on_input', num_outs=5)
    assert cfg.model.bbox_head.num_classes == 80


@pytest.mark.parametrize('name', sorted(SEM_FPN))
def test_semantic_fpn_recipe(name):
    arch, drop_path = SEM_FPN[name]
    cfg = load('mmseg_configs', name)
    assert cfg.model.type == 'EncoderDecoder'
    assert 'pretrained' not in cfg.model.backbone and cfg.model.pretrained is None
    assert_pvt_backbone(cfg, arch, drop_path)
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
