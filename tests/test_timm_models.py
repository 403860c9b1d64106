"""The ImageNet classifiers as timm models: released-format files give the authors' logits through
``timm.create_model``; ``features_only`` gives the backbone's stage maps; wrong files fail by name; the
T/S/B state dicts are exactly the released ones."""
import subprocess
import sys

import pytest
import released_fixtures as rf
import timm
import torch
import torch.nn.functional as F

from inline_backbones import CheckpointMismatchError, InLineSwinClassifier
from inline_backbones.analysis import flop_analyzer
from inline_backbones.checkpoint import load_checkpoint_file
from inline_backbones.models.families.swin_checkpoint import RELEASED_BUFFERS

VARIANTS = {'tiny': 'inline_swin_tiny', 'small': 'inline_swin_small', 'base': 'inline_swin_base'}


def released_classifier(layout, kernel_func='identity', path=None, **kwargs):
    """``timm.create_model`` of the fixture's mini arch (keyword overrides) from a released-format file."""
    return timm.create_model(
        'inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(file=str(path or rf.checkpoint_path(layout))),
        attn_type=layout, kernel_func=kernel_func, **rf.mini_arch(layout), **kwargs).eval()


def rel_diff(a, b):
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize('kernel_func', rf.KERNELS)
@pytest.mark.parametrize('layout', rf.LAYOUTS)
def test_logits_equal_the_authors_model(layout, kernel_func):
    expected = rf.expected(layout)
    model = released_classifier(layout, kernel_func)
    assert isinstance(model, InLineSwinClassifier)
    with torch.no_grad():
        logits = model(expected['x'])
    assert logits.shape == expected[kernel_func]['logits'].shape == (2, 1000)
    assert rel_diff(logits, expected[kernel_func]['logits']) < 1e-4


def test_logits_comparison_can_fail():
    """The identity model's logits are not the relu fixture's (the 1e-4 check has teeth)."""
    expected = rf.expected('IIIS')
    with torch.no_grad():
        logits = released_classifier('IIIS', 'identity')(expected['x'])
    assert rel_diff(logits, expected['relu']['logits']) > 1e-2


def test_released_file_is_read_with_weights_only(monkeypatch):
    calls = []
    real_load = torch.load

    def recording_load(f, *args, **kwargs):
        calls.append((str(f), kwargs.get('weights_only')))
        return real_load(f, *args, **kwargs)

    monkeypatch.setattr(torch, 'load', recording_load)
    released_classifier('IIIS')
    assert (str(rf.checkpoint_path('IIIS')), True) in calls
    assert all(weights_only for _, weights_only in calls)


def test_pretrained_cfg_is_the_authors_evaluation():
    """Swin's/InLine's evaluation: resize 256 bicubic, centre crop 224 (crop_pct 0.875), ImageNet mean/std."""
    model = timm.create_model('inline_swin_tiny', **rf.mini_arch('IIIS'), attn_type='IIIS')
    cfg = timm.data.resolve_data_config(model=model)
    assert cfg['input_size'] == (3, 224, 224)
    assert cfg['interpolation'] == 'bicubic'
    assert cfg['crop_pct'] == 0.875 and cfg['crop_mode'] == 'center'
    assert cfg['mean'] == timm.data.IMAGENET_DEFAULT_MEAN and cfg['std'] == timm.data.IMAGENET_DEFAULT_STD
    assert model.pretrained_cfg['num_classes'] == model.num_classes == 1000
    resize = timm.data.create_transform(**cfg).transforms[0]
    assert resize.size == 256


def test_new_head_keeps_the_trunk(caplog):
    """num_classes=N: the file's 1000-class head is left out (and the log says so), the trunk and final norm are
    loaded."""
    import logging

    x = rf.expected('IIIS')['x']
    full = released_classifier('IIIS')
    with caplog.at_level(logging.INFO, logger='inline_backbones.checkpoint'):
        model = released_classifier('IIIS', num_classes=7)
    assert 'checkpoint head has 1000 classes, the model 7: the head is not loaded' in caplog.messages
    assert model.get_classifier().weight.shape == (7, full.num_features)
    with torch.no_grad():
        assert torch.equal(model.forward_head(model.forward_features(x), pre_logits=True),
                           full.forward_head(full.forward_features(x), pre_logits=True))
        assert model(x).shape == (2, 7)
    model.reset_classifier(0)
    assert model(x).shape == (2, full.num_features)


@pytest.mark.parametrize('layout', rf.LAYOUTS)
def test_features_only_maps_are_the_backbone_stage_maps(layout):
    """The NCHW stage maps equal the authors' stage tokens, and with the backbone's (default-initialised)
    output norms applied they equal the mmdet/mmseg backbone's outputs for the same file."""
    expected = rf.expected(layout)
    x = expected['x']
    features = released_classifier(layout, features_only=True)
    assert features.feature_info.channels() == [16, 32, 64, 128]
    assert features.feature_info.reduction() == [4, 8, 16, 32]
    with torch.no_grad():
        maps = features(x)
        backbone_outs = rf.released_backbone(layout)(x)
    tokens = [m.flatten(2).transpose(1, 2) for m in maps]
    rf.assert_stage_tokens_equal(tokens, expected['identity']['stage_tokens'])
    for m, out in zip(maps, backbone_outs, strict=True):
        normed = F.layer_norm(m.permute(0, 2, 3, 1), m.shape[1:2]).permute(0, 3, 1, 2)
        torch.testing.assert_close(normed, out, rtol=1e-5, atol=1e-5)


