"""InLine-DeiT's timm classifiers: equal to the authors' model on their released-format fixtures (``deit_fixtures.py``:
logits and every block's tokens at 224 and 288, the full T/S/B key and shape lists and parameter counts), FLOPs at the
released sizes as the authors' table, and the timm contract the other families keep in test_family_contract.py
(which holds the backbone families), read as timm's ViT reads it: ``forward_features`` gives every token (NLC), the
head reads the class token, the stage map leaves it out."""
import logging

import deit_fixtures as df
import pytest
import released_fixtures as rf
import timm
import torch
from mutmut_compat import fx_on_unwrapped_code
from padding_cases import randomized
from timm.layers import resample_abs_pos_embed
from timm.models import adapt_input_conv

from inline_backbones import CheckpointMismatchError, InLineDeiTClassifier
from inline_backbones.checkpoints.loading import load_checkpoint_file
from inline_backbones.checkpoints.released import PAPER_FIGURES, arch_checkpoints
from inline_backbones.models.classifier import checkpoint_filter_fn
from inline_backbones.models.families.deit_checkpoint import from_released
from inline_backbones.models.mixers import build_mixer
from inline_backbones.models.mixers.inline.reference import inline_attention_reference
from inline_backbones.models.tokens.token_map import TokenMap

ARCHS = ('tiny', 'small', 'base')
SIZES = {'tiny': 224, 'small': 288, 'base': 448}
SMALL = dict(embed_dims=16, depths=[2], num_heads=[2])


def mini_kwargs(img_size):
    """The fixture's mini arch as the classifier takes it (one stage: ``depths`` and ``num_heads`` of one entry)."""
    arch = df.mini_arch(img_size)
    return dict(embed_dims=arch['embed_dims'], depths=[arch['depth']], num_heads=[arch['num_heads']],
                patch_size=arch['patch_size'], mlp_ratio=arch['mlp_ratio'])


def released(img_size, **kwargs):
    return df.released_classifier(img_size, **mini_kwargs(img_size), **kwargs)


def small_model(depth=2, **kwargs):
    """A random small classifier of ``depth`` blocks, eval mode, seed fixed, taking any size of whole patches
    (``dynamic_img_size``)."""
    torch.manual_seed(0)
    return randomized(InLineDeiTClassifier(arch=dict(SMALL, depths=[depth]), attn_type='I', drop_path_rate=0.,
                                           **dict(dict(dynamic_img_size=True), **kwargs))).eval()


def timm_vit(depth, **kwargs):
    """timm's own ViT (``vit_small_patch16_224``) of ``depth`` blocks as wide as :data:`SMALL`, random weights."""
    return timm.create_model('vit_small_patch16_224', pretrained=False, depth=depth, embed_dim=SMALL['embed_dims'],
                             num_heads=SMALL['num_heads'][0], **kwargs).eval()


def block_tokens(model, x):
    """Every block's output tokens ``t_j`` (B, 1 + HW, C) of ``model`` on ``x``."""
    return rf.hooked_outputs(model, model.layers[0].blocks, x)


def as_map(t, hw):
    """The map's tokens of ``t`` (class token left out) as an NCHW map of ``hw``."""
    return t[:, 1:].transpose(1, 2).reshape(len(t), -1, *hw)


# ---- equal to the authors' model -------------------------------------------------------------------------------------

@pytest.mark.parametrize('img_size', df.SIZES)
def test_logits_and_block_tokens_equal_the_authors_model(img_size):
    model = released(img_size)
    assert isinstance(model, InLineDeiTClassifier)
    x, expected_tokens = df.expected_block_tokens(img_size)
    blocks = []
    hooks = [block.register_forward_hook(lambda m, i, out: blocks.append(out)) for block in model.layers[0].blocks]
    (_, expected), = df.logit_cases(img_size)
    with torch.no_grad():
        logits = model(x)
    for hook in hooks:
        hook.remove()
    assert logits.shape == expected.shape == (len(x), 1000)
    assert rf.rel_diff(logits, expected) < 1e-4
    assert len(blocks) == len(expected_tokens)
    for ours, theirs in zip(blocks, expected_tokens, strict=True):
        assert ours.shape == theirs.shape and rf.rel_diff(ours, theirs) < 1e-4


