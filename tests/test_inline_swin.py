"""InLine-Swin: equal to the authors' model (released-format fixtures made by their code, in every backbone mode), the
released T/S/B keys and shapes and the family's key filter (the released / timm and mmdet formats, what the backbone
and the classifier drop, unknown and mixed formats failing by their keys), layout ``SSSS`` equal to mmdet's and
mmseg's Swin (weights through mmdet's converter, and their state dicts through the filter), the presets' shapes,
layouts and parameter counts, Swin's shift rule, and windowed InLine (``inline_window_size``): global when the window
covers the map, the authors' roll-and-partition otherwise, per-image clipped windows in padding-aware mode. The
family contract (``test_family_contract.py``) covers the rest, ``test_backbone.py`` the backbone machinery every
family shares."""
import copy
import io
import re

import pytest
import released_fixtures as rf
import timm
import torch
import torch.nn.functional as F
from padding_cases import det_batch, region_differences, small_backbone
from reference_attention import naive_inline_attention

from inline_backbones import (
    CheckpointMismatchError,
    InLineAttention,
    InLineSwinClassifier,
    InLineSwinTransformer,
    WindowAttention,
)
from inline_backbones.checkpoints.loading import FilteredStateDict, filter_state_dict, load_checkpoint_file
from inline_backbones.models.families.swin_checkpoint import RELEASED_BUFFERS, checkpoint_filter_fn, detect_format
from inline_backbones.models.stages import Stage
from inline_backbones.models.tokens.token_map import TokenMap

SMALL = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


# ---------------------------------------------------------------------------------------------------------------
# equal to the authors' model


@pytest.mark.parametrize('kernel_func', rf.KERNELS)
@pytest.mark.parametrize('layout', rf.LAYOUTS)
def test_stage_tokens_equal_the_authors_model(layout, kernel_func):
    expected = rf.expected(layout)
    backbone = rf.released_backbone(layout, kernel_func)
    rf.assert_stage_tokens_equal(rf.stage_tokens(backbone, expected['x']), expected[kernel_func]['stage_tokens'])


def test_a_different_kernel_gives_different_tokens():
    """The comparison can fail: the identity model's tokens are not the exp fixture's."""
    expected = rf.expected('IIIS')
    tokens = rf.stage_tokens(rf.released_backbone('IIIS', 'identity'), expected['x'])
    with pytest.raises(AssertionError, match='relative difference'):
        rf.assert_stage_tokens_equal(tokens, expected['exp']['stage_tokens'])


MODES = {'padding-aware': dict(padding_aware=True), 'windowed-56': dict(inline_window_size=56),
         'padding-aware-windowed-56': dict(padding_aware=True, inline_window_size=56)}


@pytest.mark.parametrize('kernel_func', rf.KERNELS)
@pytest.mark.parametrize('layout', rf.LAYOUTS)
@pytest.mark.parametrize('mode', MODES)
def test_every_backbone_mode_equals_the_authors_model_at_224(mode, layout, kernel_func):
    """At 224 the authors' windows of 56 cover every map (so they are global) and nothing is padded."""
    expected = rf.expected(layout)
    backbone = rf.released_backbone(layout, kernel_func, **MODES[mode])
    rf.assert_stage_tokens_equal(rf.stage_tokens(backbone, expected['x']), expected[kernel_func]['stage_tokens'])


def test_no_shift_at_the_7x7_last_stage_at_224():
    """At 224 the last stage is 7x7 = one window: the release does not shift there (its state dicts
    hold no ``attn_mask`` for those blocks) and neither do we. Running the last stage's shifted block
    with a shift mask anyway moves the tokens off the authors' outputs, so the fixture pins the rule."""
    expected = rf.expected('IIIS')
    backbone = rf.released_backbone('IIIS')
    tokens = rf.stage_tokens(backbone, expected['x'])
    rf.assert_stage_tokens_equal(tokens, expected['identity']['stage_tokens'])
    released = load_checkpoint_file(rf.checkpoint_path('IIMS2'))['model']
    assert 'layers.2.blocks.3.attn_mask' in released and 'layers.3.blocks.1.attn_mask' not in released

    last = backbone.layers[3]
    assert [b.attn.shift for b in last.blocks] == [False, True]
    stage3_out = tokens[2]
    x, token_map = backbone.layers[2].downsample(stage3_out, TokenMap.of(stage3_out, (14, 14)))
    assert token_map.hw_shape == (7, 7) and token_map.shift_size(7, True) == 0
    with torch.no_grad():
        x = last.blocks[0](x, token_map)
        token_map.shift_size = lambda window_size, shifted: 3 if shifted else 0   # force Swin's shift
        shifted = last.blocks[1](x, token_map)
    with pytest.raises(AssertionError, match='relative difference'):
        rf.assert_stage_tokens_equal([shifted], [expected['identity']['stage_tokens'][3]])


