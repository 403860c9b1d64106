"""``tools/misc/inline_recipe.py``: the InLine child config of every Swin and PVT v1 recipe of the installed mmdet and
mmseg keeps everything of the recipe but the backbone (and its preprocessor, optimizer key, imports), builds the
InLine preset of the recipe's size with the released checkpoint, and trains: one recipe per kind (two-stage,
DETR-like, Mask2Former, an mmseg decode head) runs a training step from the written config."""
import os
import os.path as osp

import pytest
import torch
from helpers import PVT_SIZES, SWIN_SIZES, build_detector, build_segmentor, recipe_id, upstream_recipe_files
from tool_modules import load_tool

from inline_backbones.checkpoints.released import PVT_ARCH_CHECKPOINTS, SWIN_ARCH_CHECKPOINTS
from inline_backbones.cli import run_tool
from inline_backbones.models.upstream_args import PVT_ARGS, SWIN_ARGS, Fixed
from inline_backbones.openmmlab.upstream_recipe import (
    RecipeError,
    base_name,
    check_written,
    default_out,
    plan,
    render,
    write,
)

mmdet = pytest.importorskip('mmdet')
mmseg = pytest.importorskip('mmseg')
from mmengine.config import Config  # noqa: E402

CONFIGS = upstream_recipe_files()
# One recipe of each case the tool tells apart, in the fast tests (the mutation run's); every other recipe is marked
# slow: each preset of both families, mmdet and mmseg, window 12, no preset (Swin-L, five stages), another
# preprocessor, a whole-model load_from, a fixed-size batch pad.
FAST = ('swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', 'swin/swin-base-patch4-window12-in22k-384x384-pre_upernet',
        'pvt/retinanet_pvt-m_fpn_1x_coco.py', 'dino/dino-5scale_swin-l_8xb2-12e_coco.py',
        'rtmdet/rtmdet_l_swin_b_p6_4xb16-100e_coco.py', 'mask2former_vis/', 'glip_atss_swin-t_a_fpn_dyhead_16xb2',
        'mask2former/mask2former_swin-s-p4-w7-224_8xb2-lsj-50e_coco.py', 'knet/knet-s3_swin-t')
RECIPES = [path if any(key in recipe_id(path) for key in FAST) else pytest.param(path, marks=pytest.mark.slow)
           for path in CONFIGS]
REGION = {'DetDataPreprocessor': 'inline_backbones.RegionDetDataPreprocessor',
          'SegDataPreProcessor': 'inline_backbones.RegionSegDataPreProcessor'}
tool = load_tool('tools/misc/inline_recipe.py')


def _plain(node):
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items() if k != '_scope_'}
    if isinstance(node, (list, tuple)):
        return [_plain(v) for v in node]
    return node


def _size(backbone):
    if backbone['type'].endswith('SwinTransformer'):
        key = (backbone.get('embed_dims', 96), tuple(backbone.get('depths', (2, 2, 6, 2))),
               tuple(backbone.get('num_heads', (3, 6, 12, 24))))
        return SWIN_SIZES.get(key), SWIN_ARCH_CHECKPOINTS, len(key[1])
    depths = tuple(backbone.get('num_layers', (3, 4, 6, 3)))
    return PVT_SIZES.get(depths), PVT_ARCH_CHECKPOINTS, len(depths)


def test_recipes_found():
    assert len(CONFIGS) >= 100
    fast = [r for r in RECIPES if isinstance(r, str)]
    assert len(fast) == len(FAST) and all(sum(key in recipe_id(p) for p in fast) == 1 for key in FAST)