def test_logits_comparison_can_fail():
    """The same file pooled over the map instead of the class token is not the authors' model (the check has
    teeth)."""
    (x, expected), = df.logit_cases(224)
    with torch.no_grad():
        assert rf.rel_diff(released(224, global_pool='avg')(x), expected) > 1e-2


@pytest.mark.parametrize('arch', ARCHS)
def test_state_dict_is_the_released_key_and_shape_list_and_params(arch):
    """At full size (meta device): our keys are the released keys with ``blocks.`` in our one stage, in order, with
    the released shapes; the parameter count is the authors' code's."""
    release = df.released(arch)
    assert release['img_size'] == SIZES[arch]
    with torch.device('meta'):
        model = timm.create_model(f'inline_deit_{arch}')
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    theirs = release['state_dict']
    assert list(ours) == list(from_released(dict.fromkeys(theirs)))
    assert list(ours.values()) == list(theirs.values())
    assert sum(p.numel() for p in model.parameters()) == release['params']


@pytest.mark.parametrize('arch, gflops', [('tiny', 1.1), ('small', 5.0), pytest.param('base', 17.2,
                                                                                      marks=pytest.mark.slow)])
def test_flops_at_the_released_size_are_the_authors(arch, gflops):
    """mmengine's analysis with InLine's handles (1.11 / 4.98 / 17.20 GMACs; the authors' table 1.1 / 5.0 / 17.2G)."""
    from inline_backbones.analysis.flops import flop_analyzer  # mmengine's FlopAnalyzer

    model = timm.create_model(f'inline_deit_{arch}').eval()
    size = SIZES[arch]
    with torch.no_grad():
        flops = flop_analyzer(model, (torch.randn(1, 3, size, size),)).total()
    assert flops == pytest.approx(gflops * 1e9, rel=0.02)


# ---- timm's registration and pretrained cfgs -------------------------------------------------------------------------

@pytest.mark.parametrize('arch', ARCHS)
def test_pretrained_cfg_is_the_authors_evaluation(arch):
    """The released link, the released input size, and the authors' evaluation: resized bicubic (squashed) to
    ``int(256 / 224 * size)``, centre crop ``size``, ImageNet mean/std; ``head`` and the images' conv named."""
    name = f'inline_deit_{arch}'
    size = SIZES[arch]
    model = timm.create_model(name, **SMALL)
    cfg = model.pretrained_cfg
    assert cfg['url'] == arch_checkpoints('inline_deit_')[arch] and cfg['input_size'] == (3, size, size)
    assert cfg['first_conv'] == 'patch_embed.proj' and cfg['classifier'] == 'head' and cfg['pool_size'] is None
    data = timm.data.resolve_data_config(model=model)
    assert data['input_size'] == (3, size, size) and data['interpolation'] == 'bicubic'
    assert data['crop_pct'] == 0.875 and data['crop_mode'] == 'squash'
    assert data['mean'] == timm.data.IMAGENET_DEFAULT_MEAN and data['std'] == timm.data.IMAGENET_DEFAULT_STD
    transform = timm.data.create_transform(**data)
    assert transform.transforms[0].size == (int(256 / 224 * size),) * 2 and transform.transforms[1].size == (size,) * 2
    function = timm.models.model_entrypoint(name)
    assert function.__name__ == name and function.__doc__ == PAPER_FIGURES[name] and f'at {size} px' in function.__doc__


def test_timm_default_cfg_contract():
    """timm's ``test_model_default_cfgs`` as for its ViT: NLC features (class token first), pre-logits the class
    token's, ``reset_classifier(0)`` gives them, ``reset_classifier(0, '')`` the tokens."""
    model = timm.create_model('inline_deit_tiny').eval()
    assert model.output_fmt == 'NLC' and model.num_prefix_tokens == 1 and model.global_pool == 'token'
    assert model.num_features == model.head_hidden_size == model.feature_info[-1]['num_chs'] == 192
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        features = model.forward_features(x)
        assert features.shape == (1, 1 + 14 * 14, 192)
        pre_logits = model.forward_head(features, pre_logits=True)
        assert torch.equal(pre_logits, features[:, 0])
        model.reset_classifier(0)
        assert model.num_classes == 0 and torch.equal(model(x), pre_logits)
        model.reset_classifier(0, '')
        assert torch.equal(model(x), features)
        model.reset_classifier(0, 'avg')
        assert torch.equal(model(x), features[:, 1:].mean(dim=1))
    state_dict = model.state_dict()
    assert 'head.weight' in timm.create_model('inline_deit_tiny', **SMALL).state_dict()
    assert model.pretrained_cfg['first_conv'] + '.weight' in state_dict
    with pytest.raises(ValueError) as error:
        model.reset_classifier(5, 'max')
    assert str(error.value) == "global_pool must be 'token', 'avg' or '', got 'max'"


