"""InLinePVT: equal to the authors' model (released-format fixtures), the released T/S/M/L keys and parameter
counts, PVT v1 (layout SSSS) equal to mmdet's, position-embedding resizing, padding-aware mode where it is PVT's own
(bit-equal to the plain model on a full batch, padding to 32 itself), clear failures."""
import re

import pvt_fixtures as pf
import pytest
import torch
import torch.nn.functional as F
from padding_cases import det_batch, images, randomized, relative_difference_on_region
from released_fixtures import rel_diff

from inline_backbones import CheckpointMismatchError, InLinePVT
from inline_backbones.models.families.pvt_checkpoint import from_released
from inline_backbones.models.families.pvt_embed import region_pos_embed, resize_pos_embed
from inline_backbones.models.mixers.pvt_attention import InLinePVTAttention
from inline_backbones.models.tokens.token_map import TokenMap


@pytest.mark.parametrize('size', pf.SIZES)
@pytest.mark.parametrize('layout', pf.LAYOUTS)
def test_stage_outputs_equal_the_authors_model(layout, size):
    """init_cfg Pretrained with the released-format file: every stage's NCHW output is the authors' stage tokens."""
    case = pf.expected(layout)[size]
    with torch.no_grad():
        outs = pf.released_backbone(layout)(case['x'])
    for out, ref in zip(outs, case['stage_tokens'], strict=True):
        assert out.flatten(2).transpose(1, 2).shape == ref.shape
        assert rel_diff(out.flatten(2).transpose(1, 2), ref) < 1e-4


def test_the_fixture_comparison_can_fail():
    """The IIII file's outputs are far from the IISS fixture's in the stages where the layouts differ."""
    case = pf.expected('IISS')['224x224']
    with torch.no_grad():
        outs = pf.released_backbone('IIII')(case['x'])
    assert rel_diff(outs[2].flatten(2).transpose(1, 2), case['stage_tokens'][2]) > 1e-2


def to_released(state_dict):
    """Our backbone keys -> the authors' (the inverse of :func:`from_released`)."""
    out = {}
    for key, value in state_dict.items():
        i, kind, rest = re.fullmatch(r'layers\.(\d+)\.(embed|blocks)\.(.*)', key).groups()
        i = int(i) + 1
        out[f'block{i}.{rest}' if kind == 'blocks' else f'pos_embed{i}' if rest == 'pos_embed'
            else f'patch_embed{i}.{rest}'] = value
    return out


@pytest.mark.parametrize('arch', ['tiny', 'small', 'medium', 'large'])
def test_every_released_key_maps_with_its_shape_and_the_counts_are_the_authors(arch):
    ref = pf.released(arch)
    with torch.device('meta'):
        model = InLinePVT(arch)
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    released = {k: v for k, v in ref['state_dict'].items() if not k.startswith('head.')}
    assert from_released(released) == ours
    assert to_released(ours) == released
    head = sum(torch.Size(v).numel() for k, v in ref['state_dict'].items() if k.startswith('head.'))
    assert sum(p.numel() for p in model.parameters()) + head == ref['params']
    assert model.attn_type == ref['attn_type'] and ref['la_sr_ratios'] == '1111'


def _randomize(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if 'norm' in name else 0.05)
                    + (1.0 if 'norm' in name and name.endswith('weight') else 0.))
    return model.eval()


@pytest.mark.parametrize('size', [(224, 224), (256, 320), (250, 330)])
def test_ssss_with_pvt_v1_arch_equals_mmdet_pvt(size):
    """Layout SSSS with PVT v1's arch is mmdet's PyramidVisionTransformer (weights through mmdet's pvt_convert)."""
    mmdet_pvt = pytest.importorskip('mmdet.models.backbones.pvt')
    ours = _randomize(InLinePVT('pvt-v1-tiny', drop_path_rate=0.))
    ref = mmdet_pvt.PyramidVisionTransformer(num_layers=[2, 2, 2, 2], drop_path_rate=0.)
    missing, unexpected = ref.load_state_dict(mmdet_pvt.pvt_convert(to_released(ours.state_dict())), strict=False)
    assert not missing and not unexpected
    ref.eval()
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        for a, b in zip(ours(x), ref(x), strict=True):
            assert a.shape == b.shape
            assert ((a - b).abs().max() / b.abs().max()).item() < 1e-5


def test_pvt_v1_parity_needs_mmdet_norm_eps():
    """The same weights with the authors' patch-embedding / reduction eps (1e-5) are off mmdet's by more than 1e-5:
    the eps values are part of the arch."""
    mmdet_pvt = pytest.importorskip('mmdet.models.backbones.pvt')
    arch = dict(InLinePVT.arch_zoo['pvt-v1-tiny'], patch_norm_eps=1e-5, sr_norm_eps=1e-5)
    ours = _randomize(InLinePVT(arch, drop_path_rate=0.))
    ref = mmdet_pvt.PyramidVisionTransformer(num_layers=[2, 2, 2, 2], drop_path_rate=0.)
    ref.load_state_dict(mmdet_pvt.pvt_convert(to_released(ours.state_dict())))
    ref.eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        worst = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(ours(x), ref(x), strict=True))
    assert worst > 1e-5


