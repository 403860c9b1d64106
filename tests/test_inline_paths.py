"""The implementations of InLine attention (mixers/inline/paths.py) against the plain reference
(mixers/inline/reference.py), and the reference against the N x N formula of the paper.

The Triton path runs here on the CPU under Triton's interpreter (conftest.py sets ``TRITON_INTERPRET=1`` when no
GPU is present); on a GPU, tests/test_gpu_paths.py runs the same comparisons at real sizes. Tolerances: fp32
paths within 1e-4 of the fp64 reference. Under bf16/fp16 autocast a GEMM's inputs are rounded to 8 (bf16) or 11
(fp16) significant bits, so every path differs from fp64 by a relative L2 error of order 2^-8 = 3.9e-3 or
2^-11 = 4.9e-4; the GPU path must stay within 1.5x the generic path's own error under the same autocast, and
under 2e-2 (bf16) / 3e-3 (fp16).
"""
import copy
import os
import subprocess
import sys

import pytest
import torch
from reference_attention import naive_inline_attention

from inline_backbones.models.mixers.inline import paths as inline_paths
from inline_backbones.models.mixers.inline.attention import KERNEL_FUNCTIONS, InLineAttention
from inline_backbones.models.mixers.inline.gpu import block_diagonal
from inline_backbones.models.mixers.inline.paths import (
    PATHS,
    Implementation,
    choose,
    force_path,
    set_path,
    triton_kernels,
)
from inline_backbones.models.mixers.inline.reference import inline_attention_reference
from inline_backbones.models.mixers.pvt_attention import InLinePVTAttention
from inline_backbones.models.tokens.token_map import TokenMap

needs_triton = pytest.mark.skipif(triton_kernels() is None or os.environ.get('TRITON_INTERPRET') != '1',
                                  reason='needs the triton package and its CPU interpreter (TRITON_INTERPRET=1, set by '
                                         'conftest.py where no GPU is present; on a GPU see test_gpu_paths.py)')
REGIONS = torch.tensor([[6, 7], [4, 5]])   # image 0 fills the 6 x 7 map, image 1 is padded
CASES = {   # name: (module, hw_shape, regions)
    'global': (lambda: InLineAttention(64, 2), (6, 7), None),
    'padding-aware': (lambda: InLineAttention(64, 2), (6, 7), REGIONS),
    'windows': (lambda: InLineAttention(64, 2, window_size=4), (6, 7), None),
    'shifted windows, padding-aware': (lambda: InLineAttention(64, 2, window_size=3, shift=True), (6, 7), REGIONS),
    'no residual, no bias': (lambda: InLineAttention(64, 2, qkv_bias=False, local_residual=False), (6, 7), REGIONS),
    'pvt': (lambda: InLinePVTAttention(64, 1), (6, 7), REGIONS),
    'pvt, N < C (not folded)': (lambda: InLinePVTAttention(64, 1), (4, 5), None),
    'N > C (q M folded into proj)': (lambda: InLineAttention(32, 2), (9, 10), None),
    'N > C, padding-aware, no residual': (lambda: InLineAttention(32, 2, local_residual=False), (9, 10),
                                          torch.tensor([[9, 10], [5, 7]])),
}


def run(attn, x, hw, regions, path, dtype=torch.float32):
    with torch.no_grad(), force_path(path), torch.autocast('cpu', dtype=dtype, enabled=dtype != torch.float32):
        return attn(x, TokenMap.of(x, hw, regions)).float()


def reference_of(attn, x, hw, regions):
    """The plain reference in fp64 (on a copy of ``attn``)."""
    return run(copy.deepcopy(attn).double(), x.double(), hw, regions, 'reference')


def rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize('kernel_func', sorted(KERNEL_FUNCTIONS))
def test_reference_is_the_n_by_n_formula(kernel_func):
    """The package's reference (linear form) == the paper's N x N weights written out in the tests."""
    attn = InLineAttention(32, 4, kernel_func=kernel_func).double().eval()
    x = torch.randn(2, 20, 32, dtype=torch.double)
    with torch.no_grad():
        torch.testing.assert_close(inline_attention_reference(attn, x, (4, 5)), naive_inline_attention(attn, x, (4, 5)),
                                   rtol=1e-10, atol=1e-10)