def test_defaults_new_head_and_weight_decay():
    with torch.device('meta'):
        model = InLineDeiTClassifier()
    assert model.arch == InLineDeiTClassifier.family.resolve_arch('tiny')
    assert model.head.out_features == 1000 and model.norm.eps == 1e-6
    assert all(b.norm1.eps == b.norm2.eps == 1e-6 for b in model.layers[0].blocks)
    assert model.layers[0].blocks[-1].drop_path.drop_prob == pytest.approx(0.1)
    assert model.feature_info == [dict(num_chs=192, reduction=16, module=f'layers.0.blocks.{j}') for j in range(12)]
    assert model.no_weight_decay() == {'pos_embed', 'cls_token'}
    model = small_model(num_classes=3)
    model.reset_classifier(40)
    assert model.head.out_features == model.num_classes == 40 and torch.equal(model.head.bias, torch.zeros(40))
    with pytest.raises(ValueError, match='padding_aware is not supported by the classifier'):
        InLineDeiTClassifier(arch=SMALL, attn_type='I', padding_aware=True)
    with pytest.raises(ValueError, match=r'InLine-DeiT has one stage \(a plain ViT\)'):
        InLineDeiTClassifier(arch=dict(SMALL, depths=[1, 1], num_heads=[2, 2]), attn_type='II')


def test_new_head_keeps_the_trunk(caplog):
    (x, _), = df.logit_cases(224)
    full = released(224)
    with caplog.at_level(logging.INFO, logger='inline_backbones.checkpoints.loading'):
        model = released(224, num_classes=7)
    assert 'checkpoint head has 1000 classes, the model 7: the head is not loaded' in caplog.messages
    with torch.no_grad():
        assert torch.equal(model.forward_head(model.forward_features(x), pre_logits=True),
                           full.forward_head(full.forward_features(x), pre_logits=True))
        assert model(x).shape == (len(x), 7)


# ---- any input size, img_size, position embedding --------------------------------------------------------------------

def test_another_input_size_resamples_the_position_embedding_as_a_model_built_for_it():
    """A model of the 224 file with ``dynamic_img_size`` on a 288 input equals the model built for 288 from the same
    file (its position embedding resampled once at loading, by the same timm function, and logged); with
    ``dynamic_img_pad`` an input of no multiple of 16 is padded to whole patches."""
    x = torch.randn(1, 3, 288, 288)
    path = df.checkpoint_path(224)
    at_224 = released(224, dynamic_img_size=True, dynamic_img_pad=True)
    logger = logging.getLogger('inline_backbones.models.families.deit_checkpoint')
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        at_288 = df.released_classifier(288, path=path, **mini_kwargs(224))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert at_288.pos_embed.shape == (1, 1 + 18 * 18, 8)
    assert any('pos_embed has 196 grid positions, the model 18 x 18' in r.getMessage() for r in records)
    with torch.no_grad():
        assert torch.equal(at_224(x), at_288(x))
        assert at_224.forward_features(torch.randn(2, 3, 100, 130)).shape == (2, 1 + 7 * 9, 8)
        maps = at_224.forward_intermediates(torch.randn(1, 3, 100, 130), intermediates_only=True)
        assert [m.shape for m in maps] == [(1, 8, 7, 9)] * 2


def test_img_size_sets_the_position_grid():
    assert timm.create_model('inline_deit_tiny', **SMALL, img_size=384).pos_embed.shape == (1, 1 + 24 * 24, 16)
    assert timm.create_model('inline_deit_tiny', **SMALL, img_size=(224, 160)).pos_embed.shape == (1, 1 + 14 * 10, 16)
    with torch.device('meta'):
        assert timm.create_model('inline_deit_base').pos_embed.shape == (1, 1 + 28 * 28, 384)
    with pytest.raises(TypeError, match="img_size must be an int or an"):
        timm.create_model('inline_deit_tiny', **SMALL, img_size='384')


