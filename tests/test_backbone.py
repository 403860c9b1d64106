"""What every family's backbone gets from the shared machinery (``Backbone``, ``Trunk``, ``Stage``, ``Block``),
exercised on InLine-Swin: images of a batch independent, ``norm_eval``, ``with_cp`` recomputing the blocks with the
same outputs and gradients, drop path rates and their replay under ``with_cp``, finite gradients everywhere, bf16
autocast at 1024, the initialisation from scratch and from an mmengine ``init_cfg``. InLine-Swin's own behaviour is in
``test_inline_swin.py``, what every family must do in ``test_family_contract.py``."""
import pytest
import torch

from inline_backbones import InLineSwinTransformer

SMALL_ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])


def test_images_in_a_batch_are_independent():
    """Global InLine attention is per image: a batch gives the same outputs as images one by one."""
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1').eval()
    x = torch.randn(3, 3, 70, 45)
    with torch.no_grad():
        batched = model(x)
        single = [model(x[i:i + 1]) for i in range(3)]
    for level, out in enumerate(batched):
        torch.testing.assert_close(out, torch.cat([s[level] for s in single]), rtol=1e-4, atol=1e-5)


class _WithBatchNorm(InLineSwinTransformer):
    """What ``norm_eval`` is for: a subclass adding BatchNorm (LayerNorm has no running statistics)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.extra_bn = torch.nn.BatchNorm1d(32)
        self.extra_gn = torch.nn.GroupNorm(4, 32)


def test_norm_eval_keeps_batch_norm_statistics_fixed():
    model = _WithBatchNorm(arch=SMALL_ARCH, attn_type='IIIS', norm_eval=True, drop_rate=0.5)
    assert model.train() is model
    norms = [m for m in model.modules() if isinstance(m, (torch.nn.LayerNorm, torch.nn.GroupNorm,
                                                          torch.nn.BatchNorm1d))]
    assert len(norms) > 3 and not any(m.training for m in norms)
    # everything else trains: dropout is active
    assert model.layers[0].blocks[0].attn.training and model.drop_after_pos.training
    x = torch.randn(2, 3, 64, 64)
    assert not torch.equal(model(x)[0], model(x)[0])
    stats = model.extra_bn.running_mean.clone(), model.extra_bn.running_var.clone()
    model.extra_bn(torch.randn(8, 32) * 3 + 5)
    assert torch.equal(model.extra_bn.running_mean, stats[0]) and torch.equal(model.extra_bn.running_var, stats[1])

    default = _WithBatchNorm(arch=SMALL_ARCH, attn_type='IIIS').train()
    assert all(m.training for m in default.modules())
    default.extra_bn(torch.randn(8, 32) * 3 + 5)
    assert not torch.equal(default.extra_bn.running_mean, stats[0])
    assert not any(m.training for m in model.eval().modules())


def _count_calls(modules):
    """Count calls of each module's ``forward`` (forward hooks do not fire during checkpoint recomputation)."""
    counts = [0] * len(modules)

    def counting(i, forward):
        def wrapped(*args, **kwargs):
            counts[i] += 1
            return forward(*args, **kwargs)
        return wrapped

    for i, m in enumerate(modules):
        m.forward = counting(i, m.forward)
    return counts


def test_with_cp_recomputes_blocks_and_gives_same_outputs_and_gradients():
    """Checkpointing really happens (each block's norm2 runs again during backward) and changes nothing."""
    plain = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1', drop_path_rate=0.)
    plain.init_weights()
    ckpt = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1', drop_path_rate=0., with_cp=True)
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 72, 100)
    outs, grads = [], []
    for model, calls_after_backward in ((plain, 1), (ckpt, 2)):
        model.train()
        norms = [b.norm2 for stage in model.layers for b in stage.blocks]
        counts = _count_calls(norms)
        out = model(x)
        assert counts == [1] * len(norms)
        sum((o * torch.linspace(0, 1, o.numel()).view_as(o)).sum() for o in out).backward()
        assert counts == [calls_after_backward] * len(norms)
        outs.append([o.detach() for o in out])
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        assert all(torch.isfinite(g).all() for g in grads[-1].values())
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-6)
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-5, atol=1e-6, msg=name)
    # No recomputation without gradients (inference under with_cp runs each block once).
    counts = _count_calls([b.norm2 for stage in ckpt.layers for b in stage.blocks])
    with torch.no_grad():
        ckpt(x)
    assert set(counts) == {1}


