"""Ablation switches: plain linear attention (layout letter L) and InLine without the 3x3 residual,
against naive N x N formulas; released layouts keep their parameters; IIIS and LLLS train from one config."""
import copy
import os.path as osp

import pytest
import torch
from reference_attention import naive_inline_attention

from inline_backbones import InLineAttention, InLineSwinTransformer, parse_attn_layout
from inline_backbones.models import LinearAttention
from inline_backbones.models.mixers.inline.attention import KERNEL_FUNCTIONS
from inline_backbones.models.mixers.linear_attention import EPS
from inline_backbones.models.tokens.token_map import TokenMap

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SMALL = dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4])
SWIN = InLineSwinTransformer.family      # its layout letters and mixed pair


def naive_linear_weights(attn, x):
    """A_ij = phi(q_i).phi(k_j) / (sum_l phi(q_i).phi(k_l) + N eps), the full (B, h, N, N) matrix."""
    B, N, C = x.shape
    q, k, _ = attn.qkv(x).view(B, N, 3, attn.num_heads, attn.head_dims).permute(2, 0, 3, 1, 4)
    scores = attn.phi(q) @ attn.phi(k).transpose(-1, -2)
    return scores / (scores.sum(-1, keepdim=True) + N * EPS)


def values(attn, x):
    B, N, C = x.shape
    return attn.qkv(x).view(B, N, 3, attn.num_heads, attn.head_dims)[:, :, 2].transpose(1, 2)


@pytest.mark.parametrize('kernel_func', ['relu', 'exp'])
def test_linear_attention_matches_naive_and_rows_sum_to_one(kernel_func):
    attn = LinearAttention(24, 3, kernel_func=kernel_func).double()
    x = torch.randn(2, 35, 24, dtype=torch.float64)
    weights = naive_linear_weights(attn, x)
    ref = attn.proj((weights @ values(attn, x)).transpose(1, 2).reshape(2, 35, 24))
    torch.testing.assert_close(attn(x, TokenMap.of(x, (5, 7))), ref, rtol=1e-10, atol=1e-10)
    assert (weights >= 0).all()
    assert (weights.sum(-1) <= 1).all() and (weights.sum(-1) > 1 - 1e-3).all()    # 1 up to eps


@pytest.mark.parametrize('kernel_func', ['relu', 'exp'])
def test_masked_linear_attention_equals_the_naive_formula_on_the_region(kernel_func):
    """Padding-aware linear attention over a padded map == the N x N formula on the image's own tokens."""
    attn = LinearAttention(24, 3, kernel_func=kernel_func).double()
    H, W, regions = 6, 8, [(6, 8), (3, 5)]
    x = torch.randn(2, H * W, 24, dtype=torch.float64)
    out = attn(x, TokenMap.of(x, (H, W), torch.tensor(regions))).view(2, H, W, 24)
    for b, (h, w) in enumerate(regions):
        own = x.view(2, H, W, 24)[b:b + 1, :h, :w].reshape(1, h * w, 24)
        ref = attn.proj((naive_linear_weights(attn, own) @ values(attn, own)).transpose(1, 2).reshape(1, h * w, 24))
        torch.testing.assert_close(out[b, :h, :w], ref.view(h, w, 24), rtol=1e-10, atol=1e-10)
    unmasked = attn(x, TokenMap.of(x, (H, W)))
    assert not torch.allclose(unmasked[1].view(H, W, 24)[:3, :5], out[1, :3, :5])   # mask matters


def test_linear_attention_is_blind_to_query_scale_and_rejects_signed_kernels():
    attn = LinearAttention(8, 1).double()
    q = torch.randn(1, 8, dtype=torch.float64).relu() + 0.1
    k = torch.randn(20, 8, dtype=torch.float64).relu()
    rows = [(c * q) @ k.T / ((c * q) @ k.sum(0) + 20 * EPS) for c in (1.0, 5.0)]
    torch.testing.assert_close(rows[0], rows[1], rtol=1e-5, atol=0)
    for bad in ('identity', 'leakyrelu'):
        with pytest.raises(ValueError, match='non-negative kernel'):
            LinearAttention(8, 1, kernel_func=bad)
    assert 'relu' in repr(attn)


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
def test_inline_without_residual_is_the_injective_linear_attention(kernel_func):
    attn = InLineAttention(24, 3, kernel_func=kernel_func, local_residual=False).double()
    assert not hasattr(attn, 'residual') and 'local_residual=False' in repr(attn)
    x = torch.randn(2, 35, 24, dtype=torch.float64)
    full = InLineAttention(24, 3, kernel_func=kernel_func).double()
    full.load_state_dict(attn.state_dict(), strict=False)
    _, weights = naive_inline_attention(full, x, (5, 7), return_weights=True)
    ref = attn.proj((weights @ values(attn, x)).transpose(1, 2).reshape(2, 35, 24))
    torch.testing.assert_close(attn(x, TokenMap.of(x, (5, 7))), ref, rtol=1e-10, atol=1e-10)
    fp32 = InLineAttention(24, 3, kernel_func=kernel_func, local_residual=False)
    fp32.load_state_dict({k: v.float() for k, v in attn.state_dict().items()})
    torch.testing.assert_close(fp32(x.float(), TokenMap.of(x, (5, 7))), ref.float(), rtol=1e-4, atol=1e-4)