def test_resize_pos_embed():
    table = torch.randn(1, 14 * 14, 8)
    assert resize_pos_embed(table, (14, 14), (14, 14)) is table
    grid = table.reshape(1, 14, 14, 8).permute(0, 3, 1, 2)
    for dst in [(16, 20), (15, 20), (28, 28), (8, 24)]:
        hand = F.interpolate(grid, size=dst, mode='bilinear', align_corners=False).flatten(2).transpose(1, 2)
        assert torch.equal(resize_pos_embed(table, (14, 14), dst), hand)
    with pytest.raises(ValueError, match='not a 7x7 grid'):
        resize_pos_embed(table, (7, 7), (8, 8))


def test_region_pos_embed_is_each_images_own_table():
    table = torch.randn(1, 7 * 7, 4)
    regions = torch.tensor([[9, 12], [5, 8], [9, 12]])
    out = region_pos_embed(table, (7, 7), TokenMap((9, 12), 3, 'cpu', regions)).view(3, 9, 12, 4)
    for b, (h, w) in enumerate(regions.tolist()):
        assert torch.equal(out[b, :h, :w], resize_pos_embed(table, (7, 7), (h, w)).view(h, w, 4))
    assert out[1, 5:].abs().max() == 0 and out[1, :, 8:].abs().max() == 0
    full = region_pos_embed(table, (7, 7), TokenMap((9, 12), 3, 'cpu', torch.tensor([[9, 12]] * 3)))
    assert torch.equal(full, resize_pos_embed(table, (7, 7), (9, 12)))


@pytest.mark.parametrize('size', [(448, 448), (128, 392)])
def test_sizes_where_the_authors_resize_fails(size):
    """The authors' code crashes at 448x448 (stage 2 has stage 1's 3136 tokens) and scrambles the table at
    128x392 (32x98 = 3136 tokens): each stage here resizes from its own grid."""
    model = InLinePVT(dict(embed_dims=[8, 16, 24, 32], depths=[1, 1, 1, 1], num_heads=[1, 2, 3, 4]), attn_type='IISS',
                      drop_path_rate=0.)
    model.init_weights()
    with torch.no_grad():
        outs = model.eval()(torch.randn(1, 3, *size))
        embed = model.layers[0].embed
        stage1 = embed(torch.randn(1, 3, *size), TokenMap((size[0], size[1]), 1, 'cpu'))[1]
    assert [o.shape[2:] for o in outs] == [(size[0] // s, size[1] // s) for s in (4, 8, 16, 32)]
    assert stage1.hw_shape == (size[0] // 4, size[1] // 4)


def test_la_sr_ratios_above_one_are_refused():
    for bad in (2, '8421', (1, 1, 1, 2)):
        with pytest.raises(ValueError) as error:
            InLinePVT('tiny', la_sr_ratios=bad)
        assert str(error.value) == (f'la_sr_ratios {bad!r}: InLine-PVT supports 1 only (no key reduction in InLine '
                                    "stages); the authors' la_sr_ratio > 1 is broken and unused by the released models")
    with pytest.raises(ValueError, match='la_sr_ratio 1 only'):
        InLinePVTAttention(64, 2, sr_ratio=8)
    assert InLinePVT(dict(embed_dims=[8] * 4, depths=[1] * 4, num_heads=[1] * 4), attn_type='IIII', la_sr_ratios='1111')


@pytest.mark.parametrize('kwargs, match', [
    (dict(attn_type='IIX'), 'malformed attn_type'),
    (dict(attn_type='III'), '3 stage letters but the model has 4'),
])
def test_bad_layouts_fail_clearly(kwargs, match):
    with pytest.raises(ValueError, match=match):
        InLinePVT(**{'arch': 'tiny', **kwargs})


def test_a_checkpoint_that_does_not_fit_lists_its_keys(tmp_path):
    with pytest.raises(CheckpointMismatchError) as err:
        pf.released_backbone('IIII', attn_type='IISS')
    message = str(err.value)
    assert 'missing in checkpoint' in message and 'layers.2.blocks.0.attn.sr.weight' in message
    assert 'unexpected in checkpoint' in message and 'layers.2.blocks.0.attn.residual.0.weight' in message
    swin = tmp_path / 'swin.pth'
    torch.save({'patch_embed.proj.weight': torch.zeros(1)}, swin)
    with pytest.raises(CheckpointMismatchError, match='no InLine-PVT checkpoint format'):
        InLinePVT('tiny', init_cfg=dict(type='Pretrained', checkpoint=str(swin))).init_weights()


def test_detector_checkpoint_round_trip_with_prefix(tmp_path):
    """Our own keys (a detector's backbone part) load with prefix='backbone.'; without it the error says so."""
    model = pf.released_backbone('IISS')
    path = tmp_path / 'det.pth'
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in model.state_dict().items()}}, path)
    loaded = InLinePVT(pf.mini_arch('IISS'), attn_type='IISS',
                       init_cfg=dict(type='Pretrained', checkpoint=str(path), prefix='backbone.'))
    loaded.init_weights()
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    with pytest.raises(CheckpointMismatchError, match="needs prefix='backbone.'"):
        InLinePVT(pf.mini_arch('IISS'), attn_type='IISS',
                  init_cfg=dict(type='Pretrained', checkpoint=str(path))).init_weights()


