"""The contract every model family keeps, written once and parametrized over the families, their layouts and
their timm models (as timm's ``tests/test_models.py`` is over its models). A new family is one entry of
:data:`FAMILIES` (and its timm names are found in timm's registry).

Per family: building (presets and custom arch dicts, one error for both), any input size, ``out_indices``,
``frozen_stages``, padding invariance through mmdet's and mmseg's own preprocessors (explicit and inferred
regions), zeros outside each region, a checkpoint round trip between the timm classifier and the mmengine
backbone (the same trunk and keys), the refusal of TorchScript. Per timm model: timm's own
``test_model_default_cfgs`` assertions (pooled and unpooled shapes, ``output_fmt``, head reset, classifier and
first-conv names).
"""
import copy
import hashlib
import math
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import timm
import torch
from mutmut_compat import fx_on_unwrapped_code
from padding_cases import IMAGE_SIZES, STRIDES, det_batch, images, randomized, region_differences, seg_batch

from inline_backbones import (
    CheckpointMismatchError,
    InLineCSwinClassifier,
    InLineCSwinTransformer,
    InLinePVT,
    InLinePVTClassifier,
    InLineSwinClassifier,
    InLineSwinTransformer,
)
from inline_backbones.checkpoints.released import PAPER_FIGURES, RELEASED_CHECKPOINTS, arch_checkpoints
from inline_backbones.models.classifier import checkpoint_filter_fn, pretrained_cfg
from inline_backbones.models.stages import to_nchw, to_nhwc


@dataclass(frozen=True)
class Case:
    backbone: type
    classifier: type
    timm_prefix: str
    small: dict                  # a small arch dict of the family (fast tests)
    layouts: tuple               # layouts covering every mixer of the family
    map_side: object             # a stage's map side from the input side and the stage's stride
    region_side: object          # a stage's region side in padding-aware mode from the image's side and the stride
    stem: tuple                  # what frozen_stages=0 freezes
    first_leaf: tuple            # the first fx leaf of the classifier: its node name and class name
    mixers: frozenset            # the mixer classes of layouts[1]


def ceil_side(n, stride):
    return math.ceil(n / stride)


def cswin_side(n, stride):
    """CSWin's conv stem (7x7, stride 4, padding 2) gives floor((n + 1) / 4), each merging (3x3, stride 2, padding
    1) the ceil of half."""
    side = (n + 1) // 4
    while stride > 4:
        side, stride = -(-side // 2), stride // 2
    return side


FAMILIES = {
    'swin': Case(InLineSwinTransformer, InLineSwinClassifier, 'inline_swin_',
                 dict(embed_dims=16, depths=[2, 2, 4, 2], num_heads=[1, 2, 4, 8]), ('IIIS', 'IISS', 'IIMS2', 'FFSS'),
                 ceil_side, ceil_side, ('patch_embed',), ('patch_embed', 'PatchEmbed'),
                 frozenset({'InLineAttention', 'WindowAttention'})),
    'pvt': Case(InLinePVT, InLinePVTClassifier, 'inline_pvt_',
                dict(embed_dims=[16, 32, 48, 64], depths=[2, 2, 2, 2], num_heads=[1, 2, 3, 4]),
                ('IIII', 'IISS', 'SSSS'), lambda n, stride: n // stride, ceil_side, (), ('layers.0.embed', 'PVTEmbed'),
                frozenset({'InLinePVTAttention', 'SpatialReductionAttention'})),
    'cswin': Case(InLineCSwinTransformer, InLineCSwinClassifier, 'inline_cswin_',
                  dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[2, 2, 4, 8]), ('IISS', 'SSII', 'IIMS1'),
                  cswin_side, cswin_side, ('patch_embed',), ('patch_embed', 'ConvEmbed'),
                  frozenset({'CSwinInLineAttention', 'CSwinStripeAttention'})),
}
FAMILY_LAYOUTS = [(f, layout) for f, case in FAMILIES.items() for layout in case.layouts]
# Families with timm classifiers only, no mmdet/mmseg backbone: their contract is in their own file (InLine-DeiT's:
# tests/test_inline_deit.py).
CLASSIFIER_ONLY = ('inline_deit_',)
TIMM_MODELS = sorted(name for name in timm.list_models('inline_*') if not name.startswith(CLASSIFIER_ONLY))
COMPARISON_MODELS = sorted(timm.list_models('flatten_*'))   # other papers' models on a family's trunk (FLatten-Swin)


def small_model(family, layout, **kwargs):
    """A randomly initialised small backbone of ``family`` (every parameter non-trivial), eval mode, seed fixed."""
    torch.manual_seed(0)
    return randomized(FAMILIES[family].backbone(arch=FAMILIES[family].small, attn_type=layout, drop_path_rate=0.,
                                                **kwargs))


def test_timm_registry_has_every_family():
    assert {name.rsplit('_', 1)[0] + '_' for name in TIMM_MODELS} == {c.timm_prefix for c in FAMILIES.values()}
    assert len(TIMM_MODELS) == 10 and len(timm.list_models('inline_*')) == 13
    for case in FAMILIES.values():   # the class keyword family= sets the table and its presets on both wrappers
        assert case.classifier.family is case.backbone.family
        assert case.classifier.arch_zoo is case.backbone.arch_zoo is case.backbone.family.arch_zoo


@pytest.mark.slow
def test_import_registers_every_timm_model_without_mmdet_or_mmseg():
    code = ('import sys, timm, inline_backbones\n'
            'print(timm.list_models("inline_*"), sorted(m for m in ("mmdet", "mmseg") if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == ("['inline_cswin_base', 'inline_cswin_small', 'inline_cswin_tiny', "
                                            "'inline_deit_base', 'inline_deit_small', 'inline_deit_tiny', "
                                            "'inline_pvt_large', 'inline_pvt_medium', 'inline_pvt_small', "
                                            "'inline_pvt_tiny', 'inline_swin_base', 'inline_swin_small', "
                                            "'inline_swin_tiny'] []")