# ---------------------------------------------------------------------------------------------------------------
# the released files and the key filter


@pytest.mark.parametrize('arch', ['tiny', 'small', 'base'])
def test_state_dict_is_exactly_the_released_one(arch):
    """Every key and shape of the downloadable T/S/B files, except the buffers the model rebuilds."""
    released = rf.released_shapes(arch)
    with torch.device('meta'):
        model = timm.create_model(f'inline_swin_{arch}')
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    dropped = {k for k in released['state_dict'] if k.endswith(RELEASED_BUFFERS)}
    assert {k: v for k, v in released['state_dict'].items() if k not in dropped} == ours
    # dropped on purpose: the softmax blocks' index tables and shifted blocks' masks, rebuilt by our modules
    modules = dict(model.named_modules())
    for key in dropped:
        owner, name = key.rsplit('.', 1)
        assert name in ('relative_position_index', 'attn_mask') and owner in modules, key
    assert model.attn_type == released['config']['attn_type']


def test_backbone_drops_classifier_parts_and_buffers():
    """The authors' file into the backbone: head, final norm and rebuilt buffers dropped, the output norms
    optional, the strict check's hint named."""
    released = load_checkpoint_file(rf.checkpoint_path('IIMS2'))['model']
    model = InLineSwinTransformer(arch=rf.mini_arch('IIMS2'), attn_type='IIMS2', out_indices=(1, 3))
    filtered = checkpoint_filter_fn(released, model)
    assert isinstance(filtered, FilteredStateDict)
    assert filtered.optional_prefixes == ('norm0.', 'norm1.', 'norm2.', 'norm3.')
    assert 'InLine-Swin' in filtered.hint
    dropped = set(released) - set(filtered)
    assert any(k.endswith('attn_mask') for k in dropped) and {'head.weight', 'norm.weight'} <= dropped
    assert all(k.startswith(('head.', 'norm.')) or k.endswith(RELEASED_BUFFERS) for k in dropped), dropped
    assert sorted(filtered) == sorted(k for k in model.state_dict() if not k.startswith(('norm1.', 'norm3.')))


@pytest.mark.parametrize('num_classes', [1000, 7, 0])
def test_classifier_keeps_or_drops_the_head_by_class_count(num_classes):
    """The file's 1000-class head is kept by a 1000-class classifier, dropped (the model's new head optional)
    for 7 classes, dropped for a headless one; the final norm is always kept."""
    released = load_checkpoint_file(rf.checkpoint_path('IIIS'))['model']
    model = InLineSwinClassifier(attn_type='IIIS', num_classes=num_classes, **rf.mini_arch('IIIS'))
    filtered = checkpoint_filter_fn(released, model)
    assert torch.equal(filtered['norm.weight'], released['norm.weight'])
    assert ('head.weight' in filtered) == (num_classes == 1000)
    assert ('head.' in filtered.optional_prefixes) == (num_classes == 7)
    loaded = filter_state_dict(model, released)            # strict check passes in every case
    assert sorted(loaded) == sorted(k for k in model.state_dict() if num_classes == 1000 or not k.startswith('head.'))


