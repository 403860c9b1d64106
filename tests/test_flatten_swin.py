"""FLatten-Swin (the Swin family's ``flatten-*`` presets, layout letter ``F``) against the FLatten authors' model and
the focused linear attention against its plain formula: the fixtures made with the authors' code
(``tests/flatten_fixtures.py``) through both load paths, the released key and shape lists, parameter counts, the
timm pretrained cfgs, the windows and shifts, global mode, padding-aware invariance."""
import math

import flatten_fixtures as ff
import pytest
import timm
import torch
import torch.nn.functional as F
from mutmut_compat import fx_on_unwrapped_code
from padding_cases import assert_padded_map_equals_image_alone, det_batch, randomized, region_differences
from released_fixtures import assert_stage_tokens_equal, stage_tokens

from inline_backbones import InLineSwinClassifier, InLineSwinTransformer
from inline_backbones.checkpoints.released import FLATTEN_SWIN_ARCH_CHECKPOINTS, RELEASED_CHECKPOINTS
from inline_backbones.models.families.swin_checkpoint import RELEASED_BUFFERS, checkpoint_filter_fn
from inline_backbones.models.mixers import FocusedLinearAttention
from inline_backbones.models.tokens.token_map import TokenMap

ARCHS = ('tiny', 'small', 'base')
# The FLatten paper's table (ImageNet-1k, 224 px): parameters of FLatten-Swin-T/S/B.
PAPER_PARAMS = {'tiny': 29e6, 'small': 51e6, 'base': 89e6}


# ---------------------------------------------------------------------------------------------------------------
# equal to the authors' model


@pytest.mark.parametrize('name', ff.MINIS)
def test_backbone_loaded_by_init_cfg_gives_the_authors_stage_tokens(name):
    x, reference = ff.expected_stage_tokens(name)
    actual = stage_tokens(ff.released_backbone(name), x)
    assert_stage_tokens_equal(actual, reference, rtol=1e-5)
    for a, r in zip(actual, reference, strict=True):
        assert (a - r).abs().max() < 1e-4 * max(1., r.abs().max())


@pytest.mark.parametrize('name', ff.MINIS)
def test_timm_classifier_loaded_from_the_released_file_gives_the_authors_logits(name):
    model = ff.released_classifier(name)
    for x, logits in ff.logit_cases(name):
        with torch.no_grad():
            out = model(x)
        assert out.shape == logits.shape
        torch.testing.assert_close(out, logits, rtol=1e-4, atol=1e-4)


def test_global_flatten_blocks_equal_the_windows_where_a_window_is_the_whole_map():
    """At 224 px the released windows (56, 28) are the maps of stages 1-2: global mode gives the authors' tokens."""
    x, reference = ff.expected_stage_tokens('mini-flatten-FFSS')
    assert_stage_tokens_equal(stage_tokens(ff.released_backbone('mini-flatten-FFSS', flatten_global=True), x),
                              reference, rtol=1e-5)


def test_the_windows_of_each_stage_follow_the_authors_rule():
    model = ff.released_backbone('mini-flatten-FFFF-w4')
    assert [[b.attn.window_size for b in stage.blocks] for stage in model.layers] == [[4, 4], [4, 4], [4], [2]]
    assert [[b.attn.shift for b in stage.blocks] for stage in model.layers] == [[False, True]] * 2 + [[False]] * 2
    with torch.device('meta'):
        tiny = InLineSwinTransformer(arch='flatten-tiny')
    windows = [{(type(b.attn).__name__, b.attn.window_size) for b in stage.blocks} for stage in tiny.layers]
    assert windows == [{('FocusedLinearAttention', 56)}, {('FocusedLinearAttention', 28)},
                       {('WindowAttention', 7)}, {('WindowAttention', 7)}]


# ---------------------------------------------------------------------------------------------------------------
# the released files: keys, shapes, parameters, links


@pytest.mark.parametrize('arch', ARCHS)
def test_released_state_dicts_load_strictly_at_full_size(arch):
    """The authors' full model's keys and shapes (from their code) are ours plus the buffers we rebuild; the family's
    filter takes them as they are (meta tensors: nothing is allocated), for the classifier and the backbone."""
    released = ff.released(arch)
    with torch.device('meta'):
        classifier = timm.create_model(f'flatten_swin_{arch}')
        backbone = InLineSwinTransformer(arch=f'flatten-{arch}')
    ours = {k: list(v.shape) for k, v in classifier.state_dict().items()}
    kept = {k: v for k, v in released['state_dict'].items() if not k.endswith(RELEASED_BUFFERS)}
    assert ours == kept
    assert set(released['state_dict']) - set(kept) and all('attn_mask' in k or 'relative_position_index' in k
                                                           for k in set(released['state_dict']) - set(kept))
    state = {k: torch.empty(shape, device='meta') for k, shape in released['state_dict'].items()}
    for model in (classifier, backbone):
        filtered = checkpoint_filter_fn(state, model)
        own = model.state_dict()
        assert set(filtered) <= set(own)
        assert set(own) - set(filtered) == {k for k in own if k.startswith(filtered.optional_prefixes)}
        assert all(filtered[k].shape == own[k].shape for k in filtered)