def test_drop_path_rates_increase_linearly_over_all_blocks():
    model = InLineSwinTransformer(arch=dict(SMALL_ARCH, depths=[2, 2, 4, 2]), attn_type='IIMS2', drop_path_rate=0.3)
    blocks = [b for stage in model.layers for b in stage.blocks]
    assert isinstance(blocks[0].drop_path, torch.nn.Identity)         # rate 0: no DropPath module
    rates = [0.] + [b.drop_path.drop_prob for b in blocks[1:]]
    assert model.drop_path_rate == 0.3
    torch.testing.assert_close(torch.tensor(rates), torch.linspace(0, 0.3, 10), rtol=0, atol=1e-7)
    no_drop = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', drop_path_rate=0.)
    assert all(isinstance(b.drop_path, torch.nn.Identity) for stage in no_drop.layers for b in stage.blocks)


def test_drop_path_is_random_in_training_and_replayed_by_with_cp():
    """Stochastic depth draws new paths per forward in training, none in eval; under ``with_cp`` the
    recomputation in backward replays the same draws, so outputs and gradients equal the plain model's."""
    plain = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', drop_path_rate=0.5)
    plain.init_weights()
    ckpt = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIIS', drop_path_rate=0.5, with_cp=True)
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(4, 3, 64, 64)
    with torch.no_grad():
        plain.eval()
        eval_out = plain(x)
        torch.testing.assert_close(plain(x), eval_out, rtol=0, atol=0)
    results = []
    for model in (plain, ckpt):
        model.train()
        model.zero_grad()
        torch.manual_seed(123)
        out = model(x)
        sum(o.square().mean() for o in out).backward()
        results.append(([o.detach() for o in out], {n: p.grad.clone() for n, p in model.named_parameters()}))
    (out_plain, grad_plain), (out_ckpt, grad_ckpt) = results
    assert not torch.allclose(out_plain[-1], eval_out[-1], rtol=1e-3, atol=1e-3)
    for a, b in zip(out_plain, out_ckpt, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-6)
    for name, g in grad_plain.items():
        torch.testing.assert_close(grad_ckpt[name], g, rtol=1e-5, atol=1e-6, msg=name)
    torch.manual_seed(124)
    with torch.no_grad():
        assert not torch.allclose(plain(x)[-1], out_plain[-1], rtol=1e-3, atol=1e-3)


def test_every_parameter_gets_a_finite_gradient():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1', kernel_func='relu')
    model.init_weights()
    model.train()
    outs = model(torch.randn(2, 3, 65, 90))
    sum(o.square().mean() for o in outs).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name


# bf16 keeps 8 bits of mantissa (unit roundoff 2^-8 = 3.9e-3); through the 12 blocks of InLine-Swin-T
# the outputs measured 5.0e-3, 6.7e-3, 9.9e-3, 1.1e-2 relative to fp32 (levels 0-3, 1024x1024, seed 0).
BF16_BACKBONE_RTOL = 0.025


@pytest.mark.slow
def test_bf16_autocast_at_1024_is_close_to_fp32():
    model = InLineSwinTransformer(arch='tiny').eval()
    model.init_weights()
    x = torch.randn(1, 3, 1024, 1024)
    with torch.no_grad():
        ref = model(x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            outs = model(x)
    assert [o.shape[-1] for o in outs] == [256, 128, 64, 32]
    for level, (o, r) in enumerate(zip(outs, ref, strict=True)):
        assert o.dtype == torch.bfloat16
        rel = ((o.float() - r).norm() / r.norm()).item()
        assert rel < BF16_BACKBONE_RTOL, (level, rel)


def test_init_from_scratch():
    model = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1')
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(3.0)
    model.init_weights()
    linear = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, torch.nn.Linear)])
    assert 0.015 < linear.std().item() < 0.025                    # trunc_normal(std=0.02)
    assert all(m.bias is None or not m.bias.any() for m in model.modules() if isinstance(m, torch.nn.Linear))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert all((m.weight == 1).all() and not m.bias.any() for m in norms)
    tables = torch.cat([p.flatten() for n, p in model.named_parameters() if n.endswith('relative_position_bias_table')])
    assert 0.015 < tables.std().item() < 0.025


def test_an_mmengine_init_cfg_goes_through_mmengines_initializers():
    pytest.importorskip('mmengine.model', reason="the init_cfg types other than Pretrained are mmengine's")
    constant = InLineSwinTransformer(arch=SMALL_ARCH, attn_type='IIMS1',
                                     init_cfg=dict(type='Constant', layer='Linear', val=0.5, bias=0.))
    constant.init_weights()
    assert all((m.weight == 0.5).all() for m in constant.modules() if isinstance(m, torch.nn.Linear))
