import pytest
import torch

from inline_backbones import InLineAttention, InLineSwinTransformer, WindowAttention

SMALL_ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


def _attention_types(model):
    return [[type(b.attn) for b in stage.blocks] for stage in model.layers]


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


def test_out_indices_and_channels_last_order():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS', out_indices=(1, 3)).eval()
    assert not hasattr(model, 'norm0') and hasattr(model, 'norm3')
    outs = model(torch.randn(2, 3, 64, 96))
    assert [o.shape for o in outs] == [(2, 64, 8, 12), (2, 256, 2, 3)]
    assert all(o.is_contiguous() for o in outs)
    with pytest.raises(ValueError, match='out_indices'):
        InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS', out_indices=(4,))


def test_too_small_input_is_rejected():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IISS')
    with pytest.raises(ValueError, match='too small'):
        model(torch.randn(1, 3, 31, 200))


def test_images_in_a_batch_are_independent():
    """Global InLine attention is per image: a batch gives the same outputs as images one by one."""
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1').eval()
    x = torch.randn(3, 3, 70, 45)
    with torch.no_grad():
        batched = model(x)
        single = [model(x[i:i + 1]) for i in range(3)]
    for level, out in enumerate(batched):
        torch.testing.assert_close(out, torch.cat([s[level] for s in single]), rtol=1e-4, atol=1e-5)


def test_frozen_stages():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', frozen_stages=2)
    model.train()
    assert not any(p.requires_grad for p in model.patch_embed.parameters())
    for i in range(2):
        assert not any(p.requires_grad for p in model.layers[i].parameters())
        assert not any(p.requires_grad for p in getattr(model, f'norm{i}').parameters())
        assert not any(m.training for m in model.layers[i].modules())
    assert all(p.requires_grad for p in model.layers[2].parameters())
    assert model.layers[2].training and model.norm2.training

    all_frozen = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', frozen_stages=4)
    all_frozen.train()
    assert not any(p.requires_grad for p in all_frozen.parameters())


def test_norm_eval_keeps_norm_layers_in_eval_mode():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', norm_eval=True)
    model.train()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and not any(m.training for m in norms)
    assert model.layers[0].blocks[0].attn.training
    model_default = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS').train()
    assert all(m.training for m in model_default.modules())


def test_with_cp_gives_same_outputs_and_gradients():
    torch.manual_seed(0)
    plain = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1', drop_path_rate=0.)
    plain.init_weights()
    ckpt = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1', drop_path_rate=0., with_cp=True)
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 72, 100)
    grads = []
    for model in (plain, ckpt):
        model.train()
        model.zero_grad()
        outs = model(x)
        sum((o * torch.linspace(0, 1, o.numel()).view_as(o)).sum() for o in outs).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        assert all(torch.isfinite(g).all() for g in grads[-1].values())
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-5, atol=1e-6, msg=name)


def test_every_parameter_gets_a_finite_gradient():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1', kernel_func='relu')
    model.init_weights()
    model.train()
    outs = model(torch.randn(2, 3, 65, 90))
    sum(o.square().mean() for o in outs).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name


def test_bf16_autocast_at_1024_is_finite():
    model = InLineSwinTransformer(arch='tiny').eval()
    model.init_weights()
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        outs = model(torch.randn(1, 3, 1024, 1024))
    assert [o.shape[-1] for o in outs] == [256, 128, 64, 32]
    assert all(torch.isfinite(o.float()).all() for o in outs)
