"""Every segmentation config builds on CPU and runs a training and an inference step at reduced size (the
InLine-PVT-S/M/L ones, the T config with deeper stages, an inference step)."""
import glob
import os.path as osp

import pytest
import torch
from helpers import build_segmentor, demo_batch

pytest.importorskip('mmseg')
from mmengine.config import Config  # noqa: E402
from mmengine.hub import get_config  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
# Every config's recipe values are checked in tests/test_recipes.py.
CONFIGS = sorted(glob.glob(osp.join(ROOT, 'mmseg_configs', '*.py')))


def test_ade20k_configs_and_the_embedded_one():
    names = [osp.basename(c) for c in CONFIGS]
    for size in ('tiny', 'small', 'base'):
        assert f'inline-swin-{size}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py' in names
        assert f'inline-cswin-{size}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py' in names
    for size in 'tsml':
        assert f'fpn_inline-pvt-{size}_8xb2-40k_ade20k-512x512.py' in names


def infers_only(config):
    """InLine-PVT-S/M/L and InLine-CSwin-S/B configs (the T config's code, recipe and heads with deeper or wider
    stages)."""
    name = osp.basename(config)
    return any(f'inline-pvt-{size}_' in name for size in 'sml') or any(f'inline-cswin-{s}-' in name
                                                                       for s in ('small', 'base'))


@pytest.mark.parametrize('config', CONFIGS, ids=osp.basename)
def test_config_trains_and_infers_one_step(config):
    cfg = Config.fromfile(config)
    pvt = 'inline-pvt' in config    # the PVT protocol (tests/test_recipes.py): mmseg's own preprocessor
    if pvt:
        assert cfg.model.backbone.type == 'inline_backbones.InLinePVT'
    else:
        assert cfg.custom_imports['imports'][:2] == ['inline_backbones', 'inline_backbones.openmmlab.seg_preprocessor']
        assert cfg.model.backbone.padding_aware
        assert cfg.model.data_preprocessor.type.endswith('RegionSegDataPreProcessor')
        family = 'CSwin' if 'inline-cswin' in config else 'Swin'
        assert cfg.model.backbone.type == f'inline_backbones.InLine{family}Transformer'
    if 'ade20k' in config and not pvt:
        opt = cfg.optim_wrapper.optimizer
        assert (opt.type, opt.lr, opt.betas, opt.weight_decay) == ('AdamW', 6e-5, (0.9, 0.999), 0.01)
        assert [s.type for s in cfg.param_scheduler] == ['LinearLR', 'PolyLR'] and cfg.param_scheduler[0].end == 1500
        assert cfg.train_cfg.max_iters == 160000 and cfg.train_dataloader.batch_size == 2
        assert cfg.model.auxiliary_head.type == 'FCNHead' and 'tta_pipeline' in cfg
    # Stochastic depth can drop a block's branch for the whole batch, which zeroes its gradient
    # legitimately; the recipe's rates are checked in test_recipes.py.
    cfg.model.backbone.drop_path_rate = 0.
    if 'ade20k' in config:
        # The ADE20K preprocessor pads to the 512x512 crop; the test runs at the demo images' own size (the
        # same code paths; the recipe's values are checked in test_recipes.py).
        cfg.model.data_preprocessor.size = (128, 160)
    model = build_segmentor(cfg)
    if not infers_only(config):   # InLine-PVT-S/M/L: the T model's code with deeper stages; they infer only
        batch = demo_batch(cfg.model.decode_head.num_classes)
        model.train()
        data = model.data_preprocessor(batch, True)
        if 'shapes' in config:   # class-weighted loss on a padded batch: ignored (255) label pixels are fine
            assert cfg.model.decode_head.loss_decode.type == 'inline_backbones.ClassWeightedCrossEntropyLoss'
            assert (data['data_samples'][1].gt_sem_seg.data == 255).any()
        loss, _ = model.parse_losses(model(**data, mode='loss'))
        assert torch.isfinite(loss)
        loss.backward()
        for name, p in model.named_parameters():     # every parameter of UperNet + FCN / Semantic FPN takes part
            assert p.grad is not None, name
            assert torch.isfinite(p.grad).all(), name
        assert all(p.grad.abs().sum() > 0 for p in model.backbone.parameters())
    model.eval()
    single = demo_batch(cfg.model.decode_head.num_classes, shapes=((3, 97, 131),))  # one size per test batch
    with torch.no_grad():
        results = model(**model.data_preprocessor(single, False), mode='predict')
    assert results[0].pred_sem_seg.data.shape[-2:] == (97, 131)


def test_upernet_tiny_params_match_swin_tiny():
    def n_params(model):
        return sum(p.numel() for p in model.parameters())

    ours = build_segmentor(Config.fromfile(osp.join(
        ROOT, 'mmseg_configs', 'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py')))
    swin = build_segmentor(get_config(
        'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'))
    assert 0.97 < n_params(ours) / n_params(swin) < 1.03, (n_params(ours), n_params(swin))
    assert 59e6 < n_params(ours) < 62e6
