"""mmdet's and mmseg's own Swin and PVT v1 recipes with only the backbone's type changed: every config of the
installed packages builds the InLine preset of its size, or is refused with the documented message."""
import inspect
import os
import re

import pytest
import torch
from helpers import PVT_SIZES, SWIN_SIZES, recipe_id, upstream_recipe_files

from inline_backbones import InLinePVT, InLineSwinTransformer
from inline_backbones.checkpoints.released import PVT_ARCH_CHECKPOINTS, SWIN_ARCH_CHECKPOINTS
from inline_backbones.models.upstream_args import PVT_ARGS, SWIN_ARGS, Arch, Fixed, Honoured, is_upstream_checkpoint

mmdet = pytest.importorskip('mmdet')
mmseg = pytest.importorskip('mmseg')
from mmdet.models.backbones import PyramidVisionTransformer  # noqa: E402
from mmdet.models.backbones import SwinTransformer as MMDetSwin  # noqa: E402
from mmdet.models.backbones.swin import swin_converter  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmseg.models.backbones import SwinTransformer as MMSegSwin  # noqa: E402

UPSTREAM = {'SwinTransformer': (InLineSwinTransformer, SWIN_ARCH_CHECKPOINTS, 'Swin', 'InLine-Swin'),
            'PyramidVisionTransformer': (InLinePVT, PVT_ARCH_CHECKPOINTS, 'PVT', 'InLine-PVT')}


CONFIGS = upstream_recipe_files()


def test_recipes_found():
    """The glob finds the recipes (a renamed folder would otherwise leave the parametrized test empty)."""
    names = {os.path.basename(f) for f in CONFIGS}
    assert 'mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py' in names
    assert 'retinanet_pvt-t_fpn_1x_coco.py' in names
    assert 'swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py' in names
    assert len(CONFIGS) >= 30


def _registry(path):
    from mmdet.registry import MODELS as DET
    from mmseg.registry import MODELS as SEG
    return SEG if f'{os.sep}mmseg{os.sep}' in path else DET


def _backbone(path):
    return dict(Config.fromfile(path).model.backbone)


@pytest.mark.parametrize('path', CONFIGS, ids=recipe_id)
def test_recipe_with_inline_type(path):
    """The recipe's backbone with only ``type`` changed: its upstream checkpoint is refused naming the released
    InLine one of its size; with that one it builds the InLine preset (on the meta device, nothing loaded), the
    honoured arguments taken; a size InLine has no preset of is refused, saying so."""
    upstream = _backbone(path)
    assert upstream['type'] in UPSTREAM, f'{path}: backbone {upstream["type"]} is no Swin / PVT v1'
    cls, checkpoints, upstream_name, family = UPSTREAM[upstream['type']]
    backbone = {k: v for k, v in upstream.items() if k != '_delete_'}
    backbone['type'] = f'inline_backbones.{cls.__name__}'
    if cls is InLineSwinTransformer:
        size = SWIN_SIZES.get((backbone.get('embed_dims', 96), tuple(backbone.get('depths', (2, 2, 6, 2))),
                               tuple(backbone.get('num_heads', (3, 6, 12, 24)))))
    else:
        size = PVT_SIZES.get(tuple(backbone.get('num_layers', (3, 4, 6, 3))))
    registry = _registry(path)
    checkpoint = (backbone.get('init_cfg') or {}).get('checkpoint')
    if checkpoint is not None:
        assert is_upstream_checkpoint(checkpoint), checkpoint
        with pytest.raises(ValueError, match=f'is a {upstream_name} checkpoint') as err:
            registry.build(backbone)
        if size is not None:
            assert f"model.backbone.init_cfg.checkpoint='{checkpoints[size]}'" in str(err.value)
        else:
            assert f'No {family} checkpoint of this size' in str(err.value)
            assert 'init_cfg=None' in str(err.value)
    if size is None:
        backbone['init_cfg'] = None
        with pytest.raises(ValueError, match=f'which is no {family} preset'):
            registry.build(backbone)
        return
    if checkpoint is not None:
        backbone['init_cfg'] = {**backbone['init_cfg'], 'checkpoint': checkpoints[size]}
    with torch.device('meta'):
        model = registry.build(backbone)
    assert type(model) is cls
    assert model.arch == cls.arch_zoo[size] and model.attn_type == cls.arch_zoo[size]['attn_type']
    assert model.drop_path_rate == backbone.get('drop_path_rate', 0.1)
    assert model.out_indices == tuple(backbone.get('out_indices', (0, 1, 2, 3)))
    assert model.in_channels == backbone.get('in_channels', 3)
    if checkpoint is not None:
        assert model.init_cfg == {'type': 'Pretrained', 'checkpoint': checkpoints[size]}
    if cls is InLineSwinTransformer:
        windows = {m.window_size for m in model.modules() if type(m).__name__ == 'WindowAttention'}
        assert windows == {backbone.get('window_size', 7)}
        assert all(block.with_cp == backbone.get('with_cp', False) for s in model.layers for block in s.blocks)


