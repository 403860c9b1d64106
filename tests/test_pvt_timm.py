"""The InLine-PVT classifiers as timm models: released-format files give the authors' logits through
``timm.create_model``; the pretrained cfgs are the authors' evaluation; ``features_only`` gives the backbone's
maps; FLOPs and parameter counts are the paper's / the authors'."""
import json

import pvt_fixtures as pf
import pytest
import timm
import torch
from mutmut_compat import fx_on_unwrapped_code

from inline_backbones import CheckpointMismatchError, InLinePVTClassifier
from inline_backbones.analysis import flop_analyzer
from inline_backbones.released import PVT_ARCH_CHECKPOINTS

VARIANTS = ('tiny', 'small', 'medium', 'large')


def released_classifier(layout, path=None, **kwargs):
    return timm.create_model(
        'inline_pvt_tiny', pretrained=True, pretrained_cfg_overlay=dict(file=str(path or pf.checkpoint_path(layout))),
        attn_type=layout, **pf.mini_arch(layout), **kwargs).eval()


@pytest.mark.parametrize('layout', pf.LAYOUTS)
def test_logits_equal_the_authors_model(layout):
    model = released_classifier(layout)
    assert isinstance(model, InLinePVTClassifier)
    for size in pf.SIZES:
        case = pf.expected(layout)[size]
        with torch.no_grad():
            logits = model(case['x'])
        assert logits.shape == case['logits'].shape
        assert pf.rel_diff(logits, case['logits']) < 1e-4, size


def test_logits_comparison_can_fail():
    case = pf.expected('IISS')['224x224']
    with torch.no_grad():
        assert pf.rel_diff(released_classifier('IIII')(case['x']), case['logits']) > 1e-2


def test_pretrained_cfg_is_the_authors_evaluation():
    """Squash-resize to 256x256 (bicubic), centre crop 224, ImageNet mean/std; the released links."""
    for arch in VARIANTS:
        model = timm.create_model(f'inline_pvt_{arch}', pretrained=False, **pf.mini_arch('IIII'))
        cfg = model.pretrained_cfg
        assert cfg['url'] == PVT_ARCH_CHECKPOINTS[arch] and cfg['pool_size'] == (7, 7)
        assert cfg['first_conv'] == 'layers.0.embed.proj' and cfg['classifier'] == 'head'
    data = timm.data.resolve_data_config(model=model)
    assert data['input_size'] == (3, 224, 224) and data['interpolation'] == 'bicubic'
    assert data['crop_pct'] == 0.875 and data['crop_mode'] == 'squash'
    assert data['mean'] == timm.data.IMAGENET_DEFAULT_MEAN and data['std'] == timm.data.IMAGENET_DEFAULT_STD
    assert timm.data.create_transform(**data).transforms[0].size == (256, 256)


def test_features_only_maps_are_the_backbone_outputs():
    case = pf.expected('IISS')['256x320']
    features = released_classifier('IISS', features_only=True)
    assert features.feature_info.channels() == [16, 32, 48, 64]
    assert features.feature_info.reduction() == [4, 8, 16, 32]
    with torch.no_grad():
        for m, out in zip(features(case['x']), pf.released_backbone('IISS')(case['x']), strict=True):
            assert torch.equal(m, out)
    early = released_classifier('IISS', features_only=True, out_indices=(0, 1))
    assert len(early.model.layers) == 2
    with torch.no_grad():
        assert [tuple(m.shape) for m in early(case['x'])] == [(1, 16, 64, 80), (1, 32, 32, 40)]


def test_forward_features_new_head_and_grad_checkpointing():
    x = pf.expected('IIII')['224x224']['x']
    full = released_classifier('IIII')
    model = released_classifier('IIII', num_classes=7)
    with torch.no_grad():
        features = model.forward_features(x)
        assert features.shape == (2, 7, 7, 64)                                  # NHWC, as timm's models
        assert torch.equal(model.forward_head(features, pre_logits=True), full.forward_head(features, pre_logits=True))
        assert model(x).shape == (2, 7)
        final, maps = model.forward_intermediates(x)
        assert torch.equal(final, features) and len(maps) == 4
    grads = []
    for enable in (False, True):
        model.zero_grad()
        model.set_grad_checkpointing(enable)
        model(x[:1].requires_grad_()).square().mean().backward()
        grads.append(model.layers[0].embed.proj.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])
    assert model.no_weight_decay() == {f'layers.{i}.embed.pos_embed' for i in range(4)}


