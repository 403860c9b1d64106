"""Every family's timm classifiers against the authors' released-format files (``released_fixtures.py``,
``pvt_fixtures.py``: the same functions for each family): ``timm.create_model`` gives the authors' logits; a new
head keeps the trunk; ``features_only`` gives the authors' stage tokens and the backbone's maps; wrong files fail by
name; ``in_chans`` and ``img_size`` behave as timm's; FLOPs and parameter counts are the paper's and the authors'.
What holds without the files is the family contract's (tests/test_family_contract.py)."""
import logging
import re

import pvt_fixtures as pf
import pytest
import released_fixtures as rf
import timm
import torch
import torch.nn.functional as F
from timm.models import adapt_input_conv

from inline_backbones import CheckpointMismatchError, InLinePVTClassifier, InLineSwinClassifier
from inline_backbones.checkpoints.loading import load_checkpoint_file

FIXTURES = {'swin': rf, 'pvt': pf}
CLASSIFIERS = {'swin': InLineSwinClassifier, 'pvt': InLinePVTClassifier}
WIDTHS = {'swin': [4, 8, 16, 32], 'pvt': [4, 8, 12, 16]}               # the fixtures' mini archs
# the models of the fixtures: (family, layout, options); each gives the logits of its logit_cases
LOGIT_MODELS = ([('swin', layout, dict(kernel_func=kernel)) for layout in rf.LAYOUTS for kernel in rf.KERNELS]
                + [('pvt', layout, {}) for layout in pf.LAYOUTS])
# a fixture's model and another fixture's logits on the same input, which it must not give
OTHER_LOGITS = {'swin': (('IIIS', dict(kernel_func='identity')), ('IIIS', dict(kernel_func='relu'))),
                'pvt': (('IIII', {}), ('IISS', {}))}
# the released key of the images' conv, and the full tiny model's width
FIRST_CONV = {'swin': ('patch_embed.proj.weight', 96), 'pvt': ('patch_embed1.proj.weight', 64)}
# a file of layout IISS in a model of the first layout: a key the file lacks, a key the model lacks
OTHER_LAYOUT = {'swin': ('IIIS', 'layers.2.blocks.0.attn.residual.0.weight',
                         'layers.2.blocks.0.attn.relative_position_bias_table'),
                'pvt': ('IIII', 'layers.2.blocks.0.attn.residual.0.weight', 'layers.2.blocks.0.attn.sr.weight')}
# the parameters out of weight decay of the last fixture layout's model
NO_WEIGHT_DECAY = {'swin': {f'layers.{i}.blocks.{j}.attn.relative_position_bias_table'
                            for i, j in ((2, 2), (2, 3), (3, 0), (3, 1))},         # IIMS2: stage 3's last two, 4
                   'pvt': {f'layers.{i}.embed.pos_embed' for i in range(4)}}


def family_ids(cases):
    return ['-'.join([c[0], c[1], *c[2].values()]) for c in cases]


def first_conv(family):
    """The model's key of the convolution that takes the images (timm's ``first_conv``)."""
    return CLASSIFIERS[family].family.pretrained_cfg['first_conv'] + '.weight'


@pytest.mark.parametrize('family, layout, options', LOGIT_MODELS, ids=family_ids(LOGIT_MODELS))
def test_logits_equal_the_authors_model(family, layout, options):
    fixtures = FIXTURES[family]
    model = fixtures.released_classifier(layout, **options)
    assert isinstance(model, CLASSIFIERS[family])
    for x, expected in fixtures.logit_cases(layout, **options):
        with torch.no_grad():
            logits = model(x)
        assert logits.shape == expected.shape == (len(x), 1000)
        assert rf.rel_diff(logits, expected) < 1e-4, tuple(x.shape)


@pytest.mark.parametrize('family', FIXTURES)
def test_logits_comparison_can_fail(family):
    """A fixture's model does not give another fixture's logits (the 1e-4 check has teeth): InLine-Swin's identity
    kernel against its relu kernel, InLine-PVT's IIII against IISS."""
    (layout, options), (other, other_options) = OTHER_LOGITS[family]
    x, expected = FIXTURES[family].logit_cases(other, **other_options)[0]
    with torch.no_grad():
        assert rf.rel_diff(FIXTURES[family].released_classifier(layout, **options)(x), expected) > 1e-2


