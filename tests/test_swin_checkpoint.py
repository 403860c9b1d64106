"""The Swin family's checkpoint filter (``inline_backbones.models.families.swin_checkpoint``) and the generic loader's
use of it: mmdet's Swin key format loads into layout ``SSSS`` and gives mmdet's outputs; unknown or mixed
formats fail listing their keys; the backbone drops the classifier parts, the classifier keeps or drops its
head by class count; a model without a filter is loaded as it is, strictly; the T/S/B classifiers' state dicts are
exactly the released files'."""
import pytest
import released_fixtures as rf
import timm
import torch
from torch import nn

from inline_backbones import CheckpointMismatchError, InLineSwinClassifier, InLineSwinTransformer, load_pretrained
from inline_backbones.checkpoints.loading import FilteredStateDict, filter_state_dict, load_checkpoint_file
from inline_backbones.models.families.swin_checkpoint import RELEASED_BUFFERS, checkpoint_filter_fn, detect_format

SMALL = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


def _randomise(model):
    """Non-trivial values in every parameter (LayerNorms, bias tables and the patch-merging norms included,
    so a wrong channel order of the merging's 4C channels shows)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if 'norm' in name else 0.05) + (1.0 if 'norm' in name and
                                                                                 name.endswith('weight') else 0.0))
    return model


@pytest.fixture(scope='module')
def mmdet_swin():
    swin = pytest.importorskip('mmdet.models.backbones.swin')
    torch.manual_seed(1)
    ref = _randomise(swin.SwinTransformer(window_size=7, drop_path_rate=0., **SMALL))
    ref.eval()
    return ref


def _rel(a, b):
    return ((a - b).norm() / b.norm()).item()


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
        assert _rel(a, b) < 1e-5


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
            assert _rel(a, b) < 1e-5


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
        assert _rel(naive(x)[1], ours(x)[1]) > 1e-2
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


def test_model_without_filter_loads_as_is_and_strictly(tmp_path):
    """The generic loader's default for a model with no ``checkpoint_filter`` is the identity; an explicit
    ``filter_fn`` replaces the model's."""
    torch.save({'state_dict': {'weight': torch.ones(2, 3), 'bias': torch.zeros(2)}}, tmp_path / 'lin.pth')
    linear = nn.Linear(3, 2)
    assert load_pretrained(linear, tmp_path / 'lin.pth') == ['bias', 'weight']
    assert torch.equal(linear.weight, torch.ones(2, 3))
    torch.save({'weight': torch.ones(2, 3), 'bias': torch.zeros(2), 'extra': torch.zeros(1)}, tmp_path / 'extra.pth')
    with pytest.raises(CheckpointMismatchError,
                       match=r"does not fit Linear:\n  unexpected in checkpoint \(1\): extra$"):
        load_pretrained(linear, tmp_path / 'extra.pth')
    drop_extra = lambda sd, model: FilteredStateDict({k: v for k, v in sd.items() if k != 'extra'},  # noqa: E731
                                                     optional_prefixes=('bias',))
    assert load_pretrained(linear, tmp_path / 'extra.pth', filter_fn=drop_extra) == ['bias', 'weight']
    torch.save({'weight': torch.ones(2, 3)}, tmp_path / 'no_bias.pth')
    assert load_pretrained(linear, tmp_path / 'no_bias.pth', filter_fn=drop_extra) == ['weight']
    with pytest.raises(CheckpointMismatchError, match=r'missing in checkpoint \(1\): bias'):
        load_pretrained(linear, tmp_path / 'no_bias.pth')


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
