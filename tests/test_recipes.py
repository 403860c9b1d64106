"""The resolved training recipe of every COCO / ADE20K config (``Config.fromfile``, ``mmdet::`` /
``mmseg::`` bases resolved), pinned against the Swin recipes the README compares with:

* detection: SwinTransformer/Swin-Transformer-Object-Detection ``configs/swin/*`` (mmdet 2.x): AdamW
  lr 1e-4, wd 0.05, 2 images x 8 GPUs, linear warm-up 500 iterations from 0.001 (``schedule_1x.py``,
  inherited by its 1x and 3x configs), drop path Mask R-CNN Swin-T 1x 0.1 / 3x 0.2, Swin-S 3x 0.2;
  Cascade Swin-T 1x 0.0 / 3x 0.2, Swin-S 3x 0.2, Swin-B 3x 0.3. No Swin run exists for S/B 1x and for
  Mask R-CNN Swin-B: ours take the 3x / Cascade-B value (stated in the README);
* segmentation: mmseg's ``swin/swin-*-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py`` (= Swin's
  ``upernet_swin_*_512x512_160k_ade20k.py``): AdamW lr 6e-5, wd 0.01, drop path 0.3 for T/S/B, warm-up
  1500 iterations from 1e-6, poly decay (power 1) to 0 at 160k.
"""
import copy
import glob
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config

from inline_backbones.released import (
    PVT_ARCH_CHECKPOINTS,
    RELEASED_CHECKPOINTS,
    SWIN_ARCH_CHECKPOINTS,
    arch_checkpoints,
)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

# config -> (arch, drop path, epochs, LR steps)
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
    """``node`` as plain dicts, without the ``_scope_`` keys mmengine adds to what a ``mmdet::`` base defines."""
    if isinstance(node, dict):
        return {k: plain(v) for k, v in node.items() if k != '_scope_'}
    return [plain(v) for v in node] if isinstance(node, list) else node


def swin_configs(folder, pattern):
    """The InLine-Swin configs of ``folder`` (the InLine-PVT ones are pinned in tests/test_pvt_recipes.py)."""
    return {osp.basename(p) for p in glob.glob(osp.join(ROOT, folder, pattern)) if 'inline-pvt' not in p}


def test_every_coco_and_ade20k_config_is_pinned_here():
    """So that each one is checked above, including its released link."""
    assert swin_configs('mmdet_configs', '*_coco.py') == set(DETECTION)
    assert swin_configs('mmseg_configs', '*ade20k*.py') == set(SEGMENTATION)


def test_released_links_have_the_share_shape():
    assert len(set(RELEASED_CHECKPOINTS.values())) == len(RELEASED_CHECKPOINTS) == 7
    for url in RELEASED_CHECKPOINTS.values():
        assert re.fullmatch(r'https://cloud\.tsinghua\.edu\.cn/f/[0-9a-f]{20}/\?dl=1', url), url
    assert SWIN_ARCH_CHECKPOINTS['tiny'] == 'https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1'
    for family, sizes in (('swin', ('tiny', 'small', 'base')), ('pvt', ('tiny', 'small', 'medium', 'large'))):
        assert arch_checkpoints(f'inline_{family}_') == {
            size: RELEASED_CHECKPOINTS[f'inline_{family}_{size[0]}'] for size in sizes}
    assert PVT_ARCH_CHECKPOINTS == arch_checkpoints('inline_pvt_')


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
    from inline_backbones.task_tools import syncbn_to_bn_options

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