def test_unknown_format_fails_listing_keys():
    model = InLineSwinTransformer(arch=SMALL, attn_type='SSSS')
    state = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointMismatchError) as err:
        filter_state_dict(model, state, source='det.pth')
    message = str(err.value)
    assert message.startswith("checkpoint 'det.pth' does not fit InLineSwinTransformer: its keys are in no "
                              'InLine-Swin checkpoint format')
    assert "prefix='backbone.'" in message
    assert f'unexpected in checkpoint ({len(state)}): backbone.patch_embed.proj.weight, ' in message
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoint_filter_fn({'fc.weight': torch.zeros(2, 2), 'fc.bias': torch.zeros(2)}, model)
    assert str(err.value) == ('its keys are in no InLine-Swin checkpoint format (released InLine-Swin / timm: '
                              'patch_embed.proj.*, layers.*; mmdet / mmpretrain Swin: patch_embed.projection.*, '
                              'stages.*):\n  unexpected in checkpoint (2): fc.weight, fc.bias')
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoint_filter_fn({'backbone.fc.weight': torch.zeros(2, 2)}, model)
    assert str(err.value).endswith("stages.*); a detector's or segmentor's checkpoint needs prefix='backbone.' "
                                   '(init_cfg prefix):\n  unexpected in checkpoint (1): backbone.fc.weight')


def test_mixed_formats_fail_listing_both():
    own = InLineSwinTransformer(arch=SMALL, attn_type='SSSS').state_dict()
    state = {**own, 'stages.0.blocks.0.norm1.weight': torch.ones(32)}
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoint_filter_fn(state, InLineSwinTransformer(arch=SMALL, attn_type='SSSS'))
    released = [k for k in own if k.startswith(('patch_embed.proj.', 'layers.'))]
    assert str(err.value) == ('its keys mix two InLine-Swin checkpoint formats (released/timm and mmdet/mmpretrain '
                              f"Swin):\n  released-format keys ({len(released)}): {', '.join(released[:20])} ...\n"
                              '  mmdet-format keys (1): stages.0.blocks.0.norm1.weight')


# ---------------------------------------------------------------------------------------------------------------
# layout SSSS is mmdet's and mmseg's Swin


def _randomise(model):
    """Non-trivial values in every parameter (LayerNorms, bias tables and the patch-merging norms included,
    so a wrong channel order of the merging's 4C channels shows)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if 'norm' in name else 0.05) + (1.0 if 'norm' in name and
                                                                                 name.endswith('weight') else 0.0))
    return model


@pytest.mark.parametrize('arch', ['tiny', pytest.param('base', marks=pytest.mark.slow)])
@pytest.mark.parametrize('size', [(256, 320), (250, 333)])
def test_ssss_equals_mmdet_swin(arch, size):
    """Every stage larger than a window (last map >= 8x8), including sizes that need padding."""
    swin = pytest.importorskip('mmdet.models.backbones.swin')
    ours = _randomise(InLineSwinTransformer(arch, attn_type='SSSS', drop_path_rate=0.)).eval()
    preset = InLineSwinTransformer.arch_zoo[arch]
    ref = swin.SwinTransformer(embed_dims=preset['embed_dims'], depths=preset['depths'],
                               num_heads=preset['num_heads'], window_size=7, drop_path_rate=0.)
    ref.eval()
    # Our keys are the released (official Swin) ones: convert them with mmdet's own converter.
    converted = {k.removeprefix('backbone.'): v for k, v in swin.swin_converter(ours.state_dict()).items()}
    missing, unexpected = ref.load_state_dict(converted, strict=False)
    assert not unexpected
    assert all(k.endswith('relative_position_index') for k in missing), missing

    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        for a, b in zip(ours(x), ref(x), strict=True):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope='module')
def mmdet_swin():
    swin = pytest.importorskip('mmdet.models.backbones.swin')
    torch.manual_seed(1)
    ref = _randomise(swin.SwinTransformer(window_size=7, drop_path_rate=0., **SMALL))
    ref.eval()
    return ref


@pytest.mark.parametrize('size', [(224, 224), (256, 256), (250, 333)])
def test_mmdet_swin_state_dict_gives_mmdet_outputs(tmp_path, mmdet_swin, size):
    """mmdet's ``SwinTransformer`` state dict (a detector's, ``backbone.`` prefix) through ``init_cfg`` into
    layout SSSS: every stage's output equals mmdet's (< 1e-5 relative), odd sizes included."""
    path = tmp_path / 'mask_rcnn_swin.pth'
    torch.save({'meta': {}, 'state_dict': {f'backbone.{k}': v for k, v in mmdet_swin.state_dict().items()}}, path)
    ours = InLineSwinTransformer(arch=SMALL, attn_type='SSSS', drop_path_rate=0.,
                                 init_cfg=dict(type='Pretrained', checkpoint=str(path), prefix='backbone.'))
    ours.init_weights()
    ours.eval()
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        outs = ours(x)
    shifts = [b.attn.shift_size for b in mmdet_swin.stages[3].blocks]
    if min(outs[3].shape[-2:]) <= 7:
        # The last map (7x7 at 224) fits in one window: official Swin (and this package) do not shift there,
        # mmdet does (with its seam mask). Compare with mmdet's blocks set to Swin's rule.
        for b in mmdet_swin.stages[3].blocks:
            b.attn.shift_size = 0
    try:
        with torch.no_grad():
            refs = mmdet_swin(x)
    finally:
        for b, s in zip(mmdet_swin.stages[3].blocks, shifts, strict=True):
            b.attn.shift_size = s
    assert len(outs) == len(refs) == 4
    for a, b in zip(outs, refs, strict=True):
        assert a.shape == b.shape
        assert rf.rel_diff(a, b) < 1e-5


def test_mmseg_swin_state_dict_gives_mmseg_outputs():
    """mmseg's ``SwinTransformer`` has the same keys: its state dict gives its outputs too (a non-square size)."""
    swin = pytest.importorskip('mmseg.models.backbones.swin')
    ref = _randomise(swin.SwinTransformer(window_size=7, drop_path_rate=0., **SMALL))
    ref.eval()
    ours = InLineSwinTransformer(arch=SMALL, attn_type='SSSS', drop_path_rate=0.)
    assert load_pretrained_state(ours, ref.state_dict())
    ours.eval()
    x = torch.randn(1, 3, 256, 320)
    with torch.no_grad():
        for a, b in zip(ours(x), ref(x), strict=True):
            assert rf.rel_diff(a, b) < 1e-5