SIZES_TAKEN = [  # flags, the sizes of 64 x 96, 96 x 64, 100 x 130 that a model built for 64 x 96 takes
    (dict(), {(64, 96)}),
    (dict(dynamic_img_size=True), {(64, 96), (96, 64)}),
    (dict(dynamic_img_pad=True), {(64, 96)}),
    (dict(dynamic_img_size=True, dynamic_img_pad=True), {(64, 96), (96, 64), (100, 130)}),
]


@pytest.mark.parametrize('flags, taken', SIZES_TAKEN, ids=['off', 'size', 'pad', 'size+pad'])
def test_flags_take_the_input_sizes_timm_vits_take(flags, taken):
    """With each setting of ``dynamic_img_size`` / ``dynamic_img_pad`` (both off by default, as timm's ViT) the patch
    embedding is set as timm's ViT's and takes the sizes timm's ViT takes: ``img_size`` only; any whole patches;
    ``img_size`` only; any size. A refused size raises ValueError naming the flag that takes it (timm's an
    assertion)."""
    model = small_model(**dict(dict(dynamic_img_size=False), **flags), img_size=(64, 96))
    vit = timm_vit(1, img_size=(64, 96), **flags)
    assert (model.dynamic_img_size, model.patch_embed.strict_img_size, model.patch_embed.dynamic_img_pad) == (
        vit.dynamic_img_size, vit.patch_embed.strict_img_size, vit.patch_embed.dynamic_img_pad)
    ours, theirs = set(), set()
    for size in ((64, 96), (96, 64), (100, 130)):
        x = torch.randn(1, 3, *size)
        with torch.no_grad():
            try:
                assert model(x).shape == (1, 1000)
                ours.add(size)
            except ValueError as refusal:
                flag = 'dynamic_img_size' if model.patch_embed.strict_img_size else 'dynamic_img_pad'
                assert f'build it with {flag}=True' in str(refusal)
            try:
                vit(x)
                theirs.add(size)
            except AssertionError:
                pass
    assert ours == theirs == taken


def test_refusals_name_the_size_and_the_fix():
    with pytest.raises(ValueError) as refusal:
        small_model(dynamic_img_size=False)(torch.randn(1, 3, 64, 96))
    assert str(refusal.value) == (
        'InLine-DeiT was built for 224x224 images (img_size), got 64x96: build it with dynamic_img_size=True to take '
        'other sizes (the position embedding resampled to their grid; with dynamic_img_pad=True also sides of no '
        'multiple of the patch size 16), or with img_size=(64, 96)')
    with pytest.raises(ValueError) as refusal:
        small_model()(torch.randn(1, 3, 100, 130))
    assert str(refusal.value) == (
        'InLine-DeiT takes sides that are multiples of the patch size 16 x 16, got 100x130: build it with '
        'dynamic_img_pad=True to zero-pad them bottom/right to whole patches, or crop or resize the images')


def test_dynamic_img_size_is_the_model_built_for_the_size_with_its_embedding_resampled():
    """``dynamic_img_size``: on a 64 x 96 input the model equals one built for 64 x 96 (flags off) whose position
    embedding is the 14 x 14 one resampled to 4 x 6 by timm's ``resample_abs_pos_embed``."""
    model = small_model()
    fixed = small_model(dynamic_img_size=False, img_size=(64, 96))
    fixed.load_state_dict(dict(model.state_dict(), pos_embed=resample_abs_pos_embed(
        model.pos_embed.detach(), new_size=(4, 6), num_prefix_tokens=1)))
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        assert torch.equal(model(x), fixed(x))


def test_dynamic_img_pad_is_the_model_on_the_zero_padded_input():
    """``dynamic_img_pad``: a 100 x 130 input gives what the same model without padding gives for the input
    zero-padded bottom/right to 112 x 144 (7 x 9 patches), logits and maps."""
    padding, plain = small_model(dynamic_img_pad=True), small_model()
    x = torch.randn(2, 3, 100, 130)
    padded = torch.nn.functional.pad(x, (0, 14, 0, 12))
    with torch.no_grad():
        assert torch.equal(padding(x), plain(padded))
        maps = padding.forward_intermediates(x, intermediates_only=True)
        assert [m.shape for m in maps] == [(2, 16, 7, 9)] * 2
        assert all(torch.equal(a, b) for a, b in zip(maps, plain.forward_intermediates(padded, intermediates_only=True),
                                                     strict=True))


# ---- timm's feature interface ----------------------------------------------------------------------------------------