@pytest.mark.parametrize('path', RECIPES, ids=recipe_id)
def test_child_config_of_every_recipe(path, tmp_path):
    """The child differs from the recipe in the backbone, the preprocessor's type (+ mmseg's test padding), the
    optimizer's ``attn.residual`` key, ``custom_imports`` and a cleared ``load_from`` only; its backbone is the
    InLine preset of the recipe's size with the released checkpoint (window 7), padding-aware where the recipe's
    preprocessor is mmdet's / mmseg's plain one. A size with no preset is refused naming ``--layout``, and with a
    layout trains from scratch, saying so. Where the recipe has optimizer keys, the child's optimizer is compared
    with the recipe's parameter group by parameter group (:func:`_check_optimizer`)."""
    recipe = Config.fromfile(path)
    upstream = dict(recipe.model.backbone)
    size, checkpoints, stages = _size(upstream)
    if size is None:
        with pytest.raises(RecipeError, match='no InLine-.* preset .* --layout'):
            plan(recipe_id(path))
        layout = ('IIIS' if 'Swin' in upstream['type'] else 'IIII') + 'S' * (stages - 4)
        swap = plan(recipe_id(path), layout=layout)
        assert any(line.startswith('weights: no released') for line in swap.cannot)
    else:
        swap = plan(recipe_id(path))
    out = write(swap, str(tmp_path / osp.basename(path)))
    child = Config.fromfile(out)
    backbone = dict(child.model.backbone)
    assert backbone['type'] == 'inline_backbones.' + ('InLineSwinTransformer' if 'Swin' in upstream['type']
                                                      else 'InLinePVT')
    if size is not None:
        assert backbone['arch'] == size
        assert backbone['init_cfg'] == dict(type='Pretrained', checkpoint=checkpoints[size])
        if 'Swin' in upstream['type']:
            assert backbone.get('window_size', 7) == 7
    else:
        assert backbone['init_cfg'] is None and backbone['attn_type'] == layout
    for key in ('drop_path_rate', 'out_indices', 'with_cp', 'frozen_stages'):
        if key in upstream:
            assert _plain(backbone[key]) == _plain(upstream[key]), key
    kind = recipe.model.data_preprocessor.type
    assert backbone['padding_aware'] is (kind in REGION)
    assert child.model.data_preprocessor.type == REGION.get(kind, kind)
    if kind == 'SegDataPreProcessor':       # mmseg's test padding of thin images, unless the recipe sets its own
        assert _plain(child.model.data_preprocessor.test_cfg) == _plain(
            recipe.model.data_preprocessor.get('test_cfg') or dict(size=[32, 32]))
    # the backbone is written whole: nothing of the recipe's is merged into it
    assert set(backbone) == set(swap.backbone) - {'_delete_'}
    own = recipe.get('custom_imports', {}).get('imports', [])
    region_module = f'inline_backbones.openmmlab.{"det" if kind == "DetDataPreprocessor" else "seg"}_preprocessor'
    assert child.custom_imports.imports == ([own] if isinstance(own, str) else own) + ['inline_backbones'] + (
        [region_module] if kind in REGION else [])
    keys = ((recipe.get('optim_wrapper') or {}).get('paramwise_cfg') or {}).get('custom_keys')
    added = set(swap.optim_wrapper['paramwise_cfg']['custom_keys']) if keys else set()
    assert added if keys else 'attn.residual' not in str(child.get('optim_wrapper'))
    # the keys the child adds name parts of the backbone or the residual, and none is one of the recipe's
    assert all(k.startswith('backbone.') or k == 'attn.residual' for k in added) and not added & set(keys or {})
    fixed = sorted(k for k, v in upstream.items() if isinstance(SWIN_ARGS.args.get(k) if 'Swin' in upstream['type']
                                                                      else PVT_ARGS.args.get(k), Fixed))
    dropped = [line for line in swap.changed if line.startswith('dropped')]
    assert dropped == (['dropped, as InLine always does what they say: '
                        + ', '.join(f'{k}={upstream[k]!r}' for k in fixed)] if fixed else [])
    assert swap.changed[0].startswith(f"backbone: {'Swin' if 'Swin' in upstream['type'] else 'PVT'} (")
    # everything else is the recipe's
    mine, theirs = _plain(child.to_dict()), _plain(recipe.to_dict())
    for cfg in (mine, theirs):
        del cfg['model']['backbone'], cfg['model']['data_preprocessor']['type']
        cfg['model']['data_preprocessor'].pop('test_cfg', None) if kind == 'SegDataPreProcessor' else None
        cfg.pop('custom_imports', None)
        cfg.pop('load_from', None)
        for key in added:
            (cfg.get('optim_wrapper', {}).get('paramwise_cfg') or {}).get('custom_keys', {}).pop(key, None)
    assert mine == theirs
    if keys:
        _check_optimizer(path, recipe, child, swap)
    assert child.get('load_from') is None
    assert (recipe.get('load_from') is not None) == any(line.startswith('load_from') for line in swap.cannot)