# Each family's timm cfg as its authors evaluate: crop mode, the resize before the 224 crop, the images' conv.
TIMM_CFG = {'swin': ('center', 256, 'patch_embed.proj'), 'pvt': ('squash', (256, 256), 'layers.0.embed.proj'),
            'cswin': ('squash', (256, 256), 'patch_embed.proj')}


@pytest.mark.parametrize('family', FAMILIES)
def test_pretrained_cfg_is_the_authors_evaluation(family):
    """Every released model of the family has its link, a 7 x 7 last map, ``head`` and the images' conv named;
    the data config is the authors' evaluation: resized bicubic (InLine-Swin as Swin: the short side to 256;
    InLine-PVT and InLine-CSwin: squashed to 256 x 256), centre crop 224 (crop_pct 0.875), ImageNet mean/std,
    1000 classes."""
    case = FAMILIES[family]
    crop_mode, resize, first_conv = TIMM_CFG[family]
    links = arch_checkpoints(case.timm_prefix)
    for arch, url in links.items():
        model = timm.create_model(f'{case.timm_prefix}{arch}', **case.small, attn_type=case.layouts[0])
        cfg = model.pretrained_cfg
        assert cfg['url'] == url and cfg['pool_size'] == (7, 7)
        assert cfg['first_conv'] == first_conv and cfg['classifier'] == 'head'
    data = timm.data.resolve_data_config(model=model)
    assert data['input_size'] == (3, 224, 224) and data['interpolation'] == 'bicubic'
    assert data['crop_pct'] == 0.875 and data['crop_mode'] == crop_mode
    assert data['mean'] == timm.data.IMAGENET_DEFAULT_MEAN and data['std'] == timm.data.IMAGENET_DEFAULT_STD
    assert model.pretrained_cfg['num_classes'] == model.num_classes == 1000
    assert timm.data.create_transform(**data).transforms[0].size == resize


@pytest.mark.parametrize('name', TIMM_MODELS)
def test_timm_model_function_has_its_release_and_its_papers_figures(name, tmp_path):
    """Each model function is registered under its name with the released link and a docstring whose depths and
    layout are its preset's."""
    function = timm.models.model_entrypoint(name)
    prefix, arch = name.rsplit('_', 1)
    preset = next(c for c in FAMILIES.values() if c.timm_prefix == prefix + '_').backbone.arch_zoo[arch]
    assert function.__name__ == name and function.__doc__ == PAPER_FIGURES[name]
    assert f"depths {'-'.join(map(str, preset['depths']))}, layout {preset['attn_type']};" in function.__doc__
    case = next(c for c in FAMILIES.values() if c.timm_prefix == prefix + '_')
    url = RELEASED_CHECKPOINTS[f'{prefix}_{arch[0]}']
    registered = timm.models.get_pretrained_cfg(name).to_dict()
    assert registered.items() >= pretrained_cfg(case.classifier.family, url).items()   # what the builder makes now
    assert (registered['url'], registered['crop_pct'], registered['interpolation'], registered['mean']) == (
        url, 0.875, 'bicubic', (0.485, 0.456, 0.406))
    assert (function.__qualname__, function.__module__) == (name, case.classifier.__module__)
    if arch == 'small':     # the model function builds its family's classifier of its preset and loads a file
        with torch.device('meta'):
            model = function(num_classes=3)
        assert type(model) is case.classifier and model.arch == case.classifier.family.resolve_arch(arch)
        assert model.pretrained_cfg['url'] == url and model.num_classes == 3
        source = case.classifier(**case.small, attn_type=preset['attn_type'], num_classes=3)
        path = tmp_path / 'released.pth'
        torch.save({'model': source.state_dict()}, path)
        model = function(True, pretrained_cfg_overlay=dict(file=str(path)), **case.small, num_classes=3)  # timm's call
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), source.state_dict().values(),
                                                       strict=True))


def test_model_functions_are_written_out_with_the_papers_figures():
    """Every timm model of the package (InLine-DeiT's and FLatten-Swin's too) is a function written out in its
    family's module (``inline_{family}.py``, ``flatten_swin.py``) under its name, beside its ``default_cfgs`` entry,
    for each released model of ``released.py`` and no other; its docstring, written literally so that grep finds it,
    is the model's ``PAPER_FIGURES`` entry word for word."""
    names = timm.list_models(['inline_*', 'flatten_*'])
    assert sorted(names) == sorted(PAPER_FIGURES)
    for name in names:
        function = timm.models.model_entrypoint(name)
        module = sys.modules[function.__module__]
        assert function.__module__ == 'inline_backbones.models.families.' + name.rsplit('_', 1)[0]
        assert vars(module)[name] is function and function.__code__.co_name == name
        assert function.__doc__ == PAPER_FIGURES[name] and name in module.default_cfgs


@pytest.mark.parametrize('family', FAMILIES)
def test_every_preset_builds_with_its_widths_and_layout(family):
    case = FAMILIES[family]
    for preset, arch in case.backbone.arch_zoo.items():
        with torch.device('meta'):
            model = case.backbone(arch=preset)
        dims = arch['embed_dims']
        widths = [dims * 2 ** i for i in range(len(arch['depths']))] if isinstance(dims, int) else dims
        assert model.num_features == widths and model.attn_type == arch['attn_type'], preset
        assert [len(stage.blocks) for stage in model.layers] == arch['depths']