def test_padding_aware_reference_is_the_image_alone():
    """With a mask, the reference on a padded map == the N x N formula on the image's own tokens alone."""
    attn = InLineAttention(32, 4).double().eval()
    x = torch.randn(2, 42, 32, dtype=torch.double)
    mask = TokenMap.of(x, (6, 7), REGIONS).token_mask()
    with torch.no_grad():
        out = inline_attention_reference(attn, x, (6, 7), mask).view(2, 6, 7, 32)[1, :4, :5]
        own = x.view(2, 6, 7, 32)[1:, :4, :5].reshape(1, 20, 32)
        expected = naive_inline_attention(attn, own, (4, 5)).view(4, 5, 32)
        torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('path', ['torch', pytest.param('triton', marks=needs_triton)])
@pytest.mark.parametrize('case', sorted(CASES))
def test_fp32_paths_equal_the_reference(path, case):
    build, hw, regions = CASES[case]
    attn = build().eval()
    x = torch.randn(2, hw[0] * hw[1], attn.embed_dims)
    torch.testing.assert_close(run(attn, x, hw, regions, path), reference_of(attn, x, hw, regions),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('path', ['torch', pytest.param('triton', marks=needs_triton)])
@pytest.mark.parametrize('dtype, bound', [(torch.bfloat16, 2e-2), (torch.float16, 3e-3)], ids=['bf16', 'fp16'])
def test_every_form_runs_in_pure_half_precision(path, dtype, bound):
    """Layer and input cast to bf16/fp16 (no autocast): each form (kernel identity or not, local residual or not,
    q/k/v biases or not, q M folded (N > C) or not, padding-aware or not) gives the input's dtype, finite, within a
    few unit roundoffs of fp64 on each image's own tokens. (Padding-aware sums accumulate in fp32; their results
    must come back to the input's dtype where they meet the weights.)"""
    import itertools

    torch.manual_seed(0)
    failures = []
    for kernel_func, residual, bias, (hw, channels), masked in itertools.product(
            ['identity', 'relu'], [True, False], [True, False] if path == 'torch' else [True],   # (interpreter: slow)
            [((4, 5), 64), ((9, 10), 32)], [False, True]):
        attn = InLineAttention(channels, 2, kernel_func=kernel_func, local_residual=residual, qkv_bias=bias).eval()
        x = torch.randn(2, hw[0] * hw[1], channels)
        regions = torch.tensor([list(hw), [hw[0] - 1, hw[1] - 2]]) if masked else None
        own = TokenMap.of(x, hw, regions).token_mask().double() if masked else 1.
        case = (kernel_func, residual, bias, hw, masked)
        want = reference_of(attn, x, hw, regions) * own
        with torch.no_grad(), force_path(path):
            try:
                out = attn.to(dtype)(x.to(dtype), TokenMap.of(x.to(dtype), hw, regions))
            except RuntimeError as err:
                failures.append((case, str(err)[:80]))
                continue
        error = ((out.double() * own - want).norm() / want.norm()).item()
        if out.dtype != dtype or not torch.isfinite(out).all() or error > bound:
            failures.append((case, out.dtype, error))
    assert failures == []


@needs_triton
@pytest.mark.parametrize('kernel_func', ['relu', 'leakyrelu', 'exp'])
@pytest.mark.parametrize('hw, channels', [((6, 7), 64), ((9, 10), 32)], ids=['N < C', 'N > C'])
def test_triton_kernel_functions_equal_the_reference(kernel_func, hw, channels):
    """Only the identity kernel folds q M into proj (q = phi(x W_q) otherwise): N > C must not fold these."""
    attn = InLineAttention(channels, 2, kernel_func=kernel_func).eval()
    x = torch.randn(2, hw[0] * hw[1], channels)
    regions = torch.tensor([list(hw), [4, 5]])
    torch.testing.assert_close(run(attn, x, hw, regions, 'triton'), reference_of(attn, x, hw, regions),
                               rtol=1e-4, atol=1e-4)


@needs_triton
def test_the_gpu_path_folds_q_m_into_proj_for_the_identity_kernel_when_n_exceeds_c(monkeypatch):
    """The fold is a speed choice (both forms are correct, tested above): q and blockdiag(M) are formed only when
    N <= C or the kernel is not the identity."""
    unfolded = []
    from inline_backbones.models.mixers.inline import gpu as inline_gpu

    monkeypatch.setattr(inline_gpu, 'block_diagonal', lambda m: unfolded.append(m.shape) or block_diagonal(m))
    for kernel_func, hw, folds in [('identity', (9, 10), True), ('identity', (4, 8), False),   # N = 90, 32; C = 32
                                   ('relu', (9, 10), False)]:
        unfolded.clear()
        attn = InLineAttention(32, 2, kernel_func=kernel_func).eval()
        run(attn, torch.randn(1, hw[0] * hw[1], 32), hw, None, 'triton')
        assert unfolded == ([] if folds else [(1, 2, 16, 16)]), (kernel_func, hw)


@needs_triton
@pytest.mark.parametrize('dtype, bound', [(torch.bfloat16, 2e-2), (torch.float16, 3e-3)])
@pytest.mark.parametrize('case', ['global', 'padding-aware', 'pvt, N < C (not folded)', 'N > C (q M folded into proj)'])
def test_reduced_precision_triton_path_is_as_accurate_as_the_generic_one(dtype, bound, case):
    build, hw, regions = CASES[case]
    attn = build().eval()
    x = torch.randn(2, hw[0] * hw[1], attn.embed_dims)
    reference = reference_of(attn, x, hw, regions)
    own = torch.ones(2, hw[0] * hw[1], 1) if regions is None else TokenMap.of(x, hw, regions).token_mask()
    err = {path: rel(run(attn, x, hw, regions, path, dtype) * own, reference * own) for path in ('torch', 'triton')}
    assert err['triton'] < min(bound, 1.5 * err['torch'] + 1e-4), err


@needs_triton
def test_triton_layer_norm_writes_the_autocast_dtype():
    from inline_backbones.models.layers.layer_norm import layer_norm

    norm = torch.nn.LayerNorm(96, eps=0.5).eval()          # an eps that shows (the default 1e-5 would hide it)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x = torch.randn(2, 50, 96) + 1
    with torch.no_grad(), force_path('triton'):
        torch.testing.assert_close(layer_norm(norm, x), norm(x), rtol=1e-5, atol=1e-5)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            y = layer_norm(norm, x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, norm(x).to(torch.bfloat16), rtol=1e-2, atol=1e-2)


def test_choose():
    x = torch.randn(1, 4, 32)
    attn = InLineAttention(32, 1)
    assert choose(x, attn) == Implementation('torch')             # a CPU tensor, N < C: not folded
    with force_path('reference'):
        assert choose(x, attn) == Implementation('reference')
    assert choose(x, attn) == Implementation('torch')             # the forced path ends with the block
    with pytest.raises(ValueError, match="unknown InLine attention path 'fast'"):
        with force_path('fast'):
            pass
    assert set(PATHS) == {'reference', 'torch', 'triton'}


def test_a_process_wide_path_holds_until_reset_and_force_path_wins_within_its_block(monkeypatch):
    monkeypatch.setattr(inline_paths, '_default', None)
    x, attn = torch.randn(1, 4, 32), InLineAttention(32, 1)
    assert set_path('reference') == 'auto'
    assert choose(x, attn) == Implementation('reference') and choose(x) == Implementation('reference')
    with force_path('torch'):
        assert choose(x, attn) == Implementation('torch')
    assert choose(x, attn) == Implementation('reference')
    assert set_path('auto') == 'reference'
    assert choose(x, attn) == Implementation('torch')
    with pytest.raises(ValueError, match=r"set_path: 'fast' is not an InLine attention path: choose one of .* or auto"):
        set_path('fast')
    assert choose(x, attn) == Implementation('torch')


@pytest.mark.slow
@pytest.mark.mutation
@pytest.mark.parametrize('value, expected', [('reference', 'reference'), ('auto', 'torch'), ('', 'torch')])
def test_the_environment_variable_sets_the_path_at_import(value, expected):
    code = ('import torch; from inline_backbones.models.mixers.inline.paths import choose; '
            'print(choose(torch.randn(1, 4, 32)).name)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         env={**os.environ, 'INLINE_ATTN_PATH': value}, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == expected, out.stderr


@pytest.mark.slow
@pytest.mark.mutation
def test_an_unknown_path_in_the_environment_variable_is_an_error_naming_it():
    code = 'import inline_backbones.models.mixers.inline.paths'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         env={**os.environ, 'INLINE_ATTN_PATH': 'fastest'}, timeout=300)
    assert out.returncode == 1
    assert ("the environment variable INLINE_ATTN_PATH = 'fastest' is not an InLine attention path: choose one of "
            "('reference', 'torch', 'triton') or auto") in out.stderr


class _Input:
    """What choose reads of a tensor (device, dtype, shape); a real CUDA tensor needs a GPU."""

    def __init__(self, dtype=torch.float32, index=0, shape=(1, 4, 32)):
        self.device = torch.device('cuda', index) if index is not None else torch.device('cuda')
        self.dtype, self.shape = dtype, shape


def _layer(head_dims=32, kernel_func='identity', local_residual=True):
    """What choose reads of a layer."""
    import types

    return types.SimpleNamespace(head_dims=head_dims, kernel_func=kernel_func, local_residual=local_residual)


def test_when_a_triton_implementation_is_taken(monkeypatch):
    """The decision itself, on a stand-in CUDA input (the module docstring's rule): 'triton' for a CUDA tensor of
    fp32/bf16/fp16 with no graph captured, Triton importing, no kernel failed, an Ampere-or-later GPU and a head size
    of 16/32/64/128 (or none: the layer norm), gradients off; 'triton-train' with gradients on for a layer with a
    written-out backward (identity kernel, local residual); else 'torch'."""
    gpus = []
    monkeypatch.setattr(inline_paths, 'triton_kernels', lambda: 'kernels')
    monkeypatch.setattr(inline_paths, '_triton_gpu', lambda index: gpus.append(index) or index != 5)
    monkeypatch.setattr(inline_paths, '_failed', None)
    monkeypatch.setattr(torch.cuda, 'current_device', lambda: 3)
    with torch.no_grad():
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            assert choose(_Input(dtype), _layer()).name == 'triton'
        assert choose(_Input(torch.float64), _layer()).name == 'torch'
        names = [choose(_Input(), _layer(d)).name for d in (16, 32, 64, 128, 8, 24, 256)]
        assert names == ['triton'] * 4 + ['torch'] * 3
        assert choose(_Input()).name == 'triton'                                        # a layer norm
        assert gpus[-1] == 0 and choose(_Input(index=2)).name == 'triton' and gpus[-1] == 2
        assert choose(_Input(index=None)).name == 'triton' and gpus[-1] == 3           # the current device
        assert choose(_Input(index=5)).name == 'torch'                                  # a GPU before Ampere
        assert choose(torch.zeros(1, 4, 32), _layer()).name == 'torch'                  # not CUDA
    assert choose(_Input(), _layer()).name == 'triton-train'                     # gradients on, a backward
    for layer in (_layer(kernel_func='relu'), _layer(local_residual=False), None):
        assert choose(_Input(), layer).name == 'torch'                           # gradients on, no backward
    with force_path('triton'):
        assert choose(torch.zeros(1, 4, 32), _layer()).name == 'triton-train'    # forced, even on a CPU tensor
        assert choose(torch.zeros(1, 4, 32), _layer(kernel_func='relu')).name == 'torch'   # ... not without a backward
        with torch.no_grad():
            assert choose(torch.zeros(1, 4, 32), _layer(kernel_func='relu')).name == 'triton'
    with force_path('reference'):
        assert choose(_Input(), _layer()).name == 'reference'
    with torch.no_grad():
        monkeypatch.setattr(inline_paths, 'exporting_or_tracing', lambda: True)
        assert choose(_Input(), _layer()).name == 'torch'                                # a graph is captured
        monkeypatch.setattr(inline_paths, 'exporting_or_tracing', lambda: False)
        monkeypatch.setattr(inline_paths, '_failed', RuntimeError('ptxas'))
        assert choose(_Input(), _layer()).name == 'torch'                                # a kernel failed to build
        monkeypatch.setattr(inline_paths, '_failed', None)
        monkeypatch.setattr(inline_paths, 'triton_kernels', lambda: None)
        assert choose(_Input(), _layer()).name == 'torch'                                # Triton does not import


def test_when_q_m_is_folded_into_proj(monkeypatch):
    """fold: the identity kernel, more tokens than channels (N > C), the 'torch' or inference 'triton' form, in eager
    mode only (a captured graph and the FLOP count take the paper's order of operations)."""
    wide, tall = torch.zeros(1, 4, 32), torch.zeros(1, 33, 32)
    with torch.no_grad():
        assert choose(tall, _layer()) == Implementation('torch', fold=True)
        assert not choose(wide, _layer()).fold and not choose(torch.zeros(1, 32, 32), _layer()).fold   # N <= C
        assert not choose(tall, _layer(kernel_func='relu')).fold and not choose(tall).fold
        with force_path('reference'):
            assert choose(tall, _layer()) == Implementation('reference')
        with force_path('triton'):
            assert choose(tall, _layer()) == Implementation('triton', fold=True)
        monkeypatch.setattr(inline_paths, 'may_branch_on_size', lambda: False)
        assert choose(tall, _layer()) == Implementation('torch')
    monkeypatch.undo()
    with force_path('triton'):
        assert choose(tall, _layer()) == Implementation('triton-train')              # training: never folded
    assert choose(tall, _layer()) == Implementation('torch', fold=True)              # training on the CPU: folded


def test_the_layer_runs_the_implementation_it_is_given(monkeypatch):
    """attend() asks choose (with the layer) and runs the implementation of that name on its own arguments and the
    fold it was given; a folded and an unfolded 'torch' layer compute the same function."""
    from inline_backbones.models.mixers.inline import attention as module

    calls = []

    def spy(name, with_fold=True):
        if with_fold:
            return lambda attn, x, hw, mask=None, fold=False: calls.append((name, attn, x, hw, mask, fold)) or x
        return lambda attn, x, hw, mask=None: calls.append((name, attn, x, hw, mask, None)) or x

    x, mask = torch.randn(1, 42, 64), torch.ones(1, 42, 1, dtype=torch.bool)
    attn = InLineAttention(64, 4)
    for name in ('reference', 'torch', 'triton', 'triton-train'):
        for fold in (False, True):
            with monkeypatch.context() as patched:
                patched.setattr(module, 'choose', lambda x_, layer, name=name, fold=fold: (
                    calls.append(('asked', layer, x_)) or Implementation(name, fold)))
                patched.setattr(module, 'attend_gpu', spy('triton'))
                patched.setattr(module, 'attend_gpu_train', spy('triton-train', with_fold=False))
                patched.setattr(module, 'inline_attention_reference', spy('reference', with_fold=False))
                patched.setattr(InLineAttention, 'attend_torch', spy('torch'))
                calls.clear()
                assert attn.attend(x, (6, 7), mask) is x
            given = fold if name in ('torch', 'triton') else None
            assert calls == [('asked', attn, x), (name, attn, x, (6, 7), mask, given)], (name, fold)
    x = torch.randn(2, 42, 32)
    attn = InLineAttention(32, 2).eval()
    with torch.no_grad():
        plain = attn.attend_torch(x, (6, 7), None, fold=False)
        torch.testing.assert_close(attn.attend_torch(x, (6, 7), None, fold=True), plain, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(attn.attend(x, (6, 7)), plain, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_choose_on_a_gpu():
    x = torch.randn(1, 4, 32, device='cuda')
    with torch.no_grad():
        assert choose(x, _layer()).name == ('triton' if triton_kernels() else 'torch')
        assert choose(x, _layer(24)).name == 'torch'                 # a head size the kernels do not take
    with torch.enable_grad():
        assert choose(x, _layer()).name == ('triton-train' if triton_kernels() else 'torch')
        assert choose(x, _layer(kernel_func='relu')).name == 'torch'


@needs_triton
@pytest.mark.parametrize('case', ['global', 'padding-aware', 'windows', 'shifted windows, padding-aware', 'pvt',
                                  'pvt, N < C (not folded)'])
def test_triton_training_path_has_the_generic_paths_gradients(case):
    """With gradients on, the Triton path (inline_autograd.py) gives the generic path's output and the same
    gradients for the input and every parameter (fp32; upstream gradient zero on padding tokens)."""
    build, hw, regions = CASES[case]
    attn = build()
    x = torch.randn(2, hw[0] * hw[1], 64, requires_grad=True)
    own = torch.ones(2, hw[0] * hw[1], 1) if regions is None else TokenMap.of(x, hw, regions).token_mask().float()
    grad_out = torch.randn(2, hw[0] * hw[1], 64) * own
    params = [x, *attn.parameters()]

    def forward_backward(path):
        with force_path(path):
            out = attn(x, TokenMap.of(x, hw, regions))
        return [out * own, *torch.autograd.grad(out, params, grad_out)]

    for name, a, b in zip(['output', 'x', *(n for n, _ in attn.named_parameters())], forward_backward('triton'),
                          forward_backward('torch'), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=lambda m, name=name: f'{name}: {m}')


@needs_triton
def test_triton_path_is_not_taken_for_training_without_a_backward():
    """A relu-kernel layer has no written-out backward: with gradients on, even a forced Triton path computes it
    with the generic one (so its gradients exist)."""
    attn = InLineAttention(64, 2, kernel_func='relu')
    x = torch.randn(1, 42, 64, requires_grad=True)
    with force_path('triton'):
        out = attn(x, TokenMap.of(x, (6, 7)))
        assert choose(x, attn).name == 'torch'
    out.sum().backward()
    assert x.grad is not None and attn.qkv.weight.grad.abs().sum() > 0


@needs_triton
def test_a_kernel_that_cannot_be_built_falls_back_to_the_generic_path(monkeypatch, caplog):
    """A GPU the kernels cannot be built for: the layer computes with the generic path, says so once in the log,
    and later calls take the generic path directly."""
    import triton

    from inline_backbones.models.mixers.inline import attention as inline_attention

    def broken(*args):
        raise triton.compiler.errors.CompilationError('kernel.py', None, 'no tf32 dot on this GPU')

    monkeypatch.setattr(inline_paths, '_failed', None)
    monkeypatch.setattr(inline_attention, 'attend_gpu', broken)
    attn = InLineAttention(64, 2).eval()
    x = torch.randn(2, 42, 64)
    with torch.no_grad(), force_path('triton'):
        out = attn(x, TokenMap.of(x, (6, 7)))
    torch.testing.assert_close(out, run(attn, x, (6, 7), None, 'torch'))
    assert [r.getMessage() for r in caplog.records] == [
        f'InLine: a Triton kernel could not be built on this GPU (CompilationError: {inline_paths._failed}); using '
        'the generic PyTorch path from now on']
    assert inline_paths._failed is not None
    monkeypatch.setattr(inline_paths, '_failed', None)


@needs_triton
def test_the_fallback_catches_what_triton_raises_when_a_kernel_cannot_be_built():
    """Compilation, ptxas and resource errors (each where this Triton defines it), nothing else."""
    import triton.compiler.errors as compiler_errors
    import triton.runtime.errors as runtime_errors

    from inline_backbones.models.mixers.inline.paths import _kernel_errors

    expected = [getattr(module, name) for name in ('CompilationError', 'PTXASError', 'OutOfResources')
                for module in (compiler_errors, runtime_errors) if hasattr(module, name)]
    assert {error.__name__ for error in expected} == {'CompilationError', 'PTXASError', 'OutOfResources'}
    assert set(_kernel_errors()) == set(expected) and RuntimeError not in _kernel_errors()


@needs_triton
def test_a_layer_norm_kernel_that_cannot_be_built_falls_back_to_f_layer_norm(monkeypatch):
    import triton

    from inline_backbones.models.layers import layer_norm

    class Broken:
        @staticmethod
        def layer_norm(*args):
            raise triton.compiler.errors.CompilationError('layer_norm_triton.py', None, 'no kernel for this GPU')

    monkeypatch.setattr(inline_paths, '_failed', None)
    monkeypatch.setattr(layer_norm, 'triton_kernels', lambda: Broken)
    norm = torch.nn.LayerNorm(32, eps=0.5)
    x = torch.randn(2, 7, 32)
    with torch.no_grad(), force_path('triton'):
        torch.testing.assert_close(layer_norm.layer_norm(norm, x), norm(x))
    assert isinstance(inline_paths._failed, triton.compiler.errors.CompilationError)
    monkeypatch.setattr(inline_paths, '_failed', None)