@pytest.mark.parametrize('arch', ARCHS)
def test_params_are_the_authors_and_their_tables(arch):
    with torch.device('meta'):
        model = InLineSwinClassifier(arch=f'flatten-{arch}')
    params = sum(p.numel() for p in model.parameters())
    assert params == ff.released(arch)['params']
    assert abs(params / PAPER_PARAMS[arch] - 1) < 0.01


@pytest.mark.parametrize('arch', ARCHS)
def test_timm_models_have_the_released_links_and_the_authors_evaluation(arch):
    name = f'flatten_swin_{arch}'
    model = timm.create_model(name, embed_dims=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2])
    cfg = model.pretrained_cfg
    assert cfg['url'] == RELEASED_CHECKPOINTS[f'flatten_swin_{arch[0]}'] == FLATTEN_SWIN_ARCH_CHECKPOINTS[arch]
    assert cfg['origin_url'] == 'https://github.com/LeapLabTHU/FLatten-Transformer'
    assert cfg['paper_ids'] == 'arXiv:2308.00442' and cfg.get('license') is None
    assert cfg['classifier'] == 'head' and cfg['first_conv'] == 'patch_embed.proj' and cfg['pool_size'] == (7, 7)
    assert model.attn_type == 'FFSS' and model.num_classes == 1000
    data = timm.data.resolve_data_config(model=model)
    assert data['input_size'] == (3, 224, 224) and data['interpolation'] == 'bicubic'
    assert data['crop_pct'] == 0.875 and data['crop_mode'] == 'center'
    assert data['mean'] == timm.data.IMAGENET_DEFAULT_MEAN and data['std'] == timm.data.IMAGENET_DEFAULT_STD
    assert timm.data.create_transform(**data).transforms[0].size == 256
    assert timm.models.get_pretrained_cfg(name).url == cfg['url']
    assert 'layout FFSS' in timm.models.model_entrypoint(name).__doc__


# ---------------------------------------------------------------------------------------------------------------
# the focused linear attention against its formula


def naive_focused_attention(attn, x, hw_shape, encoding):
    """FLatten's formula on one window or map ``x`` (N, C) of ``hw_shape``, with the N x N attention matrix per head
    and the positional encoding ``encoding`` (N, C) added to k."""
    N, C = x.shape
    h, d = attn.num_heads, C // attn.num_heads
    q, k, v = (x @ attn.qkv.weight.T + attn.qkv.bias).split(C, dim=1)
    k = k + encoding
    s = F.softplus(attn.scale.reshape(C))

    def focus(t):
        t = (t.clamp(min=0) + 1e-6) / s
        powered = t ** attn.focusing_factor
        return powered / powered.norm(dim=1, keepdim=True) * t.norm(dim=1, keepdim=True)

    q, k = focus(q), focus(k)
    out = torch.empty(N, C)
    for head in range(h):
        c = slice(head * d, (head + 1) * d)
        weights = (q[:, c] @ k[:, c].T) / N / (q[:, c] @ k[:, c].mean(0) + 1e-6)[:, None]    # (N, N)
        conv = F.conv2d(v[:, c].T.reshape(1, d, *hw_shape), attn.dwc.weight, attn.dwc.bias,
                        padding=attn.dwc.kernel_size[0] // 2, groups=d)
        out[:, c] = weights @ v[:, c] + conv.reshape(d, N).T
    return out @ attn.proj.weight.T + attn.proj.bias


def random_attention(**kwargs):
    torch.manual_seed(0)
    attn = FocusedLinearAttention(16, 2, **kwargs).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.3)
    return attn


def resized(attn, hw_shape):
    ws, C = attn.window_size, attn.embed_dims
    grid = attn.positional_encoding.reshape(1, ws, ws, C).permute(0, 3, 1, 2)
    return F.interpolate(grid, size=hw_shape, mode='bicubic', align_corners=False)[0].permute(1, 2, 0).reshape(-1, C)


def test_global_mode_is_the_formula_with_the_encoding_resized_bicubically():
    attn = random_attention(window_size=4, global_attention=True)
    H, W = 5, 7
    x = torch.randn(2, H * W, 16)
    with torch.no_grad():
        out = attn(x, TokenMap.of(x, (H, W)))
        for b in range(2):
            torch.testing.assert_close(out[b], naive_focused_attention(attn, x[b], (H, W), resized(attn, (H, W))),
                                       rtol=1e-4, atol=1e-5)