@pytest.mark.parametrize('family', FAMILIES)
def test_arch_errors_are_the_same_for_every_family(family):
    case = FAMILIES[family]
    with pytest.raises(ValueError) as error:
        case.backbone(arch='huge')
    assert str(error.value) == (f'unknown arch \'huge\' of {case.backbone.family.name}; choose one of '
                                f'{sorted(case.backbone.arch_zoo)} or pass a dict')
    with pytest.raises(ValueError, match=r"lacks \['num_heads'\]"):
        case.backbone(arch={k: v for k, v in case.small.items() if k != 'num_heads'}, attn_type=case.layouts[0])
    with pytest.raises(ValueError, match=r"unknown keys \['window'\]"):
        case.backbone(arch=dict(case.small, window=7), attn_type=case.layouts[0])
    with pytest.raises(ValueError, match='one entry per stage'):
        case.backbone(arch=dict(case.small, num_heads=[1, 2, 4]), attn_type=case.layouts[0])
    example = next(iter(case.backbone.arch_zoo.values()))['attn_type']
    with pytest.raises(ValueError, match=f'^a custom arch needs an attention layout: give attn_type, e.g. "{example}"'):
        case.backbone(arch=case.small)
    for wrapper in (case.backbone, case.classifier):
        with pytest.raises(TypeError) as error:
            wrapper(arch=case.small, attn_type=case.layouts[0], colour='red')
        assert str(error.value) == (f"{wrapper.__name__} got unexpected keyword arguments ['colour']; the "
                                    f'{wrapper.family.name} options are {sorted(wrapper.family.options)}')
    with pytest.raises(TypeError, match='arch must be a str or a dict, got int'):
        case.backbone(arch=3)
    custom = dict(case.small, attn_type=case.layouts[1])
    model = case.backbone(arch=custom)
    assert model.attn_type == case.layouts[1] and model.arch == {**case.backbone.family.arch_defaults, **custom}
    assert model.arch is not custom
    before = (copy.deepcopy(case.backbone.arch_zoo), copy.deepcopy(case.backbone.family.arch_defaults))
    for arch in (custom, next(iter(case.backbone.arch_zoo))):   # each model owns its arch: lists are not shared
        built = case.backbone(arch=arch)
        for value in built.arch.values():
            if isinstance(value, list):
                value.append(0)
    assert custom == dict(case.small, attn_type=case.layouts[1])
    assert (case.backbone.arch_zoo, case.backbone.family.arch_defaults) == before


@pytest.mark.parametrize('family, layout', FAMILY_LAYOUTS)
@pytest.mark.parametrize('size', [(97, 131), (64, 99), (32, 40)])   # both, one, no side padded
def test_any_input_size_gives_every_stride(family, layout, size):
    case = FAMILIES[family]
    model = small_model(family, layout)
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *size))
    for i, out in enumerate(outs):
        h, w = (case.map_side(n, STRIDES[i]) for n in size)
        assert out.shape == (2, model.num_features[i], h, w) and out.is_contiguous()
        assert torch.isfinite(out).all()
    with pytest.raises(ValueError, match=f'^input of 32x31 pixels is too small for {case.backbone.__name__}: each '
                                         'side must be at least 32 '):
        model(torch.randn(1, 3, 32, 31))


@pytest.mark.parametrize('family', FAMILIES)
def test_out_indices_pick_stages_in_order(family):
    case = FAMILIES[family]
    model = case.backbone(arch=case.small, attn_type=case.layouts[1], out_indices=(1, 3)).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 64, 96))
    assert [o.shape for o in outs] == [(1, model.num_features[1], 8, 12), (1, model.num_features[3], 2, 3)]
    assert [hasattr(model, f'norm{i}') for i in range(4)] == [False, case.backbone.family.output_norms] * 2
    ran = []
    early = case.backbone(arch=case.small, attn_type=case.layouts[1], out_indices=(0, 1)).eval()
    for i, stage in enumerate(early.layers):
        stage.register_forward_hook(lambda *_, i=i: ran.append(i))
    with torch.no_grad():
        early(torch.randn(1, 3, 64, 96))
    assert ran == [0, 1]                    # the stages after the last output are not run
    for bad in [(4,), (), (-1,)]:
        with pytest.raises(ValueError) as error:
            case.backbone(arch=case.small, attn_type=case.layouts[1], out_indices=bad)
        assert str(error.value) == f'out_indices {bad} must be non-empty and within [0, 3]'


@pytest.mark.parametrize('family', FAMILIES)
def test_dropout_and_norm_eps_reach_every_block(family):
    case = FAMILIES[family]
    model = case.backbone(arch=case.small, attn_type=case.layouts[0], drop_rate=0.25)
    eps = model.arch.get('block_norm_eps', 1e-5)
    for block in (b for stage in model.layers for b in stage.blocks):
        assert block.mlp.drop1.p == block.mlp.drop2.p == 0.25
        assert block.norm1.eps == block.norm2.eps == eps
    assert family != 'pvt' or eps == 1e-6              # PVT's blocks: not the default 1e-5


def _swin_options_landed(model):
    mixers = [block.attn for stage in model.layers for block in stage.blocks]
    assert model.patch_embed.proj.stride == (2, 2) and model.patch_embed.patch_size == 2
    assert model.inline_window_size == 3
    assert {(type(m).__name__, m.window_size) for m in mixers} == {('InLineAttention', 3), ('WindowAttention', 5)}
    tables = [m.relative_position_bias_table for m in mixers if hasattr(m, 'relative_position_bias_table')]
    assert tables and all(t.shape[0] == (2 * 5 - 1) ** 2 for t in tables)


def _pvt_options_landed(model):
    embeds = [stage.embed for stage in model.layers]
    assert [e.pos_shape for e in embeds] == [(32, 32), (16, 16), (8, 8), (4, 4)]      # 128 / 4, 8, 16, 32
    assert all(e.norm.eps == 1e-3 for e in embeds)
    reductions = [block.attn.norm for stage in model.layers for block in stage.blocks if hasattr(block.attn, 'norm')]
    assert reductions and all(norm.eps == 1e-4 for norm in reductions)


def _cswin_options_landed(model):
    mixers = [block.attn for stage in model.layers for block in stage.blocks]
    assert [m.split_size for m in mixers if hasattr(m, 'split_size')] == [2, 2, 3, 3]   # layout 'SSII'
    assert all(block.mlp.fc1.out_features == 2 * block.mlp.fc1.in_features for stage in model.layers
               for block in stage.blocks)