@pytest.mark.parametrize('family', FIXTURES)
def test_released_file_is_read_with_weights_only(family, monkeypatch):
    fixtures = FIXTURES[family]
    calls = []
    real_load = torch.load

    def recording_load(f, *args, **kwargs):
        calls.append((str(f), kwargs.get('weights_only')))
        return real_load(f, *args, **kwargs)

    monkeypatch.setattr(torch, 'load', recording_load)
    fixtures.released_classifier(fixtures.LAYOUTS[0])
    assert (str(fixtures.checkpoint_path(fixtures.LAYOUTS[0])), True) in calls
    assert all(weights_only for _, weights_only in calls)


@pytest.mark.parametrize('family', FIXTURES)
def test_new_head_keeps_the_trunk(family, caplog):
    """num_classes=N: the file's 1000-class head is left out (and the log says so), the trunk (and final norm) are
    loaded: the same pooled features, the NHWC map of ``forward_features``; ``reset_classifier(0)`` gives them."""
    fixtures = FIXTURES[family]
    layout = fixtures.LAYOUTS[0]
    x, _ = fixtures.logit_cases(layout)[0]
    full = fixtures.released_classifier(layout)
    with caplog.at_level(logging.INFO, logger='inline_backbones.checkpoints.loading'):
        model = fixtures.released_classifier(layout, num_classes=7)
    assert 'checkpoint head has 1000 classes, the model 7: the head is not loaded' in caplog.messages
    assert model.get_classifier().weight.shape == (7, full.num_features)
    with torch.no_grad():
        features = model.forward_features(x)
        assert features.shape == (len(x), 7, 7, full.num_features)              # NHWC at 224, as timm's models
        assert torch.equal(model.forward_head(features, pre_logits=True),
                           full.forward_head(full.forward_features(x), pre_logits=True))
        assert model(x).shape == (len(x), 7)
    model.reset_classifier(0)
    assert model(x).shape == (len(x), full.num_features)


@pytest.mark.parametrize('family', FIXTURES)
def test_forward_intermediates_grad_checkpointing_and_weight_decay(family):
    """The final map of ``forward_intermediates`` is ``forward_features``', the stage maps have the widths and
    strides; gradient checkpointing changes no gradient; the position tables are out of weight decay."""
    fixtures = FIXTURES[family]
    model = fixtures.released_classifier(fixtures.LAYOUTS[-1])
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        assert torch.equal(final, model.forward_features(x))
    assert [tuple(m.shape[1:]) for m in maps] == [(c, 64 // s, 96 // s) for c, s in zip(WIDTHS[family], (4, 8, 16, 32),
                                                                                        strict=True)]
    grads = []
    for enable in (False, True):
        model.zero_grad()
        model.set_grad_checkpointing(enable)
        model(x.requires_grad_()).square().mean().backward()
        grads.append(model.get_parameter(first_conv(family)).grad.clone())
    torch.testing.assert_close(grads[0], grads[1])
    assert model.no_weight_decay() == NO_WEIGHT_DECAY[family]


FEATURE_LAYOUTS = [(family, layout) for family, fixtures in FIXTURES.items() for layout in fixtures.LAYOUTS]


@pytest.mark.parametrize('family, layout', FEATURE_LAYOUTS)
def test_features_only_maps_are_the_authors_stage_tokens_and_the_backbone_outputs(family, layout):
    """The NCHW stage maps are the authors' stage tokens, and the mmdet/mmseg backbone's outputs for the same file:
    equal where the family has no output norms, through the backbone's (default-initialised) norms where it has."""
    fixtures = FIXTURES[family]
    x, stage_tokens = fixtures.expected_stage_tokens(layout)
    features = fixtures.released_classifier(layout, features_only=True)
    assert features.feature_info.channels() == WIDTHS[family]
    assert features.feature_info.reduction() == [4, 8, 16, 32]
    with torch.no_grad():
        maps = features(x)
        backbone_outs = fixtures.released_backbone(layout)(x)
    rf.assert_stage_tokens_equal([m.flatten(2).transpose(1, 2) for m in maps], stage_tokens)
    for m, out in zip(maps, backbone_outs, strict=True):
        if CLASSIFIERS[family].family.output_norms:
            normed = F.layer_norm(m.permute(0, 2, 3, 1), m.shape[1:2]).permute(0, 3, 1, 2)
            torch.testing.assert_close(normed, out, rtol=1e-5, atol=1e-5)
        else:
            assert torch.equal(m, out)


