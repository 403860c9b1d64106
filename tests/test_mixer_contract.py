"""The contract every token mixer keeps, written once and parametrized over the registry (:data:`MIXERS`): its
constructor's errors and defaults, ``qkv_bias`` and the dropouts reaching their layers, its repr, the
registry itself (a new mixer is buildable and a leaf of fx graphs). What each mixer computes is tested against
its reference in its own file (``test_inline_attention.py``, ``test_linear_attention.py``, ...)."""
import pytest
import torch
from timm.layers import get_notrace_modules
from torch import nn

from inline_backbones.models.mixers import MIXERS, build_mixer, register_mixer
from inline_backbones.models.tokens.token_map import TokenMap

BUILT_IN = ('inline', 'window', 'linear', 'inline_pvt', 'spatial_reduction', 'inline_cswin', 'cswin_stripes',
            'flatten', 'inline_deit')
SOFTMAX = ('window', 'spatial_reduction', 'cswin_stripes')     # the mixers with attention weights to drop


def projections(mixer):
    """The q, k, v projection layers of a mixer (one ``qkv``, or PVT's ``q`` and ``kv``)."""
    return [module for name, module in mixer.named_children() if name in ('qkv', 'q', 'kv')]


def test_the_registry_holds_the_built_in_mixers_as_fx_leaves():
    assert set(BUILT_IN) <= set(MIXERS)
    assert all(MIXERS[name] in get_notrace_modules() for name in BUILT_IN)


def test_an_unknown_mixer_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError) as error:
        build_mixer(dict(type='global'), 16, 2, block_index=0)
    assert str(error.value) == f"unknown token mixer 'global'; registered: {sorted(MIXERS)}"
    assert sorted(MIXERS) == sorted(BUILT_IN)


@pytest.mark.parametrize('name', BUILT_IN)
def test_defaults_bias_and_dropout(name):
    mixer = build_mixer(dict(type=name), 16, 2, block_index=0)
    assert mixer.embed_dims == 16 and mixer.num_heads == 2
    assert projections(mixer) and all(p.bias is not None for p in projections(mixer))   # qkv_bias defaults to True
    assert mixer.proj_drop.p == 0 and getattr(mixer, 'attn_drop_rate', 0) == 0
    mixer = build_mixer(dict(type=name, qkv_bias=False, proj_drop_rate=0.25), 16, 2, block_index=0)
    assert all(p.bias is None for p in projections(mixer)) and mixer.proj_drop.p == 0.25
    x = torch.randn(2, 20, 16)
    with torch.no_grad():                                   # and it computes without them
        assert torch.isfinite(mixer.eval()(x, TokenMap.of(x, (4, 5), torch.tensor([[4, 5], [3, 2]])))).all()
    if hasattr(mixer, 'qkv_projection'):                  # the GPU path's view of the projections
        weight, bias = mixer.qkv_projection()
        assert weight.shape == (48, 16) and bias is None


@pytest.mark.parametrize('name', BUILT_IN)
def test_channels_must_divide_into_heads(name):
    """Every mixer refuses a width its heads do not divide with the models' argument error (one line from the
    tools), saying where a size of one's own goes."""
    from inline_backbones.models.errors import ModelArgumentError
    with pytest.raises(ModelArgumentError) as error:
        build_mixer(dict(type=name), 10, 3, block_index=0)
    assert str(error.value).startswith('embed_dims 10 is not divisible by num_heads 3: ')
    assert 'arch=dict(embed_dims=' in str(error.value)


@pytest.mark.parametrize('name, options, expected', [
    ('inline', {}, "embed_dims=16, num_heads=2, kernel_func='identity'"),
    ('inline', dict(kernel_func='exp', local_residual=False, window_size=4),
     "embed_dims=16, num_heads=2, kernel_func='exp', local_residual=False, window_size=4, shift=False"),
    ('window', {}, 'embed_dims=16, num_heads=2, window_size=7'),
    ('linear', {}, "embed_dims=16, num_heads=2, kernel_func='relu'"),
    ('spatial_reduction', dict(sr_ratio=2), 'embed_dims=16, num_heads=2, sr_ratio=2'),
    ('inline_cswin', {}, 'embed_dims=16, num_heads=2, lepe=True'),
    ('inline_deit', {}, "embed_dims=16, num_heads=2, kernel_func='identity', residual on the map's tokens"),
    ('cswin_stripes', {}, 'embed_dims=16, num_heads=2, split_size=7'),
    ('cswin_stripes', dict(split_size=None), 'embed_dims=16, num_heads=2, split_size=None'),
    ('flatten', {}, 'embed_dims=16, num_heads=2, window_size=56, shift=False'),
    ('flatten', dict(window_size=7, global_attention=True), 'embed_dims=16, num_heads=2, window_size=7, '
                                                            'global_attention=True'),
])
def test_repr_names_the_options(name, options, expected):
    assert build_mixer(dict(type=name, **options), 16, 2, block_index=0).extra_repr() == expected