def test_global_mode_padding_aware_is_the_formula_on_each_images_own_region():
    attn = random_attention(window_size=4, global_attention=True)
    H, W, regions = 9, 11, [(9, 11), (5, 7), (5, 7)]
    x = torch.randn(3, H * W, 16)
    with torch.no_grad():
        out = attn(x, TokenMap.of(x, (H, W), torch.tensor(regions))).view(3, H, W, 16)
        for b, (h, w) in enumerate(regions):
            own = x.view(3, H, W, 16)[b, :h, :w].reshape(h * w, 16)
            reference = naive_focused_attention(attn, own, (h, w), resized(attn, (h, w))).view(h, w, 16)
            torch.testing.assert_close(out[b, :h, :w], reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('shift', [False, True])
def test_windows_are_the_formula_per_window_and_shifted_windows_roll_without_a_seam_mask(shift):
    """Windows of 4 on an 8 x 8 map; shifted: the map rolled by -2 and cut into windows as it is (the windows across
    the wrap-around seam are not split, as in the authors' blocks), then rolled back."""
    attn = random_attention(window_size=4, shift=shift)
    x = torch.randn(1, 64, 16)
    with torch.no_grad():
        out = attn(x, TokenMap.of(x, (8, 8))).view(8, 8, 16)
        grid = x.view(8, 8, 16).roll((-2, -2), (0, 1)) if shift else x.view(8, 8, 16)
        reference = torch.empty(8, 8, 16)
        for r in range(0, 8, 4):
            for c in range(0, 8, 4):
                window = grid[r:r + 4, c:c + 4].reshape(16, 16)
                reference[r:r + 4, c:c + 4] = naive_focused_attention(
                    attn, window, (4, 4), attn.positional_encoding[0]).view(4, 4, 16)
        if shift:
            reference = reference.roll((2, 2), (0, 1))
        torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('shift', [False, True])
def test_padding_aware_windows_on_a_padded_map_equal_the_image_alone(shift):
    assert_padded_map_equals_image_alone(random_attention(window_size=4, shift=shift))


# ---------------------------------------------------------------------------------------------------------------
# the backbone: padding-aware in windows and global


def small_flatten(**kwargs):
    torch.manual_seed(0)
    return randomized(InLineSwinTransformer(arch=dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8]),
                                            attn_type='FFFF', drop_path_rate=0., **kwargs))


@pytest.mark.parametrize('options', [dict(flatten_window_size=8), dict(flatten_global=True)],
                         ids=['windows-of-8', 'global'])
def test_padding_aware_flatten_is_batch_invariant_exactly(options):
    """Each image's maps batched (padded by mmdet's preprocessor) equal its maps alone on its own region, in windows
    of 8 tokens (shifted on odd blocks; maps of 40 x 56 down to 5 x 7 tokens) and globally."""
    assert max(region_differences(small_flatten(padding_aware=True, **options), det_batch, explicit=True)) < 1e-5


def test_without_the_mode_the_padding_changes_the_features():
    assert max(region_differences(small_flatten(flatten_global=True), det_batch, explicit=False)) > 1e-2


def test_any_input_size_in_windows_and_global():
    for options in (dict(flatten_window_size=8), dict(flatten_global=True)):
        model = small_flatten(**options)
        with torch.no_grad():
            outs = model(torch.randn(1, 3, 97, 131))
        assert [tuple(o.shape[-2:]) for o in outs] == [(math.ceil(97 / s), math.ceil(131 / s)) for s in (4, 8, 16, 32)]
        assert all(torch.isfinite(o).all() for o in outs)


@fx_on_unwrapped_code
def test_fx_graph_of_a_flatten_classifier_gives_its_logits():
    """The focused linear attention is a leaf of timm's fx graphs, windowed and global."""
    from timm.models import create_feature_extractor, get_graph_node_names

    for options in (dict(flatten_window_size=8), dict(flatten_global=True)):
        torch.manual_seed(0)
        model = randomized(InLineSwinClassifier(arch=dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8]),
                                                attn_type='FFSS', drop_path_rate=0., **options))
        assert 'layers.0.blocks.1.attn' in get_graph_node_names(model)[1]
        graph = create_feature_extractor(model, return_nodes={'head': 'logits'})
        x = torch.randn(1, 3, 90, 110)
        with torch.no_grad():
            assert torch.equal(graph(x)['logits'], model(x))


@pytest.mark.slow
@pytest.mark.mutation
def test_global_flatten_exports_with_dynamic_sizes():
    """torch.export of global FLatten blocks: one graph (the encoding resized in it) gives eager's maps elsewhere."""
    torch.manual_seed(0)
    model = randomized(InLineSwinTransformer(arch=dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]),
                                             attn_type='FFFF', flatten_global=True, flatten_window_size=8,
                                             drop_path_rate=0.))
    H, W = torch.export.Dim('H', min=4, max=64), torch.export.Dim('W', min=4, max=64)
    exported = torch.export.export(model, (torch.randn(1, 3, 256, 224),), dynamic_shapes=({2: 32 * H, 3: 32 * W},))
    for size in ((256, 256), (160, 320)):
        x = torch.randn(1, 3, *size)
        with torch.no_grad():
            for a, b in zip(exported.module()(x), model(x), strict=True):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