# Each family's own options, with values none of them defaults to, and where they must land.
FAMILY_OPTIONS = {
    'swin': (dict(window_size=5, patch_size=2, inline_window_size=3), _swin_options_landed),
    'pvt': (dict(pretrain_img_size=128, arch=dict(FAMILIES['pvt'].small, patch_norm_eps=1e-3, sr_norm_eps=1e-4)),
            _pvt_options_landed),
    'cswin': (dict(mlp_ratio=2., arch=dict(FAMILIES['cswin'].small, split_size=[2, 3, 5, 5])), _cswin_options_landed),
}


@pytest.mark.parametrize('family', FAMILIES)
def test_every_option_reaches_every_layer_it_configures(family):
    case = FAMILIES[family]
    options, landed = FAMILY_OPTIONS[family]
    options = dict(dict(arch=case.small), **options)
    model = case.backbone(attn_type=case.layouts[1], qkv_bias=False, drop_rate=0.25, attn_drop_rate=0.125,
                          with_cp=True, **options)
    blocks = [block for stage in model.layers for block in stage.blocks]
    assert {type(block.attn).__name__ for block in blocks} == case.mixers
    for block in blocks:
        assert block.with_cp is True
        assert block.attn.proj_drop.p == 0.25
        projections = [m for name, m in block.attn.named_children() if name in ('qkv', 'q', 'kv')]
        assert projections and all(m.bias is None for m in projections)     # qkv_bias=False
        assert getattr(block.attn, 'attn_drop_rate', 0.125) == 0.125        # the softmax mixers' weights' dropout
    assert sum(hasattr(block.attn, 'attn_drop_rate') for block in blocks) > 0
    block_dropouts = {id(m) for block in blocks for m in block.modules()}
    stem_dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout) and id(m) not in block_dropouts]
    assert stem_dropouts and all(m.p == 0.25 for m in stem_dropouts)    # after the (position) embeddings
    landed(model)


@pytest.mark.parametrize('family', FAMILIES)
def test_defaults_are_the_first_preset_and_rgb_and_in_channels_reach_the_stem(family):
    case = FAMILIES[family]
    with torch.device('meta'):
        default, first = case.backbone(), case.backbone(arch=next(iter(case.backbone.arch_zoo)))
        timm_default = case.classifier()
    assert default.arch == first.arch == timm_default.arch and default.in_channels == 3
    model = case.backbone(arch=case.small, attn_type=case.layouts[0], in_channels=1).eval()
    assert model.in_channels == 1
    with torch.no_grad():
        assert [o.shape[1] for o in model(torch.randn(1, 1, 64, 64))] == model.num_features


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('frozen_stages', [-1, 0, 2, 4])
def test_frozen_stages_freeze_the_stem_and_the_first_stages(family, frozen_stages):
    case = FAMILIES[family]
    model = case.backbone(arch=case.small, attn_type=case.layouts[1], frozen_stages=frozen_stages).train()
    frozen = [getattr(model, name) for name in case.stem] if frozen_stages >= 0 else []
    frozen += [model.layers[i] for i in range(max(frozen_stages, 0))]
    frozen += [getattr(model, f'norm{i}') for i in range(max(frozen_stages, 0)) if hasattr(model, f'norm{i}')]
    frozen_ids = {id(p) for m in frozen for p in m.parameters()}
    for p in model.parameters():
        assert p.requires_grad == (id(p) not in frozen_ids)
    assert all(not m.training for f in frozen for m in f.modules())
    assert all(m.training for m in model.layers[max(frozen_stages, 0):])
    for bad in (-2, 5):
        with pytest.raises(ValueError, match=rf'frozen_stages must be in \[-1, 4\], got {bad}'):
            case.backbone(arch=case.small, attn_type=case.layouts[1], frozen_stages=bad)


@pytest.mark.parametrize('make_batch', [det_batch, seg_batch], ids=['mmdet', 'mmseg'])
@pytest.mark.parametrize('family, layout', FAMILY_LAYOUTS)
@pytest.mark.parametrize('explicit', [True, False], ids=['explicit', 'inferred'])
def test_padding_aware_batched_equals_alone_on_each_region(family, layout, make_batch, explicit):
    worst = region_differences(small_model(family, layout, padding_aware=True), make_batch, explicit)
    assert max(worst) < 1e-4, worst


@pytest.mark.parametrize('family, layout', [(f, c.layouts[0]) for f, c in FAMILIES.items()]
                         + [('swin', 'IIMS2'), ('pvt', 'SSSS')])
def test_without_the_mode_padding_changes_the_features(family, layout):
    """The same comparison with the mode off shows the batch dependence the mode removes."""
    assert max(region_differences(small_model(family, layout), det_batch, explicit=False)) > 1e-2


@pytest.mark.parametrize('family', FAMILIES)
def test_padding_aware_outputs_are_zero_outside_each_region(family):
    batch, shapes = det_batch(images())
    with torch.no_grad():
        outs = small_model(family, FAMILIES[family].layouts[1], padding_aware=True)(batch, image_shapes=shapes)
    for out, stride in zip(outs, STRIDES, strict=True):
        h, w = (FAMILIES[family].region_side(n, stride) for n in IMAGE_SIZES[1])
        assert out[1, :, h:].abs().sum() == 0 and out[1, :, :, w:].abs().sum() == 0
        assert out[1, :, :h, :w].ne(0).float().mean() > 0.99


