"""InLine-CSwin: equal to the authors' model (released-format fixtures made by their code, both load paths), the
released T/S/B keys, shapes, parameter counts and FLOPs, its two mixers against formulas written out one image and
one stripe at a time (any map size, padding-aware), its token maps and its key filter. The family contract
(``test_family_contract.py``) covers the rest."""
import pytest
import timm
import torch
import torch.nn.functional as F
from cswin_fixtures import LAYOUTS, checkpoint_path, expected, mini_arch, released, released_classifier

from inline_backbones import CheckpointMismatchError, InLineCSwinClassifier, InLineCSwinTransformer
from inline_backbones.models.families.cswin_checkpoint import checkpoint_filter_fn, from_released
from inline_backbones.models.mixers.cswin_attention import CSwinInLineAttention, CSwinStripeAttention
from inline_backbones.models.tokens.token_map import TokenMap

# The authors' table (LeapLabTHU/InLine README): FLOPs at 224 (multiply-adds).
PAPER_FLOPS = {'tiny': 4.3e9, 'small': 6.8e9, 'base': 14.9e9}


@pytest.mark.parametrize('layout', LAYOUTS)
def test_the_backbone_from_init_cfg_gives_the_authors_stage_tokens(layout):
    case = expected(layout)
    arch = mini_arch(layout)
    model = InLineCSwinTransformer(arch={k: v for k, v in arch.items() if k != 'mlp_ratio'}, attn_type=layout,
                                   mlp_ratio=arch['mlp_ratio'], drop_path_rate=0.,
                                   init_cfg=dict(type='Pretrained', checkpoint=str(checkpoint_path(layout))))
    model.init_weights()
    with torch.no_grad():
        tokens = [out for out, _ in model.eval().iter_stages(case['x'])]
    for ours, theirs in zip(tokens, case['stage_tokens'], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-4)


@pytest.mark.parametrize('layout', LAYOUTS)
def test_timm_from_the_released_file_gives_the_authors_logits_of_its_model_weights(layout):
    """``pretrained_cfg_overlay=dict(file=...)``: the file's ``model`` (what the authors evaluate), not its EMA."""
    case = expected(layout)
    model = released_classifier(layout, **mini_arch(layout))
    with torch.no_grad():
        logits = model(case['x'])
        maps = model.forward_intermediates(case['x'], output_fmt='NHWC', intermediates_only=True)
    torch.testing.assert_close(logits, case['logits'], rtol=0, atol=1e-4)
    assert (logits - case['ema_logits']).abs().max() > 1e-2
    for ours, theirs in zip(maps, case['stage_tokens'], strict=True):
        torch.testing.assert_close(ours.flatten(1, 2), theirs, rtol=0, atol=1e-4)


@pytest.mark.parametrize('arch', ['tiny', 'small', 'base'])
def test_released_keys_shapes_and_parameters_are_the_authors(arch):
    """The full model (meta device): its state dict is the released one renamed (:func:`from_released`), key for
    key and shape for shape, the released list loads strictly into the classifier and the backbone, and the
    parameter count is the authors' model's."""
    spec = released(arch)
    with torch.device('meta'):
        classifier = timm.create_model(f'inline_cswin_{arch}')
        backbone = InLineCSwinTransformer(arch=arch)
    shapes = {k: tuple(v) for k, v in spec['state_dict'].items()}
    ours = {k: tuple(v.shape) for k, v in classifier.state_dict().items()}
    renamed = from_released(shapes)
    assert renamed == ours and len(renamed) == len(shapes)
    assert sum(p.numel() for p in classifier.parameters()) == spec['params']
    state = {k: torch.empty(shape, device='meta') for k, shape in shapes.items()}
    assert checkpoint_filter_fn(state, classifier).keys() == ours.keys()
    for_backbone = checkpoint_filter_fn(state, backbone)
    assert set(for_backbone) == set(backbone.state_dict()) - {f'norm{i}.{p}' for i in range(4)
                                                              for p in ('weight', 'bias')}
    assert backbone.num_features == [spec['state_dict'][f'merge{i}.conv.weight'][1] for i in (1, 2, 3)] + [
        spec['state_dict']['norm.weight'][0]]


@pytest.mark.slow
@pytest.mark.parametrize('arch', ['tiny', 'small', 'base'])
def test_flops_at_224_are_the_authors_table(arch):
    from inline_backbones.analysis.flops import flop_analyzer

    model = InLineCSwinClassifier(arch=arch).eval()
    with torch.no_grad():
        flops = flop_analyzer(model, (torch.randn(1, 3, 224, 224),)).total()
    assert abs(flops / PAPER_FLOPS[arch] - 1) < 0.02, flops


