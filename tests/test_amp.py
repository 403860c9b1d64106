"""Mixed-precision training (``--amp``, i.e. mmengine's ``AmpOptimWrapper`` with dynamic loss scaling)
through InLine attention at the token count of a 1333x800 COCO image.

The risk is the ``s / N`` factor of ``M = (s/N) k^T v``: with N = 200 x 336 = 67200 stage-1 tokens
(the 800x1344 padded batch mmdet builds from a 1333x800 image) and head size 32, ``s / N = 2.6e-6``
lies below fp16's smallest normal number (6.1e-5), and ``k^T v`` summed over 67200 tokens can pass
fp16's maximum (65504). The layer passes ``s / N`` as the GEMM's ``alpha``, applied in the GEMM's
fp32 accumulator, so neither is rounded to fp16. The tests run one training step of a small
InLine-Swin (head size 32 as in T/S/B) at 800x1344 and compare it with fp32.

mmengine 0.10.7's ``AmpOptimWrapper`` asserts a GPU and builds ``torch.cuda.amp.GradScaler`` (which
switches itself off without CUDA), and its ``autocast`` allows only bf16 on CPUs. To run the wrapper's
own code here, the fixture lets the assertion pass and hands it torch's CPU ``GradScaler`` (the same
scaler, device ``cpu``); ``scale(loss).backward()``, ``step`` (unscale, inf check, skip) and
``update`` are mmengine's and torch's. bf16 goes through the wrapper's ``optim_context`` as ``--amp``
does on a CPU; fp16 (the Swin runs' precision, and ``--amp``'s on a GPU) through ``torch.autocast``.
"""
import copy
import functools
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from torch import nn

from inline_backbones import InLineAttention, InLineSwinTransformer

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
ARCH = dict(embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8])   # head size 32, as in T/S/B
IMAGE = (800, 1344)                                                        # stage 1: 200 x 336 tokens


@pytest.fixture
def cpu_amp(monkeypatch):
    import mmengine.optim.optimizer.amp_optimizer_wrapper as amp

    monkeypatch.setattr(amp, 'is_cuda_available', lambda: True)
    monkeypatch.setattr(amp, 'GradScaler', functools.partial(torch.amp.GradScaler, 'cpu'))


class DenseModel(nn.Module):
    """The backbone with a fixed random linear read-out of all four maps as the loss (a stand-in for
    FPN + heads that gives every parameter a well-conditioned gradient; a loss on the maps' own values,
    e.g. their squares, mostly cancels in the output LayerNorms and leaves gradients of 1e-8 that only
    measure rounding)."""

    def __init__(self):
        super().__init__()
        self.backbone = InLineSwinTransformer(arch=ARCH, attn_type='IIIS', drop_path_rate=0.)
        self.backbone.init_weights()

    def forward(self, x):
        g = torch.Generator().manual_seed(1)
        return sum((o.float() * torch.randn(o.shape, generator=g)).mean() for o in self.backbone(x))


def amp_wrapper(model, **amp_cfg):
    """The COCO config's optimizer as ``--amp`` turns it into (``type=AmpOptimWrapper``, dynamic scaling)."""
    cfg = Config.fromfile(osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'))
    optim_cfg = copy.deepcopy(cfg.optim_wrapper)
    optim_cfg.update({'type': 'AmpOptimWrapper', 'loss_scale': 'dynamic', **amp_cfg})
    return build_optim_wrapper(model, optim_cfg)


def attention_dtypes(model):
    """Records the dtype of every InLine attention output in the next forward."""
    seen = []
    for m in model.modules():
        if isinstance(m, InLineAttention):
            m.register_forward_hook(lambda mod, args, out: seen.append(out.dtype))
    return seen


@pytest.fixture(scope='module')
def fp32_reference():
    torch.manual_seed(0)
    model = DenseModel()
    image = torch.randn(1, 3, *IMAGE)
    loss = model(image)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = None
    return model, image, loss.item(), grads


def relative_error(grads, reference):
    num = sum((grads[n].float() - reference[n]).square().sum() for n in reference)
    return (num / sum(r.square().sum() for r in reference.values())).sqrt().item()


def amp_step(fp32_reference, autocast, image=None, **amp_cfg):
    """One step under mixed precision (on ``image`` if given, else the reference's); returns what the
    checks need (the errors against the reference only mean something on the reference's image)."""
    reference, ref_image, ref_loss, ref_grads = fp32_reference
    image = ref_image if image is None else image
    model = copy.deepcopy(reference)
    wrapper = amp_wrapper(model, **amp_cfg)
    dtypes = attention_dtypes(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with autocast(wrapper, model):
        loss = model(image)
    wrapper.backward(loss)
    scale = wrapper.loss_scaler.get_scale()
    scaled_grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    wrapper.step()
    return dict(model=model, wrapper=wrapper, loss=loss, ref_loss=ref_loss, dtypes=dtypes, scale=scale,
                grad_error=relative_error({n: g / scale for n, g in scaled_grads.items()}, ref_grads),
                scaled_grads=scaled_grads, before=before)


def through_optim_context(wrapper, model):
    return wrapper.optim_context(model)


def fp16_autocast(wrapper, model):
    return torch.autocast('cpu', dtype=torch.float16)


@pytest.mark.parametrize('dtype, autocast, tolerance', [
    (torch.bfloat16, through_optim_context, 3e-2),
    (torch.float16, fp16_autocast, 1e-2),
], ids=['bf16-optim_context', 'fp16'])
@pytest.mark.slow
@pytest.mark.mutation
def test_amp_step_at_coco_token_count(cpu_amp, fp32_reference, dtype, autocast, tolerance):
    run = amp_step(fp32_reference, autocast)
    assert set(run['dtypes']) == {dtype} and len(run['dtypes']) == 6     # every InLine layer in low precision
    assert torch.isfinite(run['loss']) and abs(run['loss'].item() / run['ref_loss'] - 1) < 5e-2
    # Loss scaling at work: the backward ran on loss x 65536 (GradScaler's default initial scale) and
    # the gradients, once unscaled, are the fp32 ones.
    assert run['scale'] == 2.0 ** 16
    assert all(torch.isfinite(g).all() for g in run['scaled_grads'].values())
    assert run['grad_error'] < tolerance, run['grad_error']
    # No overflow was found: the step was taken and the scale kept.
    assert run['wrapper'].loss_scaler.get_scale() == 2.0 ** 16
    params = dict(run['model'].named_parameters())
    assert all(torch.isfinite(p).all() for p in params.values())
    assert sum(not torch.equal(params[n], run['before'][n]) for n in params) == len(params)


def test_fp16_overflow_skips_the_step_and_backs_off(cpu_amp, fp32_reference):
    """Dynamic scaling recovers from an overflow: a scale of 2^40 makes fp16 gradients infinite, the
    step is skipped (weights unchanged) and the scale halves."""
    # The overflow comes from the scale, not the size: a small image keeps this test short.
    run = amp_step(fp32_reference, fp16_autocast, image=torch.randn(1, 3, 128, 192),
                   loss_scale=dict(init_scale=2.0 ** 40))
    assert not all(torch.isfinite(g).all() for g in run['scaled_grads'].values())
    assert run['wrapper'].loss_scaler.get_scale() == 2.0 ** 39
    assert all(torch.equal(p, run['before'][n]) for n, p in run['model'].named_parameters())