@pytest.mark.parametrize('family', FAMILIES)
def test_explicit_image_shapes_win_over_inference(family):
    """``image_shapes`` given to ``forward`` is the region, though the pixels (no zero padding) would infer the whole
    input: the output is zero outside it, and equals the model's output on the region's pixels alone."""
    model = small_model(family, FAMILIES[family].layouts[1], padding_aware=True)
    x = torch.randn(1, 3, 96, 128) + 3.
    with torch.no_grad():      # a region cutting through patches: the pixels beyond it are not seen
        given = model(x, image_shapes=[(62, 94)])
        inferred = model(x)
        alone = model(x[..., :62, :94].contiguous())
    for g, i, a in zip(given, inferred, alone, strict=True):
        h, w = a.shape[-2:]
        assert g[..., h:, :].abs().sum() == 0 and g[..., :, w:].abs().sum() == 0 and i[..., h:, :].abs().sum() > 0
        assert ((g[..., :h, :w] - a).norm() / a.norm()) < 1e-4


@pytest.mark.parametrize('family', FAMILIES)
def test_gradient_checkpointing_is_switched_on_every_block_and_changes_no_gradient(family):
    model = small_model(family, FAMILIES[family].layouts[1]).train()
    x = torch.randn(1, 3, 64, 96)
    blocks = [block for stage in model.layers for block in stage.blocks]

    def gradients():
        model.zero_grad()
        sum(o.square().sum() for o in model(x)).backward()
        return [p.grad.clone() for p in model.parameters()]

    assert all(block.with_cp is False for block in blocks)   # off by default
    plain = gradients()
    model.set_grad_checkpointing()           # timm's convention: on by default
    assert all(block.with_cp is True for block in blocks)
    for a, b in zip(gradients(), plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    model.set_grad_checkpointing(False)
    assert all(block.with_cp is False for block in blocks)


@pytest.mark.parametrize('family', FAMILIES)
def test_classifier_and_backbone_share_the_trunk_and_its_checkpoints(family, tmp_path):
    """The timm classifier's file loads strictly into the mmengine backbone (its own loader, init_cfg) and the
    backbone's stage maps are the classifier's intermediates; a file of another size fails naming keys."""
    case = FAMILIES[family]
    torch.manual_seed(0)
    classifier = case.classifier(arch=case.small, attn_type=case.layouts[1], num_classes=5).eval()
    path = tmp_path / 'classifier.pth'
    torch.save({'model': classifier.state_dict()}, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match=f'has sha256 {digest}, the config expects {"0" * 64}'):
        case.backbone(arch=case.small, attn_type=case.layouts[1],
                      init_cfg=dict(type='Pretrained', checkpoint=str(path), sha256='0' * 64)).init_weights()
    backbone = case.backbone(arch=case.small, attn_type=case.layouts[1], out_indices=(0, 1, 2),
                             init_cfg=dict(type='Pretrained', checkpoint=str(path), sha256=digest))
    assert not backbone.is_init
    backbone.init_weights()
    assert backbone.is_init is True          # mmengine's parents then do not initialise it again
    trunk_keys = {k for k in classifier.state_dict() if not k.startswith(('head.', 'norm.'))}
    assert trunk_keys == set(backbone.state_dict()) - {f'norm{i}.{p}' for i in range(3) for p in ('weight', 'bias')}
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        maps = classifier.forward_intermediates(x, indices=[0, 1, 2], intermediates_only=True)
        trunk_maps = [to_nchw(out, tokens) for out, tokens in backbone.eval().iter_stages(x, stop=2)]
    for m, out in zip(maps, trunk_maps, strict=True):
        assert torch.equal(m, out)
    bigger = dict(case.small, num_heads=[2 * h for h in case.small['num_heads']])
    with pytest.raises(CheckpointMismatchError, match='shape mismatch'):
        case.backbone(arch=bigger, attn_type=case.layouts[1],
                      init_cfg=dict(type='Pretrained', checkpoint=str(path))).init_weights()


def script_refusal(name):
    return (f'{name} (inline_backbones) does not support torch.jit.script, alone or inside an fx graph: its layers '
            'branch on Python objects (the token map of each stage, the regions of padding-aware mode), which '
            "TorchScript cannot type. Trace with torch.fx (timm.models.create_feature_extractor / "
            "torch.fx.symbolic_trace through timm's tracer), export with torch.export.export, or compile with "
            'torch.compile (docs/deployment.md)')


@pytest.mark.parametrize('family', FAMILIES)
def test_torchscript_is_refused_with_the_reason_and_the_alternatives(family):
    case = FAMILIES[family]
    classifier = case.classifier(arch=case.small, attn_type=case.layouts[0], num_classes=3)
    for model in (classifier, small_model(family, case.layouts[0])):
        with pytest.raises(RuntimeError) as error:
            torch.jit.script(model)
        assert str(error.value) == script_refusal(type(model).__name__)


@fx_on_unwrapped_code
@pytest.mark.parametrize('family', FAMILIES)
def test_torchscript_of_an_fx_graph_is_refused_the_same_way(family):
    """timm's ``test_model_forward_fx_torchscript``: the graph's leaves are the package's layers."""
    from timm.models import create_feature_extractor
    case = FAMILIES[family]
    classifier = case.classifier(arch=case.small, attn_type=case.layouts[0], num_classes=3)
    graph = create_feature_extractor(classifier, return_nodes={'head': 'logits'})
    with pytest.raises(RuntimeError) as error:
        torch.jit.script(graph)
    assert str(error.value) == script_refusal(case.first_leaf[1])  # the first leaf


@pytest.mark.parametrize('family', FAMILIES)
def test_classifier_defaults_options_and_feature_info(family):
    """timm's defaults (1000 classes, stochastic depth 0.1, no checkpointing), ``feature_info`` naming the stages,
    a one-class head, ``with_cp``, and padded batches refused (the classifier pools every token)."""
    case = FAMILIES[family]
    with torch.device('meta'):
        model = case.classifier()
    blocks = [block for stage in model.layers for block in stage.blocks]
    assert model.head.out_features == model.num_classes == 1000 and model.global_pool == 'avg'
    assert blocks[-1].drop_path.drop_prob == pytest.approx(0.1) and not any(block.with_cp for block in blocks)
    assert model.feature_info == [dict(num_chs=c, reduction=4 * 2 ** i, module=f'layers.{i}')
                                  for i, c in enumerate(model.stage_dims)]
    model = case.classifier(arch=case.small, attn_type=case.layouts[0], num_classes=1, with_cp=True)
    assert isinstance(model.head, torch.nn.Linear) and model.head.out_features == 1
    assert all(block.with_cp is True for stage in model.layers for block in stage.blocks)
    assert not case.classifier(arch=case.small, attn_type=case.layouts[0], padding_aware=False).padding_aware
    with pytest.raises(ValueError) as error:
        case.classifier(arch=case.small, attn_type=case.layouts[0], padding_aware=True)
    assert str(error.value) == ('padding_aware is not supported by the classifier (it pools every token of the '
                                'input): use the mmdet/mmseg backbone for padded batches of different sizes')
    with pytest.raises(ValueError, match='padding_aware is not supported by the classifier'):   # through timm
        timm.create_model(f'{case.timm_prefix}tiny', padding_aware=True, **case.small)
    assert not timm.create_model(f'{case.timm_prefix}tiny', padding_aware=False, **case.small).padding_aware


@pytest.mark.parametrize('family', FAMILIES)
def test_timm_filter_fn_unwraps_and_checks_strictly(family):
    """The ``pretrained_filter_fn`` timm is given: a wrapped (``{'model': ...}``, ``module.``) state dict of the
    model comes back loadable as is; a key the model lacks is an error naming it."""
    case = FAMILIES[family]
    model = case.classifier(arch=case.small, attn_type=case.layouts[0])
    state = model.state_dict()
    wrapped = {'model': {f'module.{k}': v for k, v in state.items()}}
    filtered = checkpoint_filter_fn(wrapped, model)
    assert filtered.keys() == state.keys() and all(filtered[k] is state[k] for k in state)
    wrapped['model']['module.extra'] = torch.zeros(1)
    with pytest.raises(CheckpointMismatchError) as error:
        checkpoint_filter_fn(wrapped, model)
    message = str(error.value)
    assert message.startswith(f"checkpoint 'state dict' does not fit {case.classifier.__name__} (check arch, "
                              'attn_type and that this is an ') and message.endswith(
                                  'checkpoint):\n  unexpected in checkpoint (1): extra')


@pytest.mark.parametrize('family', FAMILIES)
def test_reset_classifier_makes_a_fresh_head(family):
    case = FAMILIES[family]
    model = case.classifier(arch=case.small, attn_type=case.layouts[0], num_classes=3).eval()
    torch.manual_seed(0)
    model.reset_classifier(40, 'avg')
    head = model.head
    assert isinstance(head, torch.nn.Linear) and (head.in_features, head.out_features) == (model.num_features, 40)
    assert model.num_classes == 40 and torch.equal(head.bias, torch.zeros(40))
    assert 0.015 < head.weight.std() < 0.025                          # truncated normal, std 0.02
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 40)
    model.reset_classifier(1)
    assert model.head.out_features == 1 and model.num_classes == 1 and torch.equal(model.head.bias, torch.zeros(1))
    with pytest.raises(ValueError) as error:
        model.reset_classifier(5, 'max')
    assert str(error.value) == "global_pool must be 'avg' or '', got 'max'"