@pytest.mark.parametrize('family', FIXTURES)
def test_features_only_out_indices_prune_the_later_stages(family):
    fixtures = FIXTURES[family]
    widths = WIDTHS[family]
    features = fixtures.released_classifier('IISS', features_only=True, out_indices=(1, 3))
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        assert [tuple(m.shape) for m in features(x)] == [(1, widths[1], 12, 16), (1, widths[3], 3, 4)]
    early = fixtures.released_classifier('IISS', features_only=True, out_indices=(0, 1))
    assert len(early.model.layers) == 2                      # later stages pruned, as timm does
    with torch.no_grad():
        maps = early(x)
        intermediates = features.model.forward_intermediates(x, indices=(0, 1), intermediates_only=True)
    assert [tuple(m.shape) for m in maps] == [(1, widths[0], 24, 32), (1, widths[1], 12, 16)]
    for a, b in zip(maps, intermediates, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize('family', FIXTURES)
def test_state_dict_overlay_goes_through_the_same_checks(family):
    """timm's other source, a state dict in memory, meets the same filter: loads as released, or fails by name."""
    fixtures = FIXTURES[family]
    layout = fixtures.LAYOUTS[0]
    x, expected = fixtures.logit_cases(layout)[0]
    checkpoint = load_checkpoint_file(fixtures.checkpoint_path(layout))
    model = timm.create_model(fixtures.TIMM_MODEL, pretrained=True, pretrained_cfg_overlay=dict(state_dict=checkpoint),
                              attn_type=layout, **fixtures.mini_arch(layout)).eval()
    with torch.no_grad():
        assert rf.rel_diff(model(x), expected) < 1e-4
    with pytest.raises(CheckpointMismatchError, match='missing in checkpoint'):
        timm.create_model(fixtures.TIMM_MODEL, pretrained=True, pretrained_cfg_overlay=dict(state_dict=checkpoint),
                          attn_type='IISS', **fixtures.mini_arch('IISS'))


@pytest.mark.parametrize('family', FIXTURES)
def test_other_arch_fails_by_name(family):
    fixtures = FIXTURES[family]
    with pytest.raises(CheckpointMismatchError, match='shape mismatch') as err:
        timm.create_model(fixtures.TIMM_MODEL, pretrained=True,
                          pretrained_cfg_overlay=dict(file=str(fixtures.checkpoint_path(fixtures.LAYOUTS[0]))))
    mini, width = WIDTHS[family][0], FIRST_CONV[family][1]
    assert f'{first_conv(family)}: checkpoint ({mini}, 3, 4, 4) vs model ({width}, 3, 4, 4)' in str(err.value)


@pytest.mark.parametrize('family', FIXTURES)
def test_other_layout_fails_by_name(family):
    """An IISS file in a model of another layout: stage 3's keys of the file's mixer are unexpected, those of the
    model's missing, each named."""
    layout, missing, unexpected = OTHER_LAYOUT[family]
    with pytest.raises(CheckpointMismatchError) as err:
        FIXTURES[family].released_classifier(layout, path=FIXTURES[family].checkpoint_path('IISS'))
    message = str(err.value)
    assert 'missing in checkpoint' in message and missing in message
    assert 'unexpected in checkpoint' in message and unexpected in message


@pytest.mark.parametrize('family', FIXTURES)
def test_detector_checkpoint_without_prefix_fails_by_name(family, tmp_path):
    fixtures = FIXTURES[family]
    state = fixtures.released_classifier(fixtures.LAYOUTS[0]).state_dict()
    path = tmp_path / 'mask_rcnn.pth'
    torch.save({'meta': {}, 'state_dict': {f'backbone.{k}': v for k, v in state.items()}}, path)
    key = re.escape(f'backbone.{first_conv(family)}')
    with pytest.raises(CheckpointMismatchError, match=f'unexpected in checkpoint .*{key}'):
        fixtures.released_classifier(fixtures.LAYOUTS[0], path=path)


@pytest.mark.parametrize('family', FIXTURES)
def test_missing_file_and_missing_source_fail(family):
    fixtures = FIXTURES[family]
    with pytest.raises(FileNotFoundError, match='no_such.pth'):
        fixtures.released_classifier(fixtures.LAYOUTS[0], path='no_such.pth')
    offline = 'http://127.0.0.1:9/f/0000/?dl=1'    # discard port: refused, as offline
    with pytest.raises(ConnectionError) as err:
        timm.create_model(fixtures.TIMM_MODEL, pretrained=True, pretrained_cfg_overlay=dict(url=offline),
                          **fixtures.mini_arch(fixtures.LAYOUTS[0]), attn_type=fixtures.LAYOUTS[0])
    message = str(err.value)
    assert offline in message and 'pretrained_cfg_overlay=dict(file=PATH)' in message and '--cfg-options' not in message


@pytest.mark.parametrize('name, gflops, rel', [
    ('inline_swin_tiny', 4.5, 0.01), ('inline_pvt_tiny', 2.0, 0.02), ('inline_pvt_small', 3.9, 0.02),
    ('inline_pvt_medium', 6.9, 0.02), pytest.param('inline_pvt_large', 10.2, 0.02, marks=pytest.mark.slow)])
def test_flops_at_224_are_the_papers_and_params_the_authors(name, gflops, rel):
    """mmengine's analysis with the attention handles (InLine's k^T v, q M and the dynamic 3x3 counted; InLine-Swin-T
    4.48 GMACs, paper 4.5G); the parameters are the released files' counts."""
    from inline_backbones.analysis.flops import flop_analyzer  # mmengine's FlopAnalyzer

    model = timm.create_model(name).eval()
    with torch.no_grad():
        flops = flop_analyzer(model, (torch.randn(1, 3, 224, 224),)).total()
    assert flops == pytest.approx(gflops * 1e9, rel=rel)
    params = 29_223_544 if name == 'inline_swin_tiny' else pf.released(name.rsplit('_', 1)[1])['params']
    assert sum(p.numel() for p in model.parameters()) == params


@pytest.mark.parametrize('family', FIXTURES)
def test_in_chans_adapts_the_released_first_conv_as_timm_does(family):
    """``in_chans=1`` from the released-format file: the images' conv is timm's ``adapt_input_conv(1, W)`` of the
    file's (W summed over R, G, B), and a grey image's logits are the released model's for the image repeated to RGB
    (within 1e-5); 2 and 4 channels load (W repeated, scaled by 3/n) and run."""
    fixtures = FIXTURES[family]
    layout = fixtures.LAYOUTS[0]
    released = load_checkpoint_file(fixtures.checkpoint_path(layout))['model'][FIRST_CONV[family][0]]
    assert released.shape[1] == 3
    grey = fixtures.released_classifier(layout, in_chans=1)
    assert torch.equal(grey.get_parameter(first_conv(family)), adapt_input_conv(1, released))
    assert torch.equal(grey.get_parameter(first_conv(family)), released.sum(dim=1, keepdim=True))
    x = fixtures.logit_cases(layout)[-1][0].mean(dim=1, keepdim=True)
    with torch.no_grad():
        rgb_logits = fixtures.released_classifier(layout)(x.repeat(1, 3, 1, 1))
        torch.testing.assert_close(grey(x), rgb_logits, rtol=1e-5, atol=1e-5)
        assert rf.rel_diff(grey(x), rgb_logits) < 1e-6
    for in_chans in (2, 4):
        model = fixtures.released_classifier(layout, in_chans=in_chans)
        assert torch.equal(model.get_parameter(first_conv(family)), adapt_input_conv(in_chans, released))
        with torch.no_grad():
            assert model(torch.randn(1, in_chans, 64, 64)).shape == (1, 1000)


@pytest.mark.parametrize('family', FIXTURES)
def test_img_size_loads_the_released_file_and_changes_no_logit(family):
    """timm's ``img_size=384`` (Swin's argument): the released file loads as it is, the logits at 384 are those of
    the model built without it."""
    fixtures = FIXTURES[family]
    x = torch.randn(1, 3, 384, 384)
    with torch.no_grad():
        assert torch.equal(fixtures.released_classifier(fixtures.LAYOUTS[0], img_size=384)(x),
                           fixtures.released_classifier(fixtures.LAYOUTS[0])(x))