def _groups(backbone, optim_wrapper):
    """``{parameter name: (lr, weight_decay)}`` of the optimizer mmengine's ``build_optim_wrapper`` makes from
    ``optim_wrapper`` for a model holding only ``backbone`` (as ``model.backbone``), one group a parameter."""
    from mmengine.optim import build_optim_wrapper

    holder = torch.nn.Module()
    holder.backbone = backbone
    cfg = dict(_plain(optim_wrapper), type='OptimWrapper')    # the recipe's AmpOptimWrapper needs a GPU
    cfg.pop('loss_scale', None)
    optimizer = build_optim_wrapper(holder, cfg).optimizer
    names = {id(p): name for name, p in holder.named_parameters()}
    groups = {}
    for group in optimizer.param_groups:
        for p in group['params']:
            groups[names[id(p)]] = (group['lr'], group['weight_decay'])
    return groups


def _check_optimizer(path, recipe, child, swap):
    """mmengine's optimizer for the child config gives every InLine backbone parameter the lr and weight decay the
    recipe's optimizer gives its Swin counterpart (named by the checkpoint converter, mmdet -> released names): the
    recipe's per-block norm keys reach InLine's norms, its backbone-wide lr_mult InLine's every weight; the local
    residual (no Swin counterpart) gets its block's attention's lr and no weight decay. Every translated key is said."""
    from inline_backbones.models import InLineSwinTransformer
    from inline_backbones.models.families.swin_checkpoint import from_mmdet_swin
    from inline_backbones.openmmlab.upstream_recipe import upstream_backbone

    upstream = dict(recipe.model.backbone)
    theirs_module = upstream_backbone(recipe.default_scope, _plain(upstream), path)
    with torch.device('meta'):
        ours_module = InLineSwinTransformer(**{k: v for k, v in _plain(child.model.backbone).items()
                                               if k not in ('type', 'init_cfg')})
    theirs = _groups(theirs_module, recipe.optim_wrapper)
    ours = _groups(ours_module, child.optim_wrapper)
    names = dict(zip(from_mmdet_swin(dict(theirs_module.named_parameters())), dict(theirs_module.named_parameters()),
                     strict=True))
    residual = [name for name in ours if '.attn.residual.' in name]
    assert residual and len(ours) - len(residual) == sum('backbone.' + names.get(n[9:], '?') in theirs for n in ours)
    for name, got in ours.items():
        if name in residual:
            block = name.partition('.attn.residual.')[0]
            assert got == (ours[block + '.attn.proj.weight'][0], 0.), name
        else:
            assert got == pytest.approx(theirs['backbone.' + names[name[len('backbone.'):]]]), name
    translated = [k for k in recipe.optim_wrapper.paramwise_cfg.custom_keys if k.startswith('backbone.stages.')]
    assert bool(translated) == any(line.startswith("optimizer key 'backbone.stages.") for line in swap.changed)
    assert not any(line.startswith('optimizer') for line in swap.cannot)