@pytest.mark.parametrize('family', FAMILIES)
def test_forward_intermediates_and_pruning_follow_timm(family):
    """timm's feature interface: the stage maps NCHW or NHWC, ``norm`` on the last stage only, ``indices`` (a list,
    or n = the last n), ``intermediates_only`` stops after the last index, the final map is ``forward_features``;
    ``prune_intermediate_layers`` drops the later stages (and the final norm and head if asked)."""
    case = FAMILIES[family]
    torch.manual_seed(0)
    model = randomized(case.classifier(arch=case.small, attn_type=case.layouts[1], num_classes=5))
    x = torch.randn(2, 3, 96, 128)
    with torch.no_grad():
        trunk = [to_nhwc(out, tokens) for out, tokens in model.iter_stages(x)]
        final, maps = model.forward_intermediates(x)
        assert torch.equal(final, model.forward_features(x)) and torch.equal(final, model.norm(trunk[3]))
        assert [m.shape for m in maps] == [t.permute(0, 3, 1, 2).shape for t in trunk]
        for m, t in zip(maps, trunk, strict=True):
            assert torch.equal(m, t.permute(0, 3, 1, 2)) and m.is_contiguous()
        nhwc = model.forward_intermediates(x, indices=[1, 3], norm=True, output_fmt='NHWC', intermediates_only=True)
        assert len(nhwc) == 2 and torch.equal(nhwc[0], trunk[1]) and torch.equal(nhwc[1], model.norm(trunk[3]))
        last_two = model.forward_intermediates(x, indices=2, intermediates_only=True)
        assert [m.shape[1] for m in last_two] == [f['num_chs'] for f in model.feature_info[2:]]
        stage3 = model.layers[3].forward
        model.layers[3].forward = None                  # calling the last stage fails from here on
        early = model.forward_intermediates(x, indices=[0, 1], intermediates_only=True)
        assert len(early) == 2 and torch.equal(early[1], trunk[1].permute(0, 3, 1, 2))
        model.layers[3].forward = stage3
    with pytest.raises(ValueError, match="output_fmt must be 'NCHW' or 'NHWC', got 'NWHC'"):
        model.forward_intermediates(x, output_fmt='NWHC')
    with torch.no_grad():                               # the final map does not stop at the last index
        assert torch.equal(model.forward_intermediates(x, indices=[0])[0], final)
    norm = model.norm
    assert model.prune_intermediate_layers([0, 1]) == [0, 1]
    assert len(model.layers) == 2 and model.num_classes == 0 and model.global_pool == ''
    assert isinstance(model.head, torch.nn.Identity) and model.norm is norm      # kept unless asked
    assert model.prune_intermediate_layers() == [1] and len(model.layers) == 2   # timm's default: the last index
    model.prune_intermediate_layers([0], prune_norm=True, prune_head=False)
    assert len(model.layers) == 1 and isinstance(model.norm, torch.nn.Identity)