UPSTREAM_CLASSES = [(MMDetSwin, SWIN_ARGS), (MMSegSwin, SWIN_ARGS), (PyramidVisionTransformer, PVT_ARGS)]


@pytest.mark.parametrize('upstream, table', UPSTREAM_CLASSES, ids=['mmdet-swin', 'mmseg-swin', 'mmdet-pvt'])
def test_table_covers_upstream_signature(upstream, table):
    """Every parameter of the installed upstream class has an entry (read from its signature: the table cannot
    drift from the installed mmdet / mmseg)."""
    params = set(inspect.signature(upstream.__init__).parameters) - {'self'}
    assert params - set(table.args) == set()


@pytest.mark.parametrize('cls, table, upstreams', [(InLineSwinTransformer, SWIN_ARGS, (MMDetSwin, MMSegSwin)),
                                                   (InLinePVT, PVT_ARGS, (PyramidVisionTransformer,))])
def test_table_entries(cls, table, upstreams):
    """Every entry is an upstream parameter, and every honoured one an argument of the InLine backbone."""
    params = set().union(*(inspect.signature(u.__init__).parameters for u in upstreams))
    assert set(table.args) <= params
    ours = set(inspect.signature(cls.__mro__[1].__init__).parameters) | set(cls.family.options)
    honoured = {k for k, kind in table.args.items() if isinstance(kind, Honoured)}
    assert honoured <= ours
    assert all(isinstance(kind, (Arch, Honoured, Fixed)) for kind in table.args.values())


# One value per Fixed entry that InLine's model does not do.
WRONG = {
    'Swin': dict(pretrain_img_size='224', strides=(4, 2, 2, 1), qk_scale=0.125, patch_norm=False,
                    use_abs_pos_embed=True, act_cfg=dict(type='ReLU'), norm_cfg=dict(type='BN'),
                    pretrained='swin.pth', convert_weights='yes'),
    'PVT': dict(num_stages=3, patch_sizes=[7, 3, 3, 3], strides=[4, 2, 2, 1], paddings=[3, 1, 1, 1],
                   use_abs_pos_embed=False, norm_after_stage=True, use_conv_ffn=True, act_cfg=dict(type='ReLU'),
                   norm_cfg=dict(type='LN', eps=1e-5), pretrained='pvt.pth', convert_weights=None),
}
PLANTED = [(cls, table, name, value) for cls, table in ((InLineSwinTransformer, SWIN_ARGS), (InLinePVT, PVT_ARGS))
           for name, value in WRONG[table.upstream].items()]


def test_every_fixed_entry_planted():
    for table in (SWIN_ARGS, PVT_ARGS):
        assert set(WRONG[table.upstream]) == {k for k, kind in table.args.items() if isinstance(kind, Fixed)}