def test_mask2former_child_keeps_norms_out_of_decay_at_the_backbones_rate(tmp_path):
    """mmdet's Mask2Former Swin-T: the recipe's lr 1e-4 x 0.1 on the backbone, weight decay 0.05 but none on its
    norms; the child's InLine norms and residual get the same (they got 0.05 and lr x 1 when the keys named mmdet's
    Swin only)."""
    swap = plan('mmdet::mask2former/mask2former_swin-t-p4-w7-224_8xb2-lsj-50e_coco.py')
    child = Config.fromfile(write(swap, str(tmp_path / 'm2f.py')))
    from inline_backbones.models import InLineSwinTransformer
    with torch.device('meta'):
        groups = _groups(InLineSwinTransformer(arch='tiny'), child.optim_wrapper)
    assert groups['backbone.layers.2.blocks.5.norm2.weight'] == pytest.approx((1e-5, 0.))
    assert groups['backbone.layers.1.downsample.norm.bias'] == pytest.approx((1e-5, 0.))
    assert groups['backbone.layers.2.blocks.5.attn.residual.2.weight'] == pytest.approx((1e-5, 0.))
    assert groups['backbone.layers.2.blocks.5.attn.qkv.weight'] == pytest.approx((1e-5, 0.05))
    assert groups['backbone.patch_embed.proj.weight'] == pytest.approx((1e-5, 0.05))
    assert "'backbone.stages.{i}.blocks.{j}.norm' -> 'backbone.layers.{i}.blocks.{j}.norm' (12 keys)" in \
        '\n'.join(swap.changed)


MASK_RCNN_T = """\
# InLine-Swin in mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py:
# the recipe with its backbone swapped, written by tools/misc/inline_recipe.py.
# What changed (docs/upstream_recipes.md says why):
#   backbone: Swin (embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24]) -> InLine-Swin arch 'tiny' (layout
#     IIIS)
#   dropped, as InLine always does what they say: convert_weights=True, patch_norm=True, qk_scale=None
#   weights: https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth ->
#     the released InLine-Swin ImageNet-1k checkpoint https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1
#   padding-aware mode: on; data_preprocessor: DetDataPreprocessor -> inline_backbones.RegionDetDataPreprocessor
#     (same arguments, plus each image's region)
#   weight decay: none on the InLine local residual's kernel generator (attn.residual), as the recipe's custom_keys
#     do for norms and bias tables
_base_ = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'

custom_imports = dict(imports=['inline_backbones', 'inline_backbones.openmmlab.det_preprocessor'],
                      allow_failed_imports=False)

model = dict(
    data_preprocessor=dict(type='inline_backbones.RegionDetDataPreprocessor'),
    backbone=dict(
        _delete_=True,
        type='inline_backbones.InLineSwinTransformer',
        arch='tiny',
        window_size=7,
        mlp_ratio=4,
        qkv_bias=True,
        drop_rate=0.0,
        attn_drop_rate=0.0,
        drop_path_rate=0.2,
        out_indices=(0, 1, 2, 3),
        with_cp=False,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='https://cloud.tsinghua.edu.cn/f/32810869fcc34410966b/?dl=1',
        ),
        padding_aware=True,
    ),
)

optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'attn.residual': dict(decay_mult=0.0)}))
"""


def test_written_config_text():
    """The whole text for mmdet's Mask R-CNN Swin-T recipe (the example of docs/upstream_recipes.md): comments
    wrapped at 120 columns, a dict(...) per level, one key a line where a level does not fit in 100 columns."""
    assert render(plan('mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py')) == MASK_RCNN_T


def test_cannot_and_load_from_are_written():
    swap = plan('mmdet::glip/glip_atss_swin-t_a_fpn_dyhead_16xb2_ms-2x_funtune_coco.py')
    text = render(swap)
    assert '# What could not be done:\n#   load_from: the recipe fine-tunes a whole Swin model' in text
    assert text.endswith('\nload_from = None\n')
    assert '# What could not be done' not in render(plan('mmdet::swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py'))