def load_pretrained_state(model, state_dict):
    """The generic loader's steps after reading a file: filter, strict check, load; the keys loaded."""
    state_dict = filter_state_dict(model, state_dict)
    model.load_state_dict(state_dict, strict=False)
    return sorted(state_dict)


def test_mmdet_format_comparison_can_fail(mmdet_swin):
    """Loading mmdet's patch-merging weights without reordering their channels changes the outputs (the
    test above has teeth for the reordering), and so does a model of another layout: it fails by name."""
    state = dict(mmdet_swin.state_dict())
    ours = InLineSwinTransformer(arch=SMALL, attn_type='SSSS', drop_path_rate=0.)
    load_pretrained_state(ours, state)
    ours.eval()
    unordered = {k.replace('stages.', 'layers.').replace('attn.w_msa.', 'attn.').replace('ffn.layers.0.0.', 'mlp.fc1.')
                 .replace('ffn.layers.1.', 'mlp.fc2.').replace('patch_embed.projection.', 'patch_embed.proj.'): v
                 for k, v in state.items() if not k.endswith('relative_position_index')}
    naive = InLineSwinTransformer(arch=SMALL, attn_type='SSSS', drop_path_rate=0.)
    naive.load_state_dict(unordered)
    naive.eval()
    x = torch.randn(1, 3, 256, 256)
    with torch.no_grad():
        assert rf.rel_diff(naive(x)[1], ours(x)[1]) > 1e-2
    with pytest.raises(CheckpointMismatchError, match=r'missing in checkpoint .*layers\.0\.blocks\.0\.attn\.residual'):
        filter_state_dict(InLineSwinTransformer(arch=SMALL, attn_type='IIIS'), state)