def test_neck_widths_of_the_presets():
    """What an FPN / UperNet neck takes (``in_channels``)."""
    with torch.device('meta'):
        widths = {arch: InLineCSwinTransformer(arch=arch).num_features for arch in ('tiny', 'small', 'base')}
    assert widths == {'tiny': [64, 128, 256, 512], 'small': [64, 128, 256, 512], 'base': [96, 192, 384, 768]}


# ---- the mixers against the formulas, one image and one stripe at a time ------------------------------------------

def _randomized(module):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return module.eval()


def naive_stripes(attn, x, hw, regions=None):
    """CSWin's stripe attention of each image's own ``h x w`` tokens alone, stripe by stripe: each side padded
    symmetrically to whole stripes (``p // 2`` cells before), the padding masked out of the keys, LePE within the
    stripe (zeros on padding and beyond), halves of the channels to vertical / horizontal stripes."""
    B, N, C = x.shape
    H, W = hw
    qkv = F.linear(x, attn.qkv.weight, attn.qkv.bias).view(B, H, W, 3, C)
    out = torch.zeros(B, H, W, C)
    branches = [(None, 0, C, attn.num_heads)] if attn.split_size is None else [
        (0, 0, C // 2, attn.num_heads // 2), (1, C // 2, C // 2, attn.num_heads // 2)]
    for b in range(B):
        h, w = regions[b] if regions is not None else (H, W)
        for (axis, start, c, heads), lepe in zip(branches, attn.lepe, strict=True):
            part = qkv[b, :h, :w, :, start:start + c]                                      # (h, w, 3, c)
            sp = attn.split_size
            pad_h, pad_w = ((-h) % sp if axis == 1 else 0, (-w) % sp if axis == 0 else 0) if sp else (0, 0)
            top, left = pad_h // 2, pad_w // 2
            canvas = torch.zeros(h + pad_h, w + pad_w, 3, c)
            valid = torch.zeros(h + pad_h, w + pad_w, dtype=torch.bool)
            canvas[top:top + h, left:left + w], valid[top:top + h, left:left + w] = part, True
            if axis is None:
                stripes = [(slice(None), slice(None))]
            elif axis == 0:
                stripes = [(slice(None), slice(k, k + sp)) for k in range(0, w + pad_w, sp)]
            else:
                stripes = [(slice(k, k + sp), slice(None)) for k in range(0, h + pad_h, sp)]
            result = torch.zeros(h + pad_h, w + pad_w, c)
            for rows, cols in stripes:
                cells, ok = canvas[rows, cols], valid[rows, cols]                            # (sh, sw, 3, c)
                sh, sw = ok.shape
                q, k, v = (cells[:, :, i].reshape(sh * sw, heads, c // heads).transpose(0, 1) for i in range(3))
                scores = (q @ k.transpose(1, 2)) * (c // heads) ** -0.5
                scores = scores.masked_fill(~ok.reshape(1, 1, -1), float('-inf'))
                o = (scores.softmax(-1) @ v).transpose(0, 1).reshape(sh, sw, c)
                o = o + F.conv2d(cells[:, :, 2].permute(2, 0, 1)[None], lepe.weight, lepe.bias, padding=1,
                                 groups=c)[0].permute(1, 2, 0)
                result[rows, cols] = o
            out[b, :h, :w, start:start + c] = result[top:top + h, left:left + w]
    return F.linear(out.view(B, N, C), attn.proj.weight, attn.proj.bias)


def naive_inline_lepe(attn, x, x_in, hw):
    """The authors' InLine-CSwin layer on one image's tokens ``x`` (1, N, C) (``x_in``: the block's input), as their
    code writes it: ``q KV + (1 - s q . mean k) mean v + dwconv(v; residual(mean x_in)) + lepe(v)``, then ``proj``."""
    _, N, C = x.shape
    h = attn.num_heads
    d = C // h
    s = d ** -0.5
    q, k, v = F.linear(x[0], attn.qkv.weight, attn.qkv.bias).view(N, 3, h, d).permute(1, 2, 0, 3)   # (h, N, d)
    kv = (k.transpose(1, 2) * (s / N) ** 0.5) @ (v * (s / N) ** 0.5)
    out = q @ kv + (1 - q @ k.mean(1, keepdim=True).transpose(1, 2) * s) * v.mean(1, keepdim=True)
    out = out.transpose(0, 1).reshape(N, C)
    v_map = v.transpose(1, 2).reshape(1, C, *hw)
    kernels = attn.residual(x_in[0].mean(0).view(1, C, 1)).view(C, 1, 3, 3)
    out = out + F.conv2d(v_map, kernels, padding=1, groups=C).view(C, N).t()
    out = out + F.conv2d(v_map, attn.lepe[0].weight, attn.lepe[0].bias, padding=1, groups=C).view(C, N).t()
    return F.linear(out, attn.proj.weight, attn.proj.bias)[None]


@pytest.mark.parametrize('split_size, hw', [(1, (5, 6)), (2, (7, 9)), (7, (13, 10)), (3, (4, 11)), (None, (6, 7))])
def test_stripes_of_any_map_are_csw_stripes_with_the_padding_masked(split_size, hw):
    attn = _randomized(CSwinStripeAttention(16, 4, split_size=split_size))
    x = torch.randn(2, hw[0] * hw[1], 16)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, TokenMap.of(x, hw)), naive_stripes(attn, x, hw), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('split_size', [1, 2, 7, None])
def test_padding_aware_stripes_are_each_images_own(split_size):
    """On a padded map each image's own tokens get its own stripes (padded from its own size), as alone."""
    attn = _randomized(CSwinStripeAttention(16, 4, split_size=split_size))
    H, W, regions = 12, 15, [(12, 15), (9, 11), (5, 4)]
    x = torch.randn(3, H * W, 16)
    with torch.no_grad():
        out = attn(x, TokenMap.of(x, (H, W), torch.tensor(regions))).view(3, H, W, 16)
        reference = naive_stripes(attn, x, (H, W), regions).view(3, H, W, 16)
        for b, (h, w) in enumerate(regions):
            own = x.view(3, H, W, 16)[b:b + 1, :h, :w].reshape(1, h * w, 16)
            alone = attn(own, TokenMap.of(own, (h, w))).view(h, w, 16)
            torch.testing.assert_close(out[b, :h, :w], alone, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out[b, :h, :w], reference[b, :h, :w], rtol=1e-5, atol=1e-5)


def test_inline_with_lepe_is_the_authors_formula_on_each_images_own_tokens():
    """Global over any map, the 3x3 kernels from the mean of the block's input; padding-aware == each image alone."""
    attn = _randomized(CSwinInLineAttention(16, 2))
    H, W, regions = 9, 11, [(9, 11), (5, 7)]
    x, x_in = torch.randn(2, H * W, 16), torch.randn(2, H * W, 16)
    with torch.no_grad():
        plain = attn(x, TokenMap.of(x, (H, W)), x_in)
        for b in range(2):
            torch.testing.assert_close(plain[b:b + 1], naive_inline_lepe(attn, x[b:b + 1], x_in[b:b + 1], (H, W)),
                                       rtol=1e-4, atol=1e-5)
        aware = attn(x, TokenMap.of(x, (H, W), torch.tensor(regions)), x_in).view(2, H, W, 16)
        for b, (h, w) in enumerate(regions):
            own, own_in = (t.view(2, H, W, 16)[b:b + 1, :h, :w].reshape(1, h * w, 16) for t in (x, x_in))
            torch.testing.assert_close(aware[b, :h, :w].reshape(1, h * w, 16),
                                       naive_inline_lepe(attn, own, own_in, (h, w)), rtol=1e-4, atol=1e-5)


def test_the_block_hands_its_input_to_the_inline_mixer():
    """The residual's kernels come from the block's input before ``norm1`` (the authors' ``x.mean(dim=1)``)."""
    model = _randomized(InLineCSwinTransformer(arch=dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[2, 2, 4, 8]),
                                               attn_type='IISS', drop_path_rate=0.))
    block = model.layers[0].blocks[0]
    assert block.attn_reads_input and not model.layers[2].blocks[0].attn_reads_input
    x = torch.randn(1, 6 * 7, 16) * 3 + 1
    tokens = TokenMap.of(x, (6, 7))
    with torch.no_grad():
        y = block(x, tokens)
        normed = block.norm1(x)
        attended = x + block.attn(normed, tokens, x)
        torch.testing.assert_close(y, attended + block.mlp(block.norm2(attended)), rtol=1e-5, atol=1e-5)
        assert not torch.allclose(block.attn(normed, tokens, x), block.attn(normed, tokens), atol=1e-3)


def test_token_regions_follow_the_convs():
    """Padding-aware regions: the stem's floor((n + 1) / 4), each merging's ceil(n / 2), at least 1."""
    pixels = TokenMap((160, 224), 3, 'cpu', torch.tensor([[150, 171], [160, 224], [2, 5]]))
    stem = pixels.convolved((40, 56), 7, 4, 2)
    assert stem.regions.tolist() == [[37, 43], [40, 56], [1, 1]]
    assert stem.convolved((20, 28), 3, 2, 1).regions.tolist() == [[19, 22], [20, 28], [1, 1]]
    assert pixels.convolved((40, 56), 7, 4, 2).regions is not None and TokenMap((8, 8), 1, 'cpu').convolved(
        (2, 2), 7, 4, 2).regions is None


def test_stripes_at_224_need_no_padding_and_have_no_mask():
    for hw, split_size in (((56, 56), 1), ((28, 28), 2), ((14, 14), 7)):
        tokens = TokenMap(hw, 2, 'cpu')
        for axis in (0, 1):
            plan = tokens.stripe_plan(split_size, axis)
            assert plan.mask is None
            assert plan.window_hw == ((hw[0], split_size) if axis == 0 else (split_size, hw[1]))
    assert TokenMap((14, 10), 1, 'cpu').stripe_plan(7, 0).window_hw == (14, 7)      # 10 columns -> 2 stripes of 7
    assert TokenMap((14, 10), 1, 'cpu').stripe_plan(7, 0).mask.sum() == 140


def test_the_key_filter_names_what_does_not_fit():
    model = InLineCSwinTransformer(arch=dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[2, 2, 4, 8]),
                                   attn_type='IISS')
    with pytest.raises(CheckpointMismatchError, match='mix the released InLine-CSwin format and ours'):
        checkpoint_filter_fn({'stage1.0.qkv.weight': torch.zeros(1), 'layers.0.x': torch.zeros(1)}, model)
    with pytest.raises(CheckpointMismatchError, match=r"in no InLine-CSwin checkpoint .*needs prefix='backbone.'"):
        checkpoint_filter_fn({'backbone.layers.0.x': torch.zeros(1)}, model)
    ours = model.state_dict()
    assert checkpoint_filter_fn(ours, model).keys() == ours.keys()                 # a saved backbone as it is
    assert from_released({'stage2.1.attns.1.get_v.bias': 0, 'stage4.0.attns.0.residual.2.weight': 0,
                          'merge3.conv.weight': 0, 'stage1_conv_embed.2.bias': 0, 'stage3.0.mlp.fc2.bias': 0}) == {
        'layers.1.blocks.1.attn.lepe.1.bias': 0, 'layers.3.blocks.0.attn.residual.2.weight': 0,
        'layers.2.downsample.proj.weight': 0, 'patch_embed.norm.bias': 0, 'layers.2.blocks.0.mlp.fc2.bias': 0}


@pytest.mark.parametrize('task', ['mmdet', 'mmseg'])
def test_mmdet_and_mmseg_build_it_by_its_scoped_name_and_their_necks_take_its_widths(task):
    """``type='inline_backbones.InLineCSwinTransformer'`` from the task's own registry; an FPN with the preset's
    widths takes its maps (strides 4-32) of an input that is no multiple of 32."""
    registry = pytest.importorskip(f'{task}.registry')
    pytest.importorskip(f'{task}.models')
    from mmengine.registry import init_default_scope

    init_default_scope(task)
    backbone = registry.MODELS.build(dict(type='inline_backbones.InLineCSwinTransformer', arch='tiny',
                                          drop_path_rate=0.2, frozen_stages=1, with_cp=True, padding_aware=True,
                                          out_indices=(0, 1, 2, 3), init_cfg=None))
    assert type(backbone) is InLineCSwinTransformer and not backbone.patch_embed.proj.weight.requires_grad
    neck = registry.MODELS.build(dict(type='FPN', in_channels=[64, 128, 256, 512], out_channels=32, num_outs=4))
    with torch.no_grad():
        maps = backbone.eval()(torch.randn(1, 3, 96, 136))
        outs = neck(maps)
    assert [tuple(m.shape[-2:]) for m in maps] == [(24, 34), (12, 17), (6, 9), (3, 5)]
    assert [o.shape[1] for o in outs] == [32] * 4