@pytest.mark.parametrize('depth', [2, 3, 4])
def test_feature_info_is_timm_vits_one_per_block(depth):
    """One entry per block at the patch stride, as timm's ViT of the same depth (there ``blocks.{j}``, here the one
    stage's ``layers.0.blocks.{j}``), and ``features_only``'s default is timm's ViT's (its last three blocks)."""
    model, vit = small_model(depth), timm_vit(depth)
    assert len(model.feature_info) == len(vit.feature_info) == depth
    assert [(f['num_chs'], f['reduction']) for f in model.feature_info] == [
        (f['num_chs'], f['reduction']) for f in vit.feature_info] == [(16, 16)] * depth
    assert [f['module'] for f in model.feature_info] == [f'layers.0.blocks.{j}' for j in range(depth)]
    assert all(model.get_submodule(f['module']) is block
               for f, block in zip(model.feature_info, model.layers[0].blocks, strict=True))
    if depth >= 3:
        ours = timm.create_model('inline_deit_tiny', features_only=True, **dict(SMALL, depths=[depth]))
        theirs = timm_vit(depth, features_only=True)
        assert ours.feature_info.out_indices == theirs.feature_info.out_indices == tuple(range(depth - 3, depth))
        assert ours.feature_info.reduction() == theirs.feature_info.reduction() == [16] * 3


@pytest.mark.parametrize('indices, taken', [(None, [0, 1, 2, 3]), (2, [2, 3]), ([0, -1], [0, 3]), ([1], [1])])
def test_forward_intermediates_are_the_blocks_timm_vit_takes(indices, taken):
    """The map tokens of the blocks timm's ``feature_take_indices`` takes (an int: the last n; a list: those,
    negative from the end), in block order, NCHW without the class token, as many and as shaped as timm's ViT gives;
    the final output ``forward_features``' (all blocks run)."""
    model = small_model(4)
    x = torch.randn(2, 3, 64, 96)
    t = block_tokens(model, x)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x, indices=indices)
        vit_final, vit_maps = timm_vit(4, dynamic_img_size=True).forward_intermediates(x, indices=indices)
        assert torch.equal(final, model.forward_features(x)) and final.shape == vit_final.shape
    assert [m.shape for m in maps] == [m.shape for m in vit_maps] == [(2, 16, 4, 6)] * len(taken)
    for m, j in zip(maps, taken, strict=True):
        assert m.is_contiguous() and torch.equal(m, as_map(t[j], (4, 6)))


def test_forward_intermediates_norm_formats_prefix_tokens_and_errors():
    """``norm`` puts every intermediate through the final norm (as timm's ViT; the pyramids' only the last),
    ``'NLC'`` / ``'NHWC'`` give the map's tokens flat / channels last, ``return_prefix_tokens`` pairs each with its
    class token as timm's ViT does, and a bad index fails as timm's ViT fails."""
    model, vit = small_model(3), timm_vit(3, dynamic_img_size=True)
    x = torch.randn(1, 3, 48, 80)
    t = block_tokens(model, x)
    with torch.no_grad():
        normed = model.forward_intermediates(x, indices=[0, 2], norm=True, intermediates_only=True)
        nlc = model.forward_intermediates(x, indices=1, output_fmt='NLC', intermediates_only=True)
        nhwc = model.forward_intermediates(x, indices=1, output_fmt='NHWC', intermediates_only=True)
        pairs = model.forward_intermediates(x, indices=2, return_prefix_tokens=True, intermediates_only=True)
        vit_pairs = vit.forward_intermediates(x, indices=2, return_prefix_tokens=True, intermediates_only=True)
        assert len(normed) == 2 and all(torch.equal(m, as_map(model.norm(t[j]), (3, 5)))
                                        for m, j in zip(normed, [0, 2], strict=True))
    assert len(nlc) == 1 and torch.equal(nlc[0], t[2][:, 1:])
    assert torch.equal(nhwc[0], t[2][:, 1:].reshape(1, 3, 5, 16))
    assert [(m.shape, c.shape) for m, c in pairs] == [(m.shape, c.shape) for m, c in vit_pairs] == [
        ((1, 16, 3, 5), (1, 1, 16))] * 2
    assert all(torch.equal(c, t[j][:, :1]) and torch.equal(m, as_map(t[j], (3, 5)))
               for (m, c), j in zip(pairs, [1, 2], strict=True))
    for bad in (4, [3]):
        with pytest.raises(Exception) as theirs:
            vit.forward_intermediates(x, indices=bad)
        with pytest.raises(type(theirs.value)) as ours:
            model.forward_intermediates(x, indices=bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="output_fmt must be 'NCHW', 'NHWC' or 'NLC', got 'NCL'"):
        model.forward_intermediates(x, output_fmt='NCL')


