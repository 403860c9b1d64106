"""Every detection config builds on CPU and runs a training and an inference step at reduced size (the
InLine-PVT-S/M/L ones, the T config with deeper stages, an inference step)."""
import glob
import os.path as osp

import pytest
import torch
from helpers import build_detector

pytest.importorskip('mmdet')
from mmdet.testing import demo_mm_inputs  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.hub import get_config  # noqa: E402

from inline_backbones.checkpoints.released import RELEASED_CHECKPOINTS  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
# The fine-tuning example is the 1x Swin-T model with other classes and data: tests/test_finetune.py checks it.
# Every config's recipe values are checked in tests/test_recipes.py.
CONFIGS = sorted(c for c in glob.glob(osp.join(ROOT, 'mmdet_configs', '*.py')) if 'finetune' not in c)


def assert_backbone_learns(model):
    """After one backward pass every backbone parameter has a finite, non-zero gradient."""
    for name, p in model.backbone.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_twenty_nine_coco_configs_and_the_embedded_one():
    names = [osp.basename(c) for c in CONFIGS]
    assert len([n for n in names if n.endswith('_coco.py')]) == 29
    for model in ('mask-rcnn', 'retinanet'):
        for size in 'tsml':
            assert f'{model}_inline-pvt-{size}_fpn_1x_coco.py' in names
    for model in ('mask-rcnn', 'cascade-mask-rcnn'):
        for size in 'tsb':
            for sched in ('1x', '3x'):
                assert f'{model}_inline-swin-{size}_fpn_ms-crop-{sched}_coco.py' in names
                if model == 'mask-rcnn' or sched == '3x':
                    assert f'{model}_inline-cswin-{size}_fpn_ms-crop-{sched}_coco.py' in names


def infers_only(config):
    """Configs whose model is another config's with deeper or wider stages (InLine-PVT-S/M/L, InLine-CSwin-S/B) or
    only another schedule (the 3x ones whose 1x twins train here; InLine-CSwin-T's Cascade has no 1x twin and
    trains): they infer a step only."""
    name = osp.basename(config)
    return any(f'inline-pvt-{size}_' in name for size in 'sml') or any(f'inline-cswin-{s}_' in name for s in 'sb') or (
        '-3x_' in config and config.replace('-3x_', '-1x_') in CONFIGS)


@pytest.mark.parametrize('config', CONFIGS, ids=osp.basename)
def test_config_trains_and_infers_one_step(config):
    cfg = Config.fromfile(config)
    if 'inline-pvt' in config:     # the PVT protocol (tests/test_recipes.py): mmdet's own preprocessor
        assert cfg.model.backbone.type == 'inline_backbones.InLinePVT'
        assert cfg.model.backbone.init_cfg.checkpoint in RELEASED_CHECKPOINTS.values()
    else:
        assert cfg.custom_imports['imports'] == ['inline_backbones', 'inline_backbones.openmmlab.det_preprocessor']
        assert cfg.model.backbone.padding_aware
        assert cfg.model.data_preprocessor.type.endswith('RegionDetDataPreprocessor')
        family = 'CSwin' if 'inline-cswin' in config else 'Swin'
        assert cfg.model.backbone.type == f'inline_backbones.InLine{family}Transformer'
    if config.endswith('_coco.py') and ('inline-swin' in config or 'inline-cswin' in config):
        assert cfg.optim_wrapper.optimizer.type == 'AdamW' and cfg.optim_wrapper.optimizer.lr == 1e-4
        assert cfg.optim_wrapper.optimizer.weight_decay == 0.05
        assert cfg.optim_wrapper.paramwise_cfg.custom_keys['norm'] == dict(decay_mult=0.)
        assert 'RandomChoice' in [t['type'] for t in cfg.train_dataloader.dataset.pipeline]
        assert cfg.model.backbone.init_cfg.checkpoint in RELEASED_CHECKPOINTS.values()
    if 'rpn_proposal' in cfg.model.train_cfg:
        cfg.model.train_cfg.rpn_proposal.max_per_img = 100   # fewer proposals: same code paths, faster test
        cfg.model.test_cfg.rpn.max_per_img = 100
    # Stochastic depth can drop a block's branch for the whole batch of 2, which zeroes its gradient
    # legitimately; the recipe's rates are checked in test_recipes.py.
    cfg.model.backbone.drop_path_rate = 0.
    model = build_detector(cfg)
    with_mask = 'roi_head' in cfg.model and 'mask_head' in cfg.model.roi_head
    num_classes = cfg.model.roi_head.mask_head.num_classes if with_mask else 80
    packed = demo_mm_inputs(batch_size=2, image_shapes=[(3, 160, 224), (3, 193, 257)], num_items=[3, 2],
                            num_classes=num_classes, with_mask=True)
    if not infers_only(config):   # InLine-PVT-S/M/L: the T model's code with deeper stages; they infer only
        model.train()
        data = model.data_preprocessor(packed, True)
        losses = model(**data, mode='loss')
        loss, _ = model.parse_losses(losses)
        assert torch.isfinite(loss)
        loss.backward()
        assert_backbone_learns(model)
        assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    model.eval()
    with torch.no_grad():
        results = model(**model.data_preprocessor(packed, False), mode='predict')
    assert len(results) == 2
    if with_mask:
        assert results[1].pred_instances.masks.shape[-2:] == (193, 257)


def test_mask_rcnn_tiny_params_match_swin_tiny():
    config = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py')
    ours = build_detector(Config.fromfile(config))
    swin = build_detector(get_config('mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'))
    ratio = n_params(ours) / n_params(swin)
    assert 0.97 < ratio < 1.03, (n_params(ours), n_params(swin))
    assert 47e6 < n_params(ours) < 50e6