def test_check_written_refuses_another_backbone(tmp_path):
    swap = plan('mmdet::swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py')
    out = tmp_path / 'child.py'
    out.write_text("_base_ = 'mmdet::swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py'\n")
    with pytest.raises(RecipeError, match="backbone is 'SwinTransformer', not 'inline_backbones.InLineSwin"):
        check_written(str(out), swap)
    assert type(check_written(write(swap, str(out)), swap)).__name__ == 'InLineSwinTransformer'


def test_base_names(tmp_path):
    """An installed recipe's path is written as its ``mmdet::`` name; another path absolute; ``mmdet::`` as given."""
    path = next(p for p in CONFIGS if p.endswith('mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'))
    assert base_name(path) == 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'
    assert base_name('mmseg::swin/x.py') == 'mmseg::swin/x.py'
    own = tmp_path / 'my_recipe.py'
    own.write_text("_base_ = 'mmdet::swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py'\n")
    assert base_name(str(own)) == str(own)
    assert default_out('mmdet::swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py') == \
        osp.join('configs', 'retinanet_inline-swin-t-p4-w7_fpn_1x_coco.py')
    assert default_out(str(own)) == osp.join('configs', 'inline_my_recipe.py')
    assert default_out('mmdet::pvt/retinanet_pvt-t_fpn_1x_coco.py', 'out') == osp.join('out',
                                                                                         'retinanet_inline-pvt-t_fpn_1x_coco.py')
    assert default_out('mmseg::swin/Swin-x.py') == osp.join('configs', 'inline-Swin-x.py')


def test_tool_writes_and_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert tool.main(['mmseg::swin/swin-base-patch4-window12-in22k-384x384-pre_upernet_8xb2-160k_ade20k-512x512.py'
                      ]) == 0
    printed = capsys.readouterr().out
    out = 'configs/inline-swin-base-patch4-window12-in22k-384x384-pre_upernet_8xb2-160k_ade20k-512x512.py'
    assert f'wrote {out}' in printed and osp.isfile(out)
    assert "arch 'base' (layout IIMS2)" in printed
    assert 'window_size: 12 -> 7' in printed
    assert 'SegDataPreProcessor -> inline_backbones.RegionSegDataPreProcessor' in printed
    assert 'could not' not in printed
    text = open(out).read()
    assert text.startswith('# InLine-Swin in mmseg::swin/') and "window_size=7," in text
    assert 'attn.residual' in text and 'load_from' not in text
    # the written config trains through the repository's train tool: its model builds from it
    assert f'python tools/train.py {out}' in printed