def test_stop_early_and_intermediates_only_skip_the_blocks_after_the_last_index():
    """With ``stop_early`` the final output is the norm of the last block taken; with it or ``intermediates_only``
    no block after that one runs; the intermediates are the same either way."""
    model = small_model(4)
    x = torch.randn(1, 3, 64, 64)
    t = block_tokens(model, x)
    calls = []
    hooks = [block.register_forward_hook(lambda m, i, out, j=j: calls.append(j))
             for j, block in enumerate(model.layers[0].blocks)]
    try:
        with torch.no_grad():
            final, maps = model.forward_intermediates(x, indices=[0, 1], stop_early=True)
            assert calls == [0, 1] and torch.equal(final, model.norm(t[1]))
            only = model.forward_intermediates(x, indices=[0, 1], intermediates_only=True)
            assert calls == [0, 1] * 2
            _, every = model.forward_intermediates(x, indices=[0, 1])
            assert calls == [0, 1] * 2 + [0, 1, 2, 3]
    finally:
        for hook in hooks:
            hook.remove()
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(maps, only, every, strict=True))


def test_prune_intermediate_layers_and_features_only_as_timm_vit():
    """Pruning keeps the blocks up to the last index and returns timm's ViT's indices (the norm too unless asked);
    ``features_only`` with ``out_indices`` gives those blocks' maps (NCHW, stride 16), ``forward_intermediates``'."""
    model, vit = small_model(4), timm_vit(4)
    assert model.prune_intermediate_layers([0, -2]) == vit.prune_intermediate_layers([0, -2]) == [0, 2]
    assert len(model.layers[0].blocks) == len(vit.blocks) == 3 and model.num_classes == 0
    assert isinstance(model.norm, torch.nn.LayerNorm)
    model.prune_intermediate_layers(1, prune_norm=True)
    assert isinstance(model.norm, torch.nn.Identity) and len(model.layers[0].blocks) == 3
    full = small_model(4)
    features = timm.create_model('inline_deit_tiny', features_only=True, out_indices=(0, 2), dynamic_img_size=True,
                                 **dict(SMALL, depths=[4])).eval()
    assert features.feature_info.channels() == [16, 16] and features.feature_info.reduction() == [16, 16]
    assert len(features.model.layers[0].blocks) == 3
    assert isinstance(features.model.norm, torch.nn.Identity)      # pruned: the maps are the blocks' as they are
    features.model.load_state_dict({k: v for k, v in full.state_dict().items()
                                    if 'blocks.3.' not in k and not k.startswith(('head.', 'norm.'))})
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        maps = features(x)
        expected = full.forward_intermediates(x, indices=[0, 2], intermediates_only=True)
    assert [m.shape for m in maps] == [(2, 16, 4, 6)] * 2
    assert all(torch.equal(a, b) for a, b in zip(maps, expected, strict=True))


@pytest.mark.parametrize('img_size', df.SIZES)
def test_features_only_maps_are_the_authors_block_patch_tokens(img_size):
    """Every block's map (``out_indices`` both blocks of the fixture's two) is the authors' block's patch tokens."""
    x, expected_tokens = df.expected_block_tokens(img_size)
    features = released(img_size, features_only=True, out_indices=(0, 1))
    with torch.no_grad():
        fmaps = features(x)
    side = img_size // 16
    assert [fmap.shape for fmap in fmaps] == [(len(x), 8, side, side)] * 2
    for fmap, expected in zip(fmaps, expected_tokens, strict=True):
        assert rf.rel_diff(fmap.flatten(2).transpose(1, 2), expected[:, 1:]) < 1e-4


def test_gradient_checkpointing_changes_no_gradient():
    model = small_model().train()
    x = torch.randn(1, 3, 64, 96)
    grads = []
    for enable in (False, True):
        model.zero_grad()
        model.set_grad_checkpointing(enable)
        model(x).square().mean().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@fx_on_unwrapped_code