def test_features_only_out_indices():
    features = released_classifier('IISS', features_only=True, out_indices=(1, 3))
    with torch.no_grad():
        maps = features(torch.randn(1, 3, 96, 128))
    assert [tuple(m.shape) for m in maps] == [(1, 32, 12, 16), (1, 128, 3, 4)]
    early = released_classifier('IISS', features_only=True, out_indices=(0, 1))
    assert len(early.model.layers) == 2                      # later stages pruned, as timm does
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        intermediates = features.model.forward_intermediates(x, indices=(0, 1), intermediates_only=True)
        for a, b in zip(early(x), intermediates, strict=True):
            assert torch.equal(a, b)


def test_forward_intermediates_and_grad_checkpointing():
    model = released_classifier('IIMS2')
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        torch.testing.assert_close(final, model.forward_features(x), rtol=0, atol=0)
    assert [tuple(m.shape[1:]) for m in maps] == [(16, 16, 24), (32, 8, 12), (64, 4, 6), (128, 2, 3)]
    grads = []
    for enable in (False, True):
        model.zero_grad()
        model.set_grad_checkpointing(enable)
        model(x.requires_grad_()).square().mean().backward()
        grads.append(model.patch_embed.proj.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_state_dict_overlay_goes_through_the_same_checks():
    """timm's other source, a state dict in memory, meets the same filter: loads as released, or fails by name."""
    expected = rf.expected('IIIS')
    checkpoint = load_checkpoint_file(rf.checkpoint_path('IIIS'))
    model = timm.create_model('inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(state_dict=checkpoint),
                              attn_type='IIIS', **rf.mini_arch('IIIS')).eval()
    with torch.no_grad():
        assert rel_diff(model(expected['x']), expected['identity']['logits']) < 1e-4
    with pytest.raises(CheckpointMismatchError, match='missing in checkpoint'):
        timm.create_model('inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(state_dict=checkpoint),
                          attn_type='IISS', **rf.mini_arch('IISS'))


def test_other_arch_fails_by_name():
    with pytest.raises(CheckpointMismatchError, match='shape mismatch') as err:
        timm.create_model('inline_swin_tiny', pretrained=True,
                          pretrained_cfg_overlay=dict(file=str(rf.checkpoint_path('IIIS'))))
    assert 'patch_embed.proj.weight: checkpoint (16, 3, 4, 4) vs model (96, 3, 4, 4)' in str(err.value)


def test_other_layout_fails_by_name():
    """An IISS file in an IIIS model: stage 3 has softmax keys in the file, InLine keys in the model."""
    with pytest.raises(CheckpointMismatchError) as err:
        released_classifier('IIIS', path=rf.checkpoint_path('IISS'))
    message = str(err.value)
    assert 'missing in checkpoint' in message and 'layers.2.blocks.0.attn.residual.0.weight' in message
    assert 'unexpected in checkpoint' in message and 'layers.2.blocks.0.attn.relative_position_bias_table' in message


def test_detector_checkpoint_without_prefix_fails_by_name(tmp_path):
    state = released_classifier('IIIS').state_dict()
    path = tmp_path / 'mask_rcnn.pth'
    torch.save({'meta': {}, 'state_dict': {f'backbone.{k}': v for k, v in state.items()}}, path)
    with pytest.raises(CheckpointMismatchError, match=r'unexpected in checkpoint .*backbone\.patch_embed'):
        released_classifier('IIIS', path=path)


def test_missing_file_and_missing_source_fail():
    with pytest.raises(FileNotFoundError, match='no_such.pth'):
        released_classifier('IIIS', path='no_such.pth')
    offline = 'http://127.0.0.1:9/f/0000/?dl=1'    # discard port: refused, as offline
    with pytest.raises(ConnectionError) as err:
        timm.create_model('inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(url=offline),
                          **rf.mini_arch('IIIS'), attn_type='IIIS')
    message = str(err.value)
    assert offline in message and 'pretrained_cfg_overlay=dict(file=PATH)' in message and '--cfg-options' not in message


def test_pretrained_cfgs_name_the_released_links():
    """pretrained=True has a source for every variant: the authors' link (downloaded by the package's loader)."""
    from inline_backbones.released import SWIN_ARCH_CHECKPOINTS

    for arch, name in VARIANTS.items():
        assert timm.models.get_pretrained_cfg(name).url == SWIN_ARCH_CHECKPOINTS[arch]


@pytest.fixture(scope='module')
def full_models():
    """The T/S/B classifiers (random weights), each built once for this module."""
    return {arch: timm.create_model(name).eval() for arch, name in VARIANTS.items()}


@pytest.mark.parametrize('arch', VARIANTS)
def test_state_dict_is_exactly_the_released_one(arch, full_models):
    """Every key and shape of the downloadable T/S/B files, except the buffers the model rebuilds."""
    released = rf.released_shapes(arch)
    model = full_models[arch]
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    dropped = {k for k in released['state_dict'] if k.endswith(RELEASED_BUFFERS)}
    assert {k: v for k, v in released['state_dict'].items() if k not in dropped} == ours
    # dropped on purpose: the softmax blocks' index tables and shifted blocks' masks, rebuilt by our modules
    modules = dict(model.named_modules())
    for key in dropped:
        owner, name = key.rsplit('.', 1)
        assert name in ('relative_position_index', 'attn_mask') and owner in modules, key
    assert model.attn_type == released['config']['attn_type']


def test_tiny_flops_at_224_are_the_papers(full_models):
    """4.48 GMACs counted by mmengine's analysis (attention and dynamic conv included); paper 4.5G."""
    with torch.no_grad():
        flops = flop_analyzer(full_models['tiny'], (torch.randn(1, 3, 224, 224),)).total()
    assert flops == pytest.approx(4.5e9, rel=0.01)
    assert sum(p.numel() for p in full_models['tiny'].parameters()) == 29_223_544  # the released file's count


def test_import_registers_the_models_without_mmdet_or_mmseg():
    code = ('import sys, timm, inline_backbones\n'
            'print(timm.list_models("inline_swin*"), sorted(m for m in ("mmdet", "mmseg") if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "['inline_swin_base', 'inline_swin_small', 'inline_swin_tiny'] []"


def test_padding_aware_is_refused_by_the_classifier_not_ignored():
    """The classifier pools every token: accepting padding_aware and ignoring it would mislead."""
    small = dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8])
    with pytest.raises(ValueError, match='padding_aware is not supported by the classifier'):
        timm.create_model('inline_swin_tiny', padding_aware=True, **small)
    assert not timm.create_model('inline_swin_tiny', padding_aware=False, **small).padding_aware