def test_layout_letter_l():
    assert parse_attn_layout('LLLS', [2, 2, 6, 2], SWIN.letters, SWIN.mixed) == [
        ['linear'] * 2, ['linear'] * 2, ['linear'] * 6, ['window'] * 2]
    assert parse_attn_layout('LIMS1', [2, 2, 3, 2], SWIN.letters, SWIN.mixed)[2] == ['inline', 'window', 'window']
    model = InLineSwinTransformer(arch=SMALL, attn_type='LLIS', linear_kernel_func='exp')
    kinds = [type(b.attn).__name__ for stage in model.layers for b in stage.blocks]
    assert kinds == ['LinearAttention'] * 4 + ['InLineAttention'] * 2 + ['WindowAttention'] * 2
    assert model.layers[0].blocks[0].attn.kernel_func == 'exp'
    options = InLineSwinTransformer(arch=SMALL, attn_type='LLIS', qkv_bias=False, drop_rate=0.25)
    assert all(b.attn.qkv.bias is None and b.attn.proj_drop.p == 0.25 for s in options.layers for b in s.blocks)
    with pytest.raises(ValueError, match='plain linear attention.*inline_window_size must be None'):
        InLineSwinTransformer(arch=SMALL, attn_type='LLIS', inline_window_size=8)
    outs = model(torch.randn(1, 3, 64, 96))
    assert [tuple(o.shape) for o in outs] == [(1, 16, 16, 24), (1, 32, 8, 12), (1, 64, 4, 6), (1, 128, 2, 3)]


def test_switches_keep_released_keys_and_only_drop_the_residual():
    released = set(InLineSwinTransformer(arch='tiny').state_dict())
    assert any('.attn.residual.' in k for k in released)
    no_residual = set(InLineSwinTransformer(arch='tiny', local_residual=False).state_dict())
    assert no_residual == {k for k in released if '.attn.residual.' not in k}
    linear = set(InLineSwinTransformer(arch='tiny', attn_type='LLLS').state_dict())
    assert linear == no_residual


def test_iiis_and_llls_train_one_step_from_the_same_config():
    pytest.importorskip('mmseg')
    from helpers import build_segmentor, demo_batch
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    config = osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py')
    grads = {}
    for layout in ('IIIS', 'LLLS'):
        cfg = Config.fromfile(config)
        cfg.merge_from_dict({'model.backbone.attn_type': layout})
        with DefaultScope.overwrite_default_scope('mmseg'):     # the mmseg scope does not leak into other tests
            model = build_segmentor(cfg)
        model.train()
        data = model.data_preprocessor(demo_batch(cfg.model.decode_head.num_classes), True)
        loss, _ = model.parse_losses(model(**data, mode='loss'))
        assert torch.isfinite(loss)
        loss.backward()
        attn = model.backbone.layers[0].blocks[0].attn
        grads[layout] = (type(attn).__name__, attn.qkv.weight.grad.abs().sum().item())
    assert grads['IIIS'][0] == 'InLineAttention' and grads['LLLS'][0] == 'LinearAttention'
    assert grads['IIIS'][1] > 0 and grads['LLLS'][1] > 0


@pytest.mark.parametrize('dtype, autocast', [(torch.float16, False), (torch.float32, True)])
@pytest.mark.parametrize('padding_aware', [False, True])
def test_fp16_sums_over_a_large_map_stay_finite_and_accurate(dtype, autocast, padding_aware):
    """fp16 (pure, or CPU autocast to fp16) at 128 x 128 tokens, with keys and values biased so that k^T v sums
    to ~130,000 (over fp16's 65,504): finite and within fp16's precision of the fp64 computation."""
    torch.manual_seed(0)
    attn = LinearAttention(32, 2).eval()
    with torch.no_grad():
        attn.qkv.bias[32:64] += 2.                                     # keys ~ relu(2 + noise)
        attn.qkv.bias[64:] += 4.                                       # values ~ 4
    x = torch.randn(2, 128 * 128, 32)
    tokens = TokenMap.of(x, (128, 128), torch.tensor([[128, 128], [100, 90]]) if padding_aware else None)
    with torch.no_grad():
        reference = copy.deepcopy(attn).double()(x.double(), tokens)
        if autocast:
            with torch.autocast('cpu', dtype=torch.float16):
                out = attn(x, tokens)
        else:
            out = copy.deepcopy(attn).to(dtype)(x.to(dtype), tokens)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    region = slice(None) if not padding_aware else tokens.token_mask()[..., 0]
    error = (out.double() - reference)[region].norm() / reference[region].norm()
    assert error < 4e-3                                                # fp16's unit roundoff: 4.9e-4
