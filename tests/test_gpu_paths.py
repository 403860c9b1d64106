"""The GPU path of the backbones against the generic one, on a CUDA GPU at real token counts (skipped without
one: the CPU suite checks the same kernels under Triton's interpreter in test_inline_paths.py).

fp32 (TF32 off): the Triton path equals the generic path within 1e-4 (relative L2 per stage). bf16/fp16 autocast: its
error against the fp32 model is at most 1.5x the generic path's under the same autocast (tolerances as in
test_inline_paths.py), outputs are finite, and in padding-aware mode an image alone equals it in a padded batch.
"""
import pytest
import torch

from inline_backbones import InLinePVT, InLineSwinTransformer
from inline_backbones.models.mixers.inline.paths import force_path, triton_kernels

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or triton_kernels() is None,
                                reason='needs a CUDA GPU and the triton package')


@pytest.fixture(autouse=True)
def _no_tf32():
    """cuDNN convolutions default to TF32 (10-bit mantissas): the generic path's depthwise conv would then be
    the less exact of the two. Compare fp32 with fp32."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


SHAPES = [(448, 640), (320, 448), (448, 384), (256, 256)]   # a padded batch: each image's own size


def forward(model, x, path, dtype=None, **kwargs):
    with torch.no_grad(), force_path(path), torch.autocast('cuda', dtype=dtype or torch.float32,
                                                            enabled=dtype is not None):
        return [o.float() for o in model(x, **kwargs)]


def rel(a, b):
    return max(float((p - q).norm() / q.norm()) for p, q in zip(a, b, strict=True))


def batch():
    x = torch.randn(len(SHAPES), 3, 448, 640, device='cuda')
    for i, (h, w) in enumerate(SHAPES):
        x[i, :, h:] = 0
        x[i, :, :, w:] = 0
    return x


MODELS = {
    'inline-swin-t': lambda: InLineSwinTransformer('tiny'),
    'inline-swin-t padding-aware': lambda: InLineSwinTransformer('tiny', padding_aware=True),
    'inline-swin-t windows 28': lambda: InLineSwinTransformer('tiny', inline_window_size=28, padding_aware=True),
    'inline-swin-t relu': lambda: InLineSwinTransformer('tiny', kernel_func='relu'),
    'inline-pvt-t padding-aware': lambda: InLinePVT('tiny', padding_aware=True),
}


@pytest.mark.parametrize('name', sorted(MODELS))
def test_fp32_gpu_path_equals_the_generic_path(name):
    torch.manual_seed(0)
    model = MODELS[name]().cuda().eval()
    x = batch()
    assert rel(forward(model, x, 'triton'), forward(model, x, 'torch')) < 1e-4


@pytest.mark.parametrize('dtype, bound', [(torch.bfloat16, 2e-2), (torch.float16, 3e-3)])
@pytest.mark.parametrize('name', ['inline-swin-t padding-aware', 'inline-pvt-t padding-aware'])
def test_reduced_precision_gpu_path(name, dtype, bound):
    torch.manual_seed(0)
    model = MODELS[name]().cuda().eval()
    x = batch()
    fp32 = forward(model, x, 'torch')
    outs = {path: forward(model, x, path, dtype) for path in ('torch', 'triton')}
    assert all(bool(torch.isfinite(o).all()) for o in outs['triton'])
    err = {path: rel(o, fp32) for path, o in outs.items()}
    assert err['triton'] < max(1.5 * err['torch'], 1e-3), err
    alone = forward(model, x[3:, :, :256, :256], 'triton', dtype)
    in_batch = [o[3:, :, :a.shape[2], :a.shape[3]] for o, a in zip(outs['triton'], alone, strict=True)]
    assert rel(in_batch, alone) < bound


@pytest.mark.parametrize('dtype', [None, torch.bfloat16])
def test_cuda_graph_replay_equals_eager(dtype):
    from inline_backbones.deployment.cuda_graph import CUDAGraphBackbone

    torch.manual_seed(0)
    model = InLineSwinTransformer('tiny', inline_window_size=28).cuda().eval()
    x = torch.randn(2, 3, 224, 320, device='cuda')
    served = CUDAGraphBackbone(model, torch.zeros_like(x), dtype=dtype)
    replayed = [o.float().clone() for o in served(x)]
    assert rel(replayed, forward(model, x, 'triton', dtype)) < 1e-5
    with pytest.raises(ValueError, match=r'captured for inputs of shape \(2, 3, 224, 320\)'):
        served(x[:1])


def gradients(model, x, path, dtype=None):
    """Gradients of every parameter for the loss sum(stage means), one forward + backward."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)   # the same drop-path draws for every path
    with force_path(path), torch.autocast('cuda', dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = sum(o.float().mean() for o in model(x, image_shapes=SHAPES))
    loss.backward()
    return [p.grad.float().clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize('name', ['inline-swin-t padding-aware', 'inline-pvt-t padding-aware'])
def test_training_step_gradients(name):
    """The Triton training path (mixers/inline/autograd.py) against the generic path: fp32 gradients within 1e-3
    (relative L2, the worst parameter); bf16/fp16 autocast gradients finite and within 1.5x the generic path's
    error against fp32."""
    torch.manual_seed(0)
    model = MODELS[name]().cuda().train()
    x = batch()
    reference = gradients(model, x, 'torch')
    assert rel(gradients(model, x, 'triton'), reference) < 1e-3
    for dtype in (torch.bfloat16, torch.float16):
        err = {path: rel(gradients(model, x, path, dtype), reference) for path in ('torch', 'triton')}
        assert err['triton'] < max(1.5 * err['torch'], 1e-3), (dtype, err)