def test_registry_frozen_stages_and_grad_checkpointing():
    from inline_backbones import MODELS
    small = dict(embed_dims=[8, 16, 24, 32], depths=[1, 2, 1, 1], num_heads=[1, 2, 3, 4])
    model = MODELS.build(dict(type='inline_backbones.InLinePVT', arch=small, attn_type='ISIS', frozen_stages=4))
    assert isinstance(model, InLinePVT) and not any(p.requires_grad for p in model.parameters())
    model = MODELS.build(dict(type='inline_backbones.InLinePVT', arch=small, attn_type='ISIS', frozen_stages=1,
                              drop_path_rate=0.))
    assert not any(p.requires_grad for p in model.layers[0].parameters())
    assert all(p.requires_grad for p in model.layers[1].parameters())
    x = torch.randn(1, 3, 64, 96)
    grads = []
    for with_cp in (False, True):
        torch.manual_seed(0)
        m = InLinePVT(small, attn_type='ISIS', with_cp=with_cp, drop_path_rate=0.)
        sum(o.square().mean() for o in m(x.requires_grad_())).backward()
        grads.append(m.layers[1].embed.pos_embed.grad)
    torch.testing.assert_close(grads[0], grads[1])


def test_the_pvt_key_filter_names_what_is_wrong():
    """The filter's own errors, whole: mixed formats list both key sets; a file in neither format lists its keys,
    with the prefix hint when they are a detector's; a file that converts but does not fit gets the family's hint."""
    from inline_backbones.models.families.pvt_checkpoint import checkpoint_filter_fn
    model = InLinePVT(pf.mini_arch('IIII'), attn_type='IIII')
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoint_filter_fn({'pos_embed1': torch.zeros(1), 'layers.0.embed.pos_embed': torch.zeros(1)}, model)
    assert str(err.value) == ('its keys mix the released InLine-PVT format and ours:\n'
                              '  released-format keys (1): pos_embed1\n  our keys (1): layers.0.embed.pos_embed')
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoint_filter_fn({'backbone.layers.0.embed.pos_embed': torch.zeros(1)}, model)
    assert str(err.value) == ("its keys are in no InLine-PVT checkpoint format (released: pos_embed{i}, "
                              "patch_embed{i}.*, block{i}.*; ours: layers.*); a detector's or segmentor's checkpoint "
                              "needs prefix='backbone.' (init_cfg prefix):\n"
                              '  unexpected in checkpoint (1): backbone.layers.0.embed.pos_embed')
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoint_filter_fn({'cls_token': torch.zeros(1)}, model)
    assert str(err.value).endswith('ours: layers.*):\n  unexpected in checkpoint (1): cls_token')
    filtered = checkpoint_filter_fn({'pos_embed1': torch.zeros(1)}, model)
    assert list(filtered) == ['layers.0.embed.pos_embed']
    assert filtered.hint == 'check arch, attn_type and that this is an InLine-PVT checkpoint'


def test_a_position_embedding_that_is_not_its_grid_is_refused():
    from inline_backbones.models.families.pvt_embed import resize_pos_embed

    with pytest.raises(ValueError) as error:
        resize_pos_embed(torch.zeros(1, 12, 8), (4, 4), (8, 8))
    assert str(error.value) == 'position embedding of 12 tokens is not a 4x4 grid'


def small_pvt(layout, **kwargs):
    """A randomly initialised small InLine-PVT (every parameter non-trivial), eval mode, seed fixed."""
    torch.manual_seed(0)
    return randomized(InLinePVT(dict(embed_dims=[16, 32, 48, 64], depths=[2, 2, 2, 2], num_heads=[1, 2, 3, 4]),
                                attn_type=layout, drop_path_rate=0., **kwargs))


def test_padding_aware_equals_the_plain_model_on_a_full_batch():
    batch, _ = det_batch(images())
    model = small_pvt('IISS', padding_aware=True)
    with torch.no_grad():
        full = model(batch[:1], image_shapes=[batch.shape[-2:]])
        plain = small_pvt('IISS')(batch[:1])
    for a, b in zip(full, plain, strict=True):
        assert torch.equal(a, b)


def test_an_image_not_a_multiple_of_32_alone_is_cut_as_in_a_padded_batch():
    """Padding-aware mode pads to 32 itself: an image of 150x171 alone == the same image padded by the preprocessor."""
    model = small_pvt('IISS', padding_aware=True)
    img = images()[1]
    batch, shapes = det_batch([img])
    with torch.no_grad():
        alone = model(batch[:, :, :150, :171], image_shapes=[(150, 171)])
        padded = model(batch, image_shapes=shapes)
    assert relative_difference_on_region(alone, padded, 0, (150, 171)) < 1e-6