def test_shifted_windows_on_odd_blocks_show_in_the_repr():
    assert build_mixer(dict(type='window'), 16, 2, block_index=1).extra_repr().endswith(', shift=True')
    assert build_mixer(dict(type='inline', window_size=4), 16, 2, block_index=1).extra_repr().endswith(
        'window_size=4, shift=True')
    assert build_mixer(dict(type='flatten', window_size=4), 16, 2, block_index=1).extra_repr().endswith(
        'window_size=4, shift=True')


@pytest.mark.parametrize('name', SOFTMAX)
def test_attention_dropout_acts_in_training_only(name):
    torch.manual_seed(0)
    x = torch.randn(2, 64, 16)
    tokens = TokenMap.of(x, (8, 8))
    mixer = build_mixer(dict(type=name, attn_drop_rate=0.5), 16, 2, block_index=0)
    plain = build_mixer(dict(type=name), 16, 2, block_index=0)
    plain.load_state_dict(mixer.state_dict())
    with torch.no_grad():
        reference = plain(x, tokens)
        torch.testing.assert_close(mixer.eval()(x, tokens), reference)
        torch.testing.assert_close(plain.train()(x, tokens), reference)      # no dropout rate: no change
        assert not torch.allclose(mixer.train()(x, tokens), reference, atol=1e-3)


def test_spatial_reduction_options_and_errors():
    assert not hasattr(build_mixer(dict(type='spatial_reduction'), 16, 2, block_index=0), 'sr')   # default 1: none
    reduced = build_mixer(dict(type='spatial_reduction', sr_ratio=2, norm_eps=1e-3), 16, 2, block_index=0)
    assert reduced.sr.stride == (2, 2) and reduced.sr.kernel_size == (2, 2) and reduced.norm.eps == 1e-3
    assert build_mixer(dict(type='spatial_reduction', sr_ratio=2), 16, 2, block_index=0).norm.eps == 1e-5
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError) as error:
            build_mixer(dict(type='spatial_reduction', sr_ratio=bad), 16, 2, block_index=0)
        assert str(error.value) == f'sr_ratio must be a positive int, got {bad!r}'


def test_a_registered_mixer_is_built_by_name_is_a_leaf_of_fx_graphs_and_refuses_scripting():
    class Identity(nn.Module):
        def __init__(self, embed_dims, num_heads, scale=1.):
            super().__init__()
            self.scale = scale

        def forward(self, x, tokens):
            return x * self.scale

    assert register_mixer('identity_for_test', Identity) is Identity
    try:
        mixer = build_mixer(dict(type='identity_for_test', scale=2.), 16, 2, block_index=3)
        assert type(mixer) is Identity and mixer.scale == 2. and Identity in get_notrace_modules()
        with pytest.raises(RuntimeError, match=r'^Identity \(inline_backbones\) does not support torch.jit.script'):
            torch.jit.script(mixer)
    finally:
        del MIXERS['identity_for_test']


def test_windowed_mixers_take_unshifted_windows_unless_told_and_inline_windows_are_positive_ints():
    from inline_backbones.models.mixers import InLineAttention, WindowAttention

    assert WindowAttention(16, 2).shift is False and InLineAttention(16, 2, window_size=4).shift is False
    assert InLineAttention(16, 2, window_size=1).window_size == 1
    for bad in (0, -1, True, 2.0, '4'):
        with pytest.raises(ValueError) as error:
            InLineAttention(16, 2, window_size=bad)
        assert str(error.value) == f'window_size of InLine attention must be None or a positive int, got {bad!r}'


def test_cross_shaped_stripes_take_a_positive_width_and_half_the_heads_per_branch():
    from inline_backbones.models.mixers import CSwinStripeAttention

    assert [conv.in_channels for conv in CSwinStripeAttention(16, 2, split_size=1).lepe] == [8, 8]
    assert [conv.in_channels for conv in CSwinStripeAttention(16, 1, split_size=None).lepe] == [16]
    for split_size, heads in ((0, 2), (True, 2), (2.0, 2), (7, 3)):
        with pytest.raises(ValueError) as error:
            CSwinStripeAttention(24, heads, split_size=split_size)
        assert str(error.value) == ('cross-shaped stripes take a positive int split_size and an even head count (half '
                                    f'per branch), got split_size={split_size!r}, num_heads={heads}')


def test_focused_linear_attention_takes_positive_window_and_odd_kernel_sizes():
    from inline_backbones.models.mixers import FocusedLinearAttention

    attn = FocusedLinearAttention(16, 2, window_size=3, kernel_size=3)
    assert attn.positional_encoding.shape == (1, 9, 16) and attn.dwc.weight.shape == (8, 1, 3, 3)
    assert attn.scale.shape == (1, 1, 16) and attn.shift is False and attn.global_attention is False
    for name, bad in (('window_size', 0), ('window_size', True), ('kernel_size', 2.0), ('kernel_size', -1)):
        with pytest.raises(ValueError) as error:
            FocusedLinearAttention(16, 2, **{name: bad})
        assert str(error.value) == f'{name} of focused linear attention must be a positive int, got {bad!r}'
    with pytest.raises(ValueError, match='^kernel_size of focused linear attention must be odd, got 4$'):
        FocusedLinearAttention(16, 2, kernel_size=4)