@fx_on_unwrapped_code
def test_fx_graph_of_the_classifier_gives_its_logits():
    """timm's fx graph (the mixers and the PVT embedding are leaves) gives the logits and features."""
    from timm.models import create_feature_extractor, get_graph_node_names

    model = released_classifier('IISS')
    nodes = get_graph_node_names(model)[1]
    assert nodes[-1] == 'head' and 'layers.0.embed' in nodes and 'layers.2.blocks.0.attn' in nodes
    graph = create_feature_extractor(model, return_nodes={'head': 'logits', 'to_nhwc': 'features'})
    x = pf.expected('IISS')['250x330']['x']
    with torch.no_grad():
        out = graph(x)
        assert torch.equal(out['logits'], model(x)) and torch.equal(out['features'], model.forward_features(x))


def test_wrong_files_fail_by_name(tmp_path):
    with pytest.raises(CheckpointMismatchError, match='shape mismatch'):
        timm.create_model('inline_pvt_tiny', pretrained=True,
                          pretrained_cfg_overlay=dict(file=str(pf.checkpoint_path('IIII'))))
    with pytest.raises(CheckpointMismatchError, match='layers.2.blocks.0.attn.residual.0.weight'):
        released_classifier('IIII', path=pf.checkpoint_path('IISS'))
    with pytest.raises(ValueError, match='padding_aware is not supported by the classifier'):
        timm.create_model('inline_pvt_tiny', padding_aware=True)


@pytest.mark.parametrize('arch, gflops', [('tiny', 2.0), ('small', 3.9), ('medium', 6.9),
                                          pytest.param('large', 10.2, marks=pytest.mark.slow)])
def test_flops_at_224_are_the_papers_and_params_the_authors(arch, gflops):
    """mmengine's analysis with the attention handles (InLine's k^T v, q M and the dynamic 3x3 counted)."""
    model = timm.create_model(f'inline_pvt_{arch}').eval()
    with torch.no_grad():
        flops = flop_analyzer(model, (torch.randn(1, 3, 224, 224),)).total()
    assert flops == pytest.approx(gflops * 1e9, rel=0.02)
    assert sum(p.numel() for p in model.parameters()) == pf.released(arch)['params']


def test_eval_imagenet_tool_takes_the_pvt_models(tmp_path):
    """tools/analysis_tools/eval_imagenet.py scores an InLine-PVT file through the squash-crop transform, with the
    model's own predictions as the reference."""
    from test_eval_imagenet import load_tool, make_image_folder

    tool = load_tool()
    data = make_image_folder(tmp_path / 'val', ['n01440764', 'n01443537'], per_class=2)
    result = tool.main([str(data), '--model', 'inline_pvt_tiny', '--checkpoint', str(pf.checkpoint_path('IISS')),
                        '--model-args', json.dumps(dict(attn_type='IISS', **pf.mini_arch('IISS'))),
                        '--device', 'cpu', '--workers', '0', '--no-progress'])
    assert result['images'] == 4 and result['label_mode'] == 'imagenet-synsets'
    assert result['data_config']['crop_mode'] == 'squash' and result['data_config']['crop_pct'] == 0.875
    model = released_classifier('IISS')
    transform = timm.data.create_transform(**timm.data.resolve_data_config(model=model))
    dataset, _ = tool.build_dataset(str(data), transform, 1000)
    with torch.no_grad():
        hits = sum(int(model(x[None]).argmax() == y) for x, y in dataset)
    assert result['top1'] == 100 * hits / 4


def test_in_chans_adapts_the_released_first_conv_as_timm_does():
    """``in_chans=1`` from the released-format file: ``layers.0.embed.proj.weight`` is timm's
    ``adapt_input_conv(1, W)`` of the file's ``patch_embed1.proj.weight`` (summed over R, G, B), and a grey image's
    logits are the released model's for the image repeated to RGB (within 1e-5); 2 and 4 channels load and run;
    ``img_size=384`` changes no logit."""
    from timm.models import adapt_input_conv

    from inline_backbones.checkpoint import load_checkpoint_file

    released = load_checkpoint_file(pf.checkpoint_path('IIII'))['model']['patch_embed1.proj.weight']
    grey = released_classifier('IIII', in_chans=1)
    assert torch.equal(grey.layers[0].embed.proj.weight, adapt_input_conv(1, released))
    assert torch.equal(grey.layers[0].embed.proj.weight, released.sum(dim=1, keepdim=True))
    rgb = released_classifier('IIII')
    x = pf.expected('IIII')['256x320']['x'].mean(dim=1, keepdim=True)
    with torch.no_grad():
        torch.testing.assert_close(grey(x), rgb(x.repeat(1, 3, 1, 1)), rtol=1e-5, atol=1e-5)
        y = torch.randn(1, 3, 384, 384)
        assert torch.equal(released_classifier('IIII', img_size=384)(y), rgb(y))
    for in_chans in (2, 4):
        model = released_classifier('IIII', in_chans=in_chans)
        assert torch.equal(model.layers[0].embed.proj.weight, adapt_input_conv(in_chans, released))
        with torch.no_grad():
            assert model(torch.randn(1, in_chans, 64, 64)).shape == (1, 1000)