def test_mmdet_format_is_the_inverse_of_mmdets_converter():
    """Our released-format state dict -> mmdet's ``swin_converter`` -> our filter gives every tensor back
    exactly (the patch-merging reduction and norm included), for InLine layouts too."""
    swin = pytest.importorskip('mmdet.models.backbones.swin')
    for layout in ('SSSS', 'IISS'):
        model = _randomise(InLineSwinTransformer(arch=SMALL, attn_type=layout))
        own = model.state_dict()
        mmdet_keys = {k.removeprefix('backbone.'): v for k, v in swin.swin_converter(own).items()}
        assert detect_format(mmdet_keys) == 'mmdet' and 'stages.0.downsample.reduction.weight' in mmdet_keys
        back = filter_state_dict(model, mmdet_keys)
        assert sorted(back) == sorted(own)
        for k, v in own.items():
            assert torch.equal(back[k], v), k


# ---------------------------------------------------------------------------------------------------------------
# the presets and Swin's shift rule


def _attention_types(model):
    return [[type(b.attn) for b in stage.blocks] for stage in model.layers]


@pytest.mark.slow
@pytest.mark.parametrize('arch, channels', [('tiny', 96), ('small', 96), ('base', 128)])
@pytest.mark.parametrize('size', [(97, 131), (224, 224)])
def test_presets_shapes_at_odd_and_non_square_sizes(arch, channels, size):
    model = InLineSwinTransformer(arch=arch, drop_path_rate=0.)
    model.init_weights()
    model.eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    H, W = size
    for i, out in enumerate(outs):
        h, w = -(-H // 4), -(-W // 4)
        for _ in range(i):
            h, w = -(-h // 2), -(-w // 2)
        assert out.shape == (1, channels * 2 ** i, h, w)
        assert torch.isfinite(out).all()


def test_preset_layouts_and_parameter_counts():
    tiny = InLineSwinTransformer('tiny')
    assert _attention_types(tiny)[2] == [InLineAttention] * 6
    assert _attention_types(tiny)[3] == [WindowAttention] * 2
    base = InLineSwinTransformer('base')
    assert _attention_types(base)[2] == [InLineAttention] * 2 + [WindowAttention] * 16
    small = InLineSwinTransformer('small', attn_type='SSSS')
    assert all(t == WindowAttention for stage in _attention_types(small) for t in stage)
    # Trunk sizes of the released models (classifier and final norm excluded): about 28M / 49M / 87M like Swin.
    n = {a: sum(p.numel() for p in InLineSwinTransformer(a).parameters()) / 1e6 for a in ('tiny', 'small', 'base')}
    assert 27 < n['tiny'] < 30 and 48 < n['small'] < 51 and 85 < n['base'] < 90, n


def _stage_without_shift(stage):
    unshifted = copy.deepcopy(stage)
    for block in unshifted.blocks:
        block.attn.shift = False
    return unshifted


@pytest.mark.parametrize('hw, shifts', [((7, 10), False), ((10, 7), False), ((7, 7), False), ((8, 10), True),
                                        ((10, 8), True), ((15, 9), True)])
def test_window_stage_shifts_only_when_both_sides_exceed_the_window(hw, shifts):
    """The released rule: no shift when min(H, W) <= window (7). A stage compared with a copy whose
    blocks never shift gives the same tokens exactly when the rule says no shift."""
    stage = Stage(32, 2, [dict(type='window', window_size=7)] * 2, mlp_ratio=4., drop_rate=0., drop_path_rates=[0., 0.],
                  with_cp=False).eval()
    assert all(isinstance(b.drop_path, torch.nn.Identity) for b in stage.blocks)   # rates 0: no drop path
    with torch.no_grad():
        for p in stage.parameters():
            p.add_(0.05 * torch.randn_like(p))
        x = torch.randn(2, hw[0] * hw[1], 32)
        out = stage(x, TokenMap.of(x, hw))[0]
        unshifted = _stage_without_shift(stage)(x, TokenMap.of(x, hw))[0]
    assert torch.equal(out, unshifted) != shifts


def test_only_the_last_stage_skips_the_shift_at_224x320():
    """At 224x320 the stage maps are 56x80, 28x40, 14x20 and 7x10: stages 1-3 shift, stage 4 does not."""
    model = InLineSwinTransformer(arch=SMALL, attn_type='SSSS', drop_path_rate=0.).eval()
    captured = []
    hooks = [stage.register_forward_hook(lambda m, i, out: captured.append((i[0], i[1], out[0])))
             for stage in model.layers]
    with torch.no_grad():
        model(torch.randn(1, 3, 224, 320))
        for h in hooks:
            h.remove()
        sizes = [tokens.hw_shape for _, tokens, _ in captured]
        same = [torch.equal(_stage_without_shift(stage)(x, tokens)[0], out)
                for stage, (x, tokens, out) in zip(model.layers, captured, strict=True)]
    assert sizes == [(56, 80), (28, 40), (14, 20), (7, 10)]
    assert same == [False, False, False, True]


# ---------------------------------------------------------------------------------------------------------------
# windowed InLine (inline_window_size)


def windowed(attn, x, hw_shape, window_size, shift, region_shapes=None):
    """``attn`` (global) on the windows of the map, through the windowed layer with the same weights."""
    layer = InLineAttention(attn.embed_dims, attn.num_heads, kernel_func=attn.kernel_func, window_size=window_size,
                            shift=shift)
    layer.load_state_dict(attn.state_dict())
    return layer.eval()(x, TokenMap.of(x, hw_shape, region_shapes))


@pytest.mark.parametrize('padding_aware', [False, True])
def test_a_window_covering_the_map_is_global_inline(padding_aware):
    x = torch.randn(2, 3, 96, 160)                        # stage maps 24x40, 12x20, 6x10, 3x5
    with torch.no_grad():
        ref = small_backbone('tiny', padding_aware=padding_aware)(x)
        out = small_backbone('tiny', padding_aware=padding_aware, inline_window_size=40)(x)
    for a, b in zip(out, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_smaller_window_is_not_global():
    """The comparison above can fail: windows of 8 change the features."""
    x = torch.randn(1, 3, 96, 160)
    with torch.no_grad():
        ref = small_backbone('tiny')(x)
        out = small_backbone('tiny', inline_window_size=8)(x)
    assert (out[0] - ref[0]).norm() / ref[0].norm() > 1e-2


def authors_windows(attn, x, hw_shape, ws, shift):
    """Written out as the authors' block does it: zero-pad to a window multiple, roll by -ws // 2 when
    shifted, InLine on every window as an image of its own (no seam mask), roll back, crop."""
    B, N, C = x.shape
    H, W = hw_shape
    grid = F.pad(x.view(B, H, W, C), (0, 0, 0, (-W) % ws, 0, (-H) % ws))
    s = ws // 2 if shift else 0
    grid = torch.roll(grid, (-s, -s), (1, 2))
    out = torch.empty_like(grid)
    for r in range(0, grid.shape[1], ws):
        for c in range(0, grid.shape[2], ws):
            window = grid[:, r:r + ws, c:c + ws].reshape(B, ws * ws, C)
            out[:, r:r + ws, c:c + ws] = naive_inline_attention(attn, window, (ws, ws)).view(B, ws, ws, C)
    return torch.roll(out, (s, s), (1, 2))[:, :H, :W].reshape(B, N, C)


@pytest.mark.parametrize('hw_shape', [(16, 24), (13, 20)])
@pytest.mark.parametrize('shift', [False, True])
def test_windows_equal_the_authors_roll_and_partition(hw_shape, shift):
    attn = InLineAttention(16, 2).eval()
    x = torch.randn(2, hw_shape[0] * hw_shape[1], 16)
    with torch.no_grad():
        torch.testing.assert_close(windowed(attn, x, hw_shape, 8, shift),
                                   authors_windows(attn, x, hw_shape, 8, shift), rtol=1e-4, atol=1e-5)


def clipped_windows(attn, own, ws, shift):
    """Padding-aware reference for one image alone (h x w tokens): windows at rows/cols
    [s + (k - 1) ws, s + k ws) clipped to the image, each attended as an image of its own."""
    _, h, w, C = own.shape
    s = ws // 2 if shift and min(h, w) > ws else 0
    out = torch.empty_like(own)
    edges = lambda n: [(max(a, 0), min(a + ws, n)) for a in range(s - ws if s else 0, n, ws)]  # noqa: E731
    for r0, r1 in edges(h):
        for c0, c1 in edges(w):
            part = own[:, r0:r1, c0:c1].reshape(1, -1, C)
            out[:, r0:r1, c0:c1] = naive_inline_attention(attn, part, (r1 - r0, c1 - c0)).view(1, r1 - r0, c1 - c0, C)
    return out


@pytest.mark.parametrize('shift', [False, True])
def test_padding_aware_windows_are_each_images_clipped_windows(shift):
    """Two images (19 x 21 and 7 x 30 tokens, the second too thin to shift) in a 24 x 32 map."""
    attn = InLineAttention(16, 2, kernel_func='exp').eval()
    H, W, regions = 24, 32, [(19, 21), (7, 30)]
    x = torch.randn(2, H * W, 16)
    with torch.no_grad():
        out = windowed(attn, x, (H, W), 8, shift, torch.tensor(regions)).view(2, H, W, 16)
        for b, (h, w) in enumerate(regions):
            ref = clipped_windows(attn, x.view(2, H, W, 16)[b:b + 1, :h, :w], 8, shift)
            torch.testing.assert_close(out[b:b + 1, :h, :w], ref, rtol=1e-4, atol=1e-5)
            assert out[b, h:].abs().max() == 0 and out[b, :, w:].abs().max() == 0


def test_windowed_inline_is_batch_invariant_too():
    """Windows of 8 tokens (shifted on odd blocks) on maps of 40 x 56 down to 5 x 7 tokens."""
    model = small_backbone('tiny', padding_aware=True, inline_window_size=8)
    assert max(region_differences(model, det_batch, explicit=True)) < 1e-4


def test_runs_at_detection_resolution_shape():
    """800 x 1333 (padded to 1344 as mmdet does) with windows of 56: the stage maps the benchmark times,
    on a thin trunk so the test stays fast."""
    model = small_backbone('tiny', padding_aware=True, inline_window_size=56)
    x = torch.randn(1, 3, 800, 1344)
    with torch.no_grad():
        outs = model(x, image_shapes=[(800, 1333)])
    assert [o.shape[-2:] for o in outs] == [(200, 336), (100, 168), (50, 84), (25, 42)]
    assert all(torch.isfinite(o).all() for o in outs)


def test_inline_window_size_must_be_none_or_a_positive_int():
    for bad in (0, -2, True, 2.0, '8'):
        with pytest.raises(ValueError) as error:
            small_backbone('tiny', inline_window_size=bad)
        assert str(error.value) == f'inline_window_size must be None or a positive int, got {bad!r}'
    model = small_backbone('tiny', inline_window_size=1)                   # windows of one token: allowed
    assert {b.attn.window_size for s in model.layers for b in s.blocks if isinstance(b.attn, InLineAttention)} == {1}
    with pytest.raises(ValueError) as error:
        small_backbone('tiny', attn_type='LIIS', inline_window_size=8)
    assert str(error.value) == ("layout 'LIIS' has plain linear attention blocks (letter L, an ablation), which "
                                'attend globally: inline_window_size must be None')


def test_the_torchscript_onnx_exporter_is_refused_with_the_exporter_that_works():
    """Windows of InLine attention trace (torch.jit.trace, as FLOP counting does), but the TorchScript ONNX
    exporter cannot give the dynamic depthwise convolution a kernel shape: a whole message naming the fix."""
    class Windowed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = InLineAttention(32, 2, window_size=4, shift=True)

        def forward(self, x):
            return self.attn(x, TokenMap.of(x, (8, 8)))

    model, x = Windowed().eval(), torch.randn(1, 64, 32)
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.trace(model, (x,))(x), model(x))
    message = ('InLine attention in windows (inline_window_size) cannot be exported by the TorchScript ONNX exporter '
               '(dynamo=False): the window count is not a constant in its graph, so the dynamic depthwise convolution '
               'has no known kernel shape. Use the default exporter (dynamo=True)')
    with pytest.raises(NotImplementedError, match='^' + re.escape(message) + '$'):
        torch.onnx.export(model, (x,), io.BytesIO(), dynamo=False)