@pytest.mark.parametrize('recipe, message', [
    ('mmdet::dino/dino-5scale_swin-l_8xb2-12e_coco.py', 'which is no InLine-Swin preset'),
    ('mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py', "its backbone is 'ResNet'"),
    ('mmdet::pvt/retinanet_pvtv2-b0_fpn_1x_coco.py', 'PVT v2 has no InLine counterpart'),
    ('mmdet::swin/no-such-recipe.py', 'no such config'),
    ('mmcls::swin/x.py', 'mmcls:: is no package of recipes here'),
])
def test_tool_refuses_with_one_line(recipe, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        run_tool(tool.main, 'inline_recipe', [recipe])
    assert stop.value.code.startswith('[inline_recipe] error: ') and message in stop.value.code
    assert '\n' not in stop.value.code
    assert not (tmp_path / 'configs').exists()


def test_layout_for_a_size_without_release(tmp_path, capsys):
    out = str(tmp_path / 'dino.py')
    assert tool.main(['mmdet::dino/dino-5scale_swin-l_8xb2-12e_coco.py', '--layout', 'IIIS', '--out', out]) == 0
    printed = capsys.readouterr().out
    assert 'could not:\n  weights: no released InLine-Swin checkpoint of this size' in printed
    assert Config.fromfile(out).model.backbone.init_cfg is None
    with pytest.raises(SystemExit, match=r'\[inline_recipe\] error: .*does not build'):
        run_tool(tool.main, 'inline_recipe', ['mmdet::dino/dino-5scale_swin-l_8xb2-12e_coco.py', '--layout', 'IIS',
                                              '--out', out])


def test_no_padding_aware_keeps_preprocessor(tmp_path):
    swap = plan('mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', padding_aware=False)
    child = Config.fromfile(write(swap, str(tmp_path / 'c.py')))
    assert child.model.data_preprocessor.type == 'DetDataPreprocessor'
    assert child.model.backbone.padding_aware is False
    assert child.custom_imports.imports == ['inline_backbones']


# --- one training step per kind of recipe, from the tool's child config --------------------------------------------

IMAGES = ((96, 128), (128, 96))     # two sizes: the batch is padded, so the regions matter


def _det_samples(with_masks):
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for h, w in IMAGES:
        inputs.append(torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8))
        sample = DetDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), scale_factor=(1., 1.),
                                             flip=False, flip_direction=None))
        boxes = torch.tensor([[8., 10., 60., 70.], [30., 20., 90., 80.]])
        instances = InstanceData(bboxes=boxes, labels=torch.tensor([1, 3]))
        if with_masks:
            masks = torch.zeros(2, h, w, dtype=torch.uint8)
            for m, (x0, y0, x1, y1) in zip(masks, boxes.long().tolist(), strict=True):
                m[y0:y1, x0:x1] = 1
            instances.masks = BitmapMasks(masks.numpy(), h, w)
        sample.gt_instances = instances
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def _seg_samples():
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for h, w in IMAGES:
        inputs.append(torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8))
        sample = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w)))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 150, (1, h, w), generator=g))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