# A three-stage arch of each family.
THREE_STAGES = {'swin': dict(embed_dims=16, depths=[1, 1, 1], num_heads=[1, 2, 4], attn_type='IIS'),
                'cswin': dict(embed_dims=16, depths=[1, 1, 1], num_heads=[2, 2, 4], split_size=[1, 2, 7],
                              attn_type='IIS'),
                'pvt': dict(embed_dims=[16, 32, 48], depths=[1, 1, 1], num_heads=[1, 2, 3], mlp_ratios=[8, 8, 4],
                            sr_ratios=[8, 4, 2], attn_type='IIS')}


@pytest.mark.parametrize('family', FAMILIES)
def test_features_only_follows_the_models_own_depths_and_refuses_out_indices_without_it(family):
    """features_only's default takes every stage of the model built (here three), not timm's five; out_indices
    without features_only is an error naming the options (timm models take it only with features_only)."""
    case = FAMILIES[family]
    arch = THREE_STAGES[family]
    widths = [16, 32, 48] if family == 'pvt' else [16, 32, 64]
    features = timm.create_model(f'{case.timm_prefix}tiny', features_only=True, **arch)
    assert features.feature_info.channels() == widths and features.feature_info.reduction() == [4, 8, 16]
    with torch.no_grad():
        assert [tuple(m.shape) for m in features(torch.randn(1, 3, 64, 96))] == [
            (1, widths[0], 16, 24), (1, widths[1], 8, 12), (1, widths[2], 4, 6)]
    with pytest.raises(TypeError, match=rf"{case.classifier.__name__} got unexpected keyword arguments "
                                        r"\['out_indices'\]"):
        timm.create_model(f'{case.timm_prefix}tiny', out_indices=(1,), **arch)


@fx_on_unwrapped_code
@pytest.mark.parametrize('family', FAMILIES)
def test_fx_graph_of_the_classifier_gives_its_logits(family):
    """timm's fx graph (the mixers and the stem or stage embeddings are leaves) gives the logits and the features,
    at a size that is no multiple of 32."""
    from timm.models import create_feature_extractor, get_graph_node_names

    case = FAMILIES[family]
    torch.manual_seed(0)
    model = randomized(case.classifier(arch=case.small, attn_type=case.layouts[1], drop_path_rate=0.))
    nodes = get_graph_node_names(model)[1]
    assert nodes[-1] == 'head' and 'to_nhwc' in nodes
    assert 'layers.0.blocks.0.attn' in nodes and 'layers.2.blocks.0.attn' in nodes                 # mixers are leaves
    assert case.first_leaf[0] in nodes
    graph = create_feature_extractor(model, return_nodes={'head': 'logits', 'to_nhwc': 'features'})
    x = torch.randn(1, 3, 90, 110)
    with torch.no_grad():
        out = graph(x)
        assert torch.equal(out['logits'], model(x)) and torch.equal(out['features'], model.forward_features(x))


@pytest.mark.parametrize('name', TIMM_MODELS + COMPARISON_MODELS)
def test_timm_default_cfg_contract(name):
    """timm's ``test_model_default_cfgs`` assertions, on the full model at its cfg's input size."""
    model = timm.create_model(name, pretrained=False).eval()
    state_dict = model.state_dict()
    cfg = model.pretrained_cfg
    assert model.output_fmt == 'NHWC' and model.num_classes == 1000
    assert model.num_features == model.head_hidden_size == model.feature_info[-1]['num_chs'] > 0
    x = torch.randn(1, *cfg['input_size'])
    with torch.no_grad():
        features = model.forward_features(x)                                     # NHWC, unpooled
        assert features.shape == (1, *cfg['pool_size'], model.num_features)
        pre_logits = model.forward_head(features, pre_logits=True)
        assert pre_logits.shape == (1, model.head_hidden_size)
        model.reset_classifier(0)
        assert model.num_classes == 0 and torch.equal(model(x), pre_logits)
        model.reset_classifier(0, '')
        assert model(x).shape == (1, *cfg['pool_size'], model.num_features)
    if name.endswith('_tiny'):      # the classifier and pooling removed at construction: the same code for every size
        unpooled = timm.create_model(name, pretrained=False, num_classes=0, global_pool='').eval()
        with torch.no_grad():
            assert unpooled(x).shape == (1, *cfg['pool_size'], model.num_features)
    assert cfg['classifier'] + '.weight' in state_dict and cfg['first_conv'] + '.weight' in state_dict


def _timm_case(name):
    """The family case of timm model ``name`` and the layout of its preset."""
    prefix, arch = name.rsplit('_', 1)
    case = next(c for c in FAMILIES.values() if c.timm_prefix == prefix + '_')
    return case, case.backbone.arch_zoo[arch]['attn_type']


@pytest.mark.parametrize('name', TIMM_MODELS)
def test_timm_img_size_is_accepted_and_changes_nothing(name):
    """timm's ``img_size`` (an int or a pair) builds the same model: the same parameters, the same outputs at 384
    and at 384 x 320; the full preset builds with it; what is not a size is refused by name."""
    case, layout = _timm_case(name)
    with torch.device('meta'):
        full = timm.create_model(name, img_size=384)
    assert full.arch == case.classifier.family.resolve_arch(name.rsplit('_', 1)[1])
    assert full.pretrained_cfg['input_size'] == (3, 224, 224)         # the released weights' size, as timm's Swin
    models = []
    for img_size in (None, 384, (384, 320), [320, 384]):
        torch.manual_seed(0)
        kwargs = {} if img_size is None else dict(img_size=img_size)
        models.append(timm.create_model(name, **case.small, attn_type=layout, drop_path_rate=0., **kwargs).eval())
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        reference = models[0](x)
        assert reference.shape == (1, 1000) and torch.isfinite(reference).all()
        for model in models[1:]:
            assert model.state_dict().keys() == models[0].state_dict().keys()
            assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), models[0].state_dict().values(),
                                                         strict=True))
            assert torch.equal(model(x), reference)
        assert models[1](torch.randn(1, 3, 384, 320)).shape == (1, 1000)
    for bad, error, message in (('384', TypeError, "got '384'"), ((384,), TypeError, r'got \(384,\)'),
                                (True, TypeError, 'got True'), (0, ValueError, 'must be positive, got 0'),
                                ((384, -1), ValueError, r'must be positive, got \(384, -1\)')):
        with pytest.raises(error, match=message):
            timm.create_model(name, img_size=bad, **case.small, attn_type=layout)