@pytest.mark.parametrize('cls, table, name, value', PLANTED, ids=[f'{c.__name__}-{n}' for c, _, n, _ in PLANTED])
def test_planted_disagreeing_argument_refused(cls, table, name, value):
    with pytest.raises(ValueError, match=re.escape(f'{name}={value!r} cannot be taken')):
        cls(**{name: value})


@pytest.mark.parametrize('cls, name, value', [
    (InLineSwinTransformer, 'pretrain_img_size', 384), (InLineSwinTransformer, 'strides', (4, 2, 2, 2)),
    (InLineSwinTransformer, 'norm_cfg', dict(type='LN', requires_grad=True)),
    (InLineSwinTransformer, 'act_cfg', dict(type='GELU')), (InLineSwinTransformer, 'convert_weights', True),
    (InLinePVT, 'norm_cfg', dict(type='LN', eps=1e-6)), (InLinePVT, 'num_stages', 4),
    (InLinePVT, 'use_abs_pos_embed', True), (InLinePVT, 'paddings', [0, 0, 0, 0])])
def test_agreeing_argument_accepted(cls, name, value):
    with torch.device('meta'):
        model = cls(**{name: value})
    assert model.arch == cls.arch_zoo[next(iter(cls.arch_zoo))]


def test_arch_and_upstream_arguments_disagree():
    with pytest.raises(ValueError, match=r"arch='small' and the Swin arguments disagree: depths \[2, 2, 6, 2\]"):
        InLineSwinTransformer('small', depths=[2, 2, 6, 2])
    with pytest.raises(ValueError, match="arch='tiny' and the PVT arguments disagree: depths"):
        InLinePVT('tiny', num_layers=[3, 4, 6, 3])
    with torch.device('meta'):
        assert InLineSwinTransformer('small', embed_dims=96, depths=[2, 2, 18, 2]).attn_type == 'IISS'


def test_upstream_arguments_select_the_preset():
    with torch.device('meta'):
        assert InLineSwinTransformer(embed_dims=128, depths=[2, 2, 18, 2], num_heads=[4, 8, 16, 32]).attn_type == \
            'IIMS2'
        pvt = InLinePVT(num_layers=[3, 4, 18, 3], embed_dims=64, mlp_ratios=[8, 8, 4, 4], sr_ratios=[8, 4, 2, 1])
        assert pvt.arch == InLinePVT.arch_zoo['medium']
        v1 = InLinePVT(num_layers=[2, 2, 2, 2], num_heads=[1, 2, 5, 8])            # PVT v1's heads: PVT v1
        assert v1.arch == InLinePVT.arch_zoo['pvt-v1-tiny'] and v1.attn_type == 'SSSS'
        custom = InLineSwinTransformer(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8], attn_type='IIIS')
    assert custom.stage_dims == [32, 64, 128, 256]
    with pytest.raises(ValueError, match=r"which is no InLine-PVT preset .* give attn_type"):
        InLinePVT(num_layers=[1, 1, 1, 1])


def test_upstream_checkpoint_names():
    assert is_upstream_checkpoint('checkpoints/swin_tiny_patch4_window7_224.pth')
    assert is_upstream_checkpoint('https://github.com/whai362/PVT/releases/download/v2/pvt_tiny.pth')
    assert is_upstream_checkpoint('https://github.com/whai362/PVT/releases/download/v2/pvt_v2_b0.pth')
    for ours in (*SWIN_ARCH_CHECKPOINTS.values(), *PVT_ARCH_CHECKPOINTS.values(), 'inline_swin_t.pth',
                 'work_dirs/mask-rcnn_inline-swin-t/epoch_12.pth', None):
        assert not is_upstream_checkpoint(ours), ours