KINDS = [
    ('two-stage', 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', {}, lambda: _det_samples(True)),
    # DINO selects num_queries of the encoder's tokens: 100 of the 340 of a 128x128 batch (900 need 288x288)
    ('detr-like', 'mmdet::v3det/dino-4scale_swin_16xb1_sample1e-3_v3det_36e.py', {'model.num_queries': 100},
     lambda: _det_samples(False)),
    ('mask2former', 'mmdet::mask2former/mask2former_swin-t-p4-w7-224_8xb2-lsj-50e_coco.py',
     {'model.data_preprocessor.batch_augments.0.size': (128, 128)}, lambda: _det_samples(True)),
    ('mmseg-decode-head', 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
     {'model.data_preprocessor.size': (128, 128)}, _seg_samples),
]


@pytest.mark.slow
@pytest.mark.parametrize('recipe, small, samples', [k[1:] for k in KINDS], ids=[k[0] for k in KINDS])
def test_training_step_from_child_config(recipe, small, samples, tmp_path):
    """The tool's child config (only the batch's fixed size and DINO's query count made small), built without the
    released weights (no download here): one ``train_step`` on a padded batch of two sizes gives finite losses,
    moves the InLine attention's weights, passes each image's region to the padding-aware backbone, and keeps the
    local residual out of weight decay."""
    from mmengine.optim import build_optim_wrapper

    from inline_backbones.regions import SHAPES_ATTR

    swap = plan(recipe)
    assert swap.cannot == []
    cfg = Config.fromfile(write(swap, str(tmp_path / 'child.py')))
    cfg.merge_from_dict(small)
    model = (build_detector if swap.task == 'mmdet' else build_segmentor)(cfg)
    model.train()
    seen = []
    model.backbone.register_forward_pre_hook(
        lambda module, args: seen.append(getattr(args[0], SHAPES_ATTR, None)))
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    decay = {id(p): group['weight_decay'] for group in optim_wrapper.optimizer.param_groups for p in group['params']}
    residual = [p for n, p in model.named_parameters() if 'attn.residual' in n]
    assert residual and all(decay[id(p)] == 0 for p in residual)
    qkv = next(p for n, p in model.backbone.named_parameters() if n.endswith('attn.qkv.weight'))
    before = qkv.detach().clone()
    losses = model.train_step(samples(), optim_wrapper)
    assert losses and all(torch.isfinite(v).all() for v in losses.values()), losses
    assert not torch.equal(before, qkv.detach())
    assert len(seen) == 1 and seen[0] is not None
    assert [tuple(s) for s in seen[0].tolist()] == list(IMAGES)
    assert os.path.basename(cfg.filename) == 'child.py'


def _swin_t_pair():
    """mmdet's Swin-T (the recipe's backbone, via the tool's builder) and InLine-Swin-T on the meta device."""
    from inline_backbones.models import InLineSwinTransformer
    from inline_backbones.openmmlab.upstream_recipe import upstream_backbone

    with torch.device('meta'):
        inline = InLineSwinTransformer(arch='tiny', init_cfg=None)
    return upstream_backbone('mmdet', dict(type='SwinTransformer'), 'Swin-T'), inline


def test_a_per_stage_rate_gives_the_residual_per_block_keys():
    """A recipe key for one stage (``backbone.stages.2``, lr_mult 0.5) is translated and outranks a bare
    ``attn.residual`` key there (mmengine takes the longest key), so the residual gets one key per block, each at its
    block's rate; every parameter then gets what the recipe gives its counterpart. One translated key: no count."""
    from inline_backbones.openmmlab.recipe_optimizer import translate_keys, treatments

    upstream, inline = _swin_t_pair()
    recipe = dict(custom_keys={'backbone.stages.2': dict(lr_mult=0.5), 'norm': dict(decay_mult=0.)})
    keys = translate_keys(recipe, upstream, inline, SWIN_ARGS, 'InLine-Swin')
    assert not keys.cannot
    assert keys.keys['backbone.layers.2'] == dict(lr_mult=0.5)
    assert "optimizer key 'backbone.stages.{i}' -> 'backbone.layers.{i}': the recipe's setting" in keys.changed[0]
    assert keys.keys['backbone.layers.2.blocks.4.attn.residual'] == dict(lr_mult=0.5, decay_mult=0.)
    assert keys.keys['backbone.layers.0.blocks.1.attn.residual'] == dict(decay_mult=0.)
    assert 'attn.residual' not in keys.keys and 'backbone.layers.{i}.blocks.{j}.attn.residual' in keys.changed[-1]
    got = treatments(inline, dict(recipe, custom_keys={**recipe['custom_keys'], **keys.keys}))
    assert got['backbone.layers.2.blocks.4.attn.residual.2.weight'] == (0.5, 0.)
    assert got['backbone.layers.1.blocks.0.attn.residual.0.bias'] == (1., 0.)
    assert got['backbone.layers.2.blocks.4.norm1.weight'] == (0.5, 1.)      # the stage key outranks 'norm', as upstream


def test_keys_of_a_family_whose_names_are_not_converted_are_listed():
    """InLine-PVT's names are not converted from mmdet's PVT: a key naming a part of it cannot be translated and is
    listed; keys by substring keep their meaning, and the residual still gets its key."""
    from inline_backbones.models import InLinePVT
    from inline_backbones.openmmlab.recipe_optimizer import translate_keys
    from inline_backbones.openmmlab.upstream_recipe import upstream_backbone

    upstream = upstream_backbone('mmdet', dict(type='PyramidVisionTransformer', num_layers=[1, 1, 1, 1]), 'PVT')
    with torch.device('meta'):
        inline = InLinePVT(arch='tiny', init_cfg=None)
    keys = translate_keys(dict(custom_keys={'backbone.layers.0.1': dict(lr_mult=0.5), 'norm': dict(decay_mult=0.)}),
                          upstream, inline, PVT_ARGS, 'InLine-PVT')
    assert keys.cannot == ["optimizer key 'backbone.layers.0.1': names a part of the PVT backbone, whose names "
                           'InLine-PVT does not share; not translated']
    assert keys.keys == {'attn.residual': dict(decay_mult=0.)}