@pytest.fixture(scope='module')
def rgb_files(tmp_path_factory):
    """Per family: an RGB classifier of its small arch and first preset's layout (random weights) and its file."""
    files = {}
    for family, case in FAMILIES.items():
        torch.manual_seed(0)
        model = randomized(case.classifier(arch=case.small, attn_type=case.layouts[0], drop_path_rate=0.))
        path = tmp_path_factory.mktemp(family) / 'rgb.pth'
        torch.save({'model': model.state_dict()}, path)
        files[family] = model, path
    return files


@pytest.mark.parametrize('in_chans', [1, 2, 4])
@pytest.mark.parametrize('name', TIMM_MODELS)
def test_timm_in_chans_adapts_the_first_conv_of_an_rgb_file(name, in_chans, rgb_files, caplog):
    """``in_chans`` != 3 with ``pretrained=True``: the file's first conv (the pretrained cfg's ``first_conv``) is
    timm's ``adapt_input_conv(in_chans, W)``, logged, everything else as in the file; with one channel a grey image
    gives the RGB model's output on it repeated to RGB. The same through timm's own loading (a state dict overlay,
    where timm adapts ``first_conv`` after the filter)."""
    import logging

    from timm.models import adapt_input_conv

    family = next(f for f, c in FAMILIES.items() if name.startswith(c.timm_prefix))
    case = FAMILIES[family]
    rgb, path = rgb_files[family]
    key = case.classifier.family.pretrained_cfg['first_conv'] + '.weight'
    arch = dict(**case.small, attn_type=case.layouts[0], drop_path_rate=0.)
    with caplog.at_level(logging.INFO, logger='inline_backbones.models.trunk'):
        model = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)),
                                  in_chans=in_chans, **arch).eval()
    assert (f'checkpoint {key} has 3 input channels, the model {in_chans}: adapted by timm\'s adapt_input_conv'
            in caplog.text)
    file_weight = rgb.state_dict()[key]
    adapted = adapt_input_conv(in_chans, file_weight)
    assert adapted.shape[1] == in_chans
    if in_chans == 1:
        torch.testing.assert_close(adapted, file_weight.sum(dim=1, keepdim=True), rtol=0, atol=0)
    else:
        torch.testing.assert_close(adapted, file_weight.repeat(1, 2, 1, 1)[:, :in_chans] * 3 / in_chans)
    own = model.state_dict()
    assert torch.equal(own[key], adapted)
    assert all(torch.equal(own[k], v) for k, v in rgb.state_dict().items() if k != key)
    overlay = timm.create_model(name, pretrained=True, in_chans=in_chans, **arch,
                                pretrained_cfg_overlay=dict(state_dict={'model': rgb.state_dict()}))
    assert all(torch.equal(a, b) for a, b in zip(overlay.state_dict().values(), own.values(), strict=True))
    if in_chans == 1:
        grey = torch.rand(2, 1, 64, 96)
        with torch.no_grad():
            torch.testing.assert_close(model(grey), rgb(grey.repeat(1, 3, 1, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('family', FAMILIES)
def test_backbone_in_channels_adapts_an_rgb_file_as_timm_does(family, rgb_files):
    """The mmdet/mmseg backbone with ``in_channels=1`` and ``init_cfg`` ``Pretrained`` of an RGB file: the first
    conv summed over RGB (logged in mmengine's current logger), the stage maps of a grey image those of the RGB
    backbone on it repeated; a file of other than 3 channels into another count is refused naming the shapes."""
    import logging.handlers

    from mmengine.logging import MMLogger

    case = FAMILIES[family]
    _, path = rgb_files[family]
    key = case.backbone.family.pretrained_cfg['first_conv'] + '.weight'
    kwargs = dict(arch=case.small, attn_type=case.layouts[0], drop_path_rate=0.)
    rgb = case.backbone(**kwargs, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    rgb.init_weights()
    grey = case.backbone(**kwargs, in_channels=1, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    log = logging.handlers.BufferingHandler(capacity=100)
    MMLogger.get_current_instance().addHandler(log)         # mmengine's current logger: a Runner's log
    try:
        grey.init_weights()
    finally:
        MMLogger.get_current_instance().removeHandler(log)
    assert (f"checkpoint {key} has 3 input channels, the model 1: adapted by timm's adapt_input_conv (summed over the "
            'channels)') in [record.getMessage() for record in log.buffer]
    assert torch.equal(grey.state_dict()[key], rgb.state_dict()[key].sum(dim=1, keepdim=True))
    x = torch.rand(1, 1, 64, 96)
    with torch.no_grad():
        for a, b in zip(grey.eval()(x), rgb.eval()(x.repeat(1, 3, 1, 1)), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    two = path.parent / 'two_channels.pth'
    rgb_state = torch.load(path, weights_only=True)['model']
    torch.save({'model': {k: v[:, :2] if k == key else v for k, v in rgb_state.items()}}, two)
    with pytest.raises(CheckpointMismatchError, match=rf'shape mismatch.*{re.escape(key)}: checkpoint \(\d+, 2, '):
        case.backbone(**kwargs, in_channels=4, init_cfg=dict(type='Pretrained', checkpoint=str(two))).init_weights()