def test_features_only_follows_the_models_own_depths_and_refuses_out_indices_without_it():
    """features_only's default takes every stage of the model built (here three), not timm's five; out_indices
    without features_only is an error naming the options (timm models take it only with features_only)."""
    arch = dict(embed_dims=16, depths=[1, 1, 1], num_heads=[1, 2, 4], attn_type='IIS')
    features = timm.create_model('inline_swin_tiny', features_only=True, **arch)
    assert features.feature_info.channels() == [16, 32, 64] and features.feature_info.reduction() == [4, 8, 16]
    with torch.no_grad():
        assert [tuple(m.shape) for m in features(torch.randn(1, 3, 64, 96))] == [(1, 16, 16, 24), (1, 32, 8, 12),
                                                                                (1, 64, 4, 6)]
    with pytest.raises(TypeError, match=r"InLineSwinClassifier got unexpected keyword arguments \['out_indices'\]"):
        timm.create_model('inline_swin_tiny', out_indices=(1,), **arch)


def test_in_chans_adapts_the_released_first_conv_as_timm_does():
    """``in_chans=1`` from the released-format file: ``patch_embed.proj.weight`` is timm's ``adapt_input_conv(1, W)``
    (W summed over R, G, B), and a grey image's logits are the released model's for the image repeated to RGB
    (within 1e-5); 2 and 4 channels load (W repeated, scaled by 3/n) and run."""
    from timm.models import adapt_input_conv

    released = load_checkpoint_file(rf.checkpoint_path('IIIS'))['model']['patch_embed.proj.weight']
    assert released.shape[1] == 3
    grey = released_classifier('IIIS', in_chans=1)
    assert torch.equal(grey.patch_embed.proj.weight, adapt_input_conv(1, released))
    assert torch.equal(grey.patch_embed.proj.weight, released.sum(dim=1, keepdim=True))
    x = rf.expected('IIIS')['x'].mean(dim=1, keepdim=True)
    with torch.no_grad():
        rgb_logits = released_classifier('IIIS')(x.repeat(1, 3, 1, 1))
        torch.testing.assert_close(grey(x), rgb_logits, rtol=1e-5, atol=1e-5)
        assert rel_diff(grey(x), rgb_logits) < 1e-6
    for in_chans in (2, 4):
        model = released_classifier('IIIS', in_chans=in_chans)
        assert torch.equal(model.patch_embed.proj.weight, adapt_input_conv(in_chans, released))
        with torch.no_grad():
            assert model(torch.randn(1, in_chans, 64, 64)).shape == (1, 1000)


def test_img_size_loads_the_released_file_and_changes_no_logit():
    """timm's ``img_size=384`` (Swin's argument): the released file loads as it is, the logits at 384 are those of
    the model built without it."""
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        assert torch.equal(released_classifier('IIIS', img_size=384)(x), released_classifier('IIIS')(x))