def test_fx_graph_gives_the_logits_and_torchscript_is_refused():
    from timm.models import create_feature_extractor, get_graph_node_names

    model = small_model()
    nodes = get_graph_node_names(model)[1]
    assert nodes[-1] == 'head' and 'patch_embed' in nodes and 'layers.0.blocks.1.attn' in nodes
    graph = create_feature_extractor(model, return_nodes={'head': 'logits'})
    x = torch.randn(1, 3, 80, 112)
    with torch.no_grad():
        assert torch.equal(graph(x)['logits'], model(x))
    with pytest.raises(RuntimeError, match='does not support torch.jit.script'):
        torch.jit.script(model)


# ---- loading ---------------------------------------------------------------------------------------------------------

def test_in_chans_adapts_the_released_first_conv():
    released_weight = load_checkpoint_file(df.checkpoint_path(224))['model']['patch_embed.proj.weight']
    grey = released(224, in_chans=1)
    assert torch.equal(grey.patch_embed.proj.weight, adapt_input_conv(1, released_weight))
    (x, _), = df.logit_cases(224)
    x = x.mean(dim=1, keepdim=True)
    with torch.no_grad():
        torch.testing.assert_close(grey(x), released(224)(x.repeat(1, 3, 1, 1)), rtol=1e-5, atol=1e-5)


def test_filter_takes_both_formats_and_refuses_others(tmp_path):
    """Our saved classifier and the released keys load the same; a mix of the two, keys of neither, and another
    width fail by name; timm's state dict overlay meets the same checks."""
    model = released(224)
    checkpoint = load_checkpoint_file(df.checkpoint_path(224))
    ours = checkpoint_filter_fn({'model': model.state_dict()}, model)
    assert ours.keys() == model.state_dict().keys()
    mixed = dict(checkpoint['model'], **{'layers.0.blocks.0.norm1.weight': torch.ones(8)})
    with pytest.raises(CheckpointMismatchError, match='mix the released InLine-DeiT format and ours'):
        checkpoint_filter_fn(mixed, model)
    with pytest.raises(CheckpointMismatchError, match='in no InLine-DeiT checkpoint format'):
        checkpoint_filter_fn({'stage1.0.qkv.weight': torch.zeros(1)}, model)
    with pytest.raises(CheckpointMismatchError, match=r'patch_embed.proj.weight: checkpoint \(8, 3, 16, 16\) vs '
                                                      r'model \(192, 3, 16, 16\)'):
        timm.create_model('inline_deit_tiny', pretrained=True,
                          pretrained_cfg_overlay=dict(file=str(df.checkpoint_path(224))))
    overlay = timm.create_model('inline_deit_tiny', pretrained=True, pretrained_cfg_overlay=dict(state_dict=checkpoint),
                                **mini_kwargs(224)).eval()
    (x, expected), = df.logit_cases(224)
    with torch.no_grad():
        assert rf.rel_diff(overlay(x), expected) < 1e-4


# ---- the mixer -------------------------------------------------------------------------------------------------------

def test_without_prefix_tokens_the_mixer_is_inline_attention():
    torch.manual_seed(0)
    mixer = randomized(build_mixer(dict(type='inline_deit'), 16, 2, block_index=0)).eval()
    x = torch.randn(2, 20, 16)
    with torch.no_grad():
        torch.testing.assert_close(mixer(x, TokenMap.of(x, (4, 5))), inline_attention_reference(mixer, x, (4, 5)),
                                   rtol=1e-5, atol=1e-5)


def test_the_class_token_is_in_the_attention_but_not_in_the_residual():
    """The class token's output does not depend on the 3x3 kernels; the map's does; every output depends on the
    class token's input (a key and value of every query, and in the mean token of the kernels)."""
    torch.manual_seed(0)
    mixer = randomized(build_mixer(dict(type='inline_deit'), 16, 2, block_index=0)).eval()
    x = torch.randn(1, 21, 16)
    tokens = TokenMap((4, 5), 1, x.device, prefix_tokens=1)
    with torch.no_grad():
        out = mixer(x, tokens)
        mixer.residual[2].bias.add_(1.)
        changed = mixer(x, tokens)
        moved = mixer(torch.cat([x[:, :1] + 1., x[:, 1:]], dim=1), tokens)
    assert torch.equal(changed[:, 0], out[:, 0]) and (changed[:, 1:] - out[:, 1:]).abs().min() > 0
    assert (moved - changed).abs().amax(dim=-1).min() > 0