def test_upstream_checkpoint_refused_at_construction():
    swin_t = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_tiny_patch4_window7_224.pth'
    init_cfg = dict(type='Pretrained', checkpoint=swin_t)
    with pytest.raises(ValueError, match=re.escape(SWIN_ARCH_CHECKPOINTS['small'])):
        InLineSwinTransformer('small', init_cfg=init_cfg)
    with pytest.raises(ValueError, match='No InLine-Swin checkpoint of this size .* is released'):
        InLineSwinTransformer(embed_dims=192, depths=[2, 2, 18, 2], num_heads=[6, 12, 24, 48], init_cfg=init_cfg)
    with pytest.raises(ValueError, match='is a PVT checkpoint'):
        InLinePVT(num_layers=[2, 2, 2, 2], init_cfg=dict(checkpoint='pvt_tiny.pth'))
    with torch.device('meta'):   # plain Swin / PVT v1 (layout SSSS) take their own weights
        assert InLineSwinTransformer(attn_type='SSSS', init_cfg=init_cfg).init_cfg == init_cfg
        InLinePVT('pvt-v1-tiny', init_cfg=dict(checkpoint='pvt_tiny.pth'))


def test_pvt_init_cfg_without_type_is_pretrained():
    with torch.device('meta'):
        model = InLinePVT(init_cfg=dict(checkpoint='inline_pvt_t.pth'))
    assert model.init_cfg == dict(type='Pretrained', checkpoint='inline_pvt_t.pth')


def test_ssss_with_upstream_arguments_equals_mmdet_swin():
    """The same upstream arguments (a small Swin, window 4, MLP ratio 2) into mmdet's Swin and into layout ``SSSS``:
    with mmdet's converter carrying the weights over, the same maps."""
    kwargs = dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4], window_size=4, mlp_ratio=2,
                  qkv_bias=True, qk_scale=None, patch_norm=True, drop_path_rate=0., strides=(4, 2, 2, 2),
                  out_indices=(0, 1, 2, 3), use_abs_pos_embed=False, act_cfg=dict(type='GELU'),
                  norm_cfg=dict(type='LN'), convert_weights=True, pretrain_img_size=224)
    ours = InLineSwinTransformer(attn_type='SSSS', **kwargs).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in ours.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if 'norm' in name else 0.05) + (1. if name.endswith('norm1.weight')
                                                                                 else 0.))
    ref = MMDetSwin(**kwargs)
    ref.eval()                               # (its train() returns None)
    converted = {k.removeprefix('backbone.'): v for k, v in swin_converter(ours.state_dict()).items()}
    missing, unexpected = ref.load_state_dict(converted, strict=False)
    assert not unexpected and all(k.endswith('relative_position_index') for k in missing), missing
    x = torch.randn(1, 3, 136, 168)         # stage maps 34x42 ... 5x6: every stage shifts, odd sizes pad
    with torch.no_grad():
        for a, b in zip(ours(x), ref(x), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


CHILD = """_base_ = 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'
custom_imports = dict(imports=['inline_backbones'], allow_failed_imports=False)
model = dict(backbone=dict(type='inline_backbones.InLineSwinTransformer'{init_cfg}))
"""


def test_child_config_of_the_recipe(tmp_path):
    """The user's child config (docs/upstream_recipes.md): the whole detector builds with InLine-Swin-T once the
    checkpoint is the released one; with the recipe's own checkpoint, the build is refused naming it."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    register_all_modules()
    link = SWIN_ARCH_CHECKPOINTS['tiny']
    child = tmp_path / 'child.py'
    child.write_text(CHILD.format(init_cfg=f", init_cfg=dict(type='Pretrained', checkpoint='{link}')"))
    with torch.device('meta'):
        detector = MODELS.build(Config.fromfile(str(child)).model)
    assert type(detector.backbone) is InLineSwinTransformer and detector.backbone.attn_type == 'IIIS'
    assert detector.backbone.drop_path_rate == 0.2                          # the recipe's
    child.write_text(CHILD.format(init_cfg=''))
    with pytest.raises(ValueError, match=re.escape(f"model.backbone.init_cfg.checkpoint='{link}'")):
        MODELS.build(Config.fromfile(str(child)).model)
