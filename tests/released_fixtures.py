"""Access to the authors' released-format InLine-Swin fixtures in ``tests/fixtures/inline-swin``, and what every
family's fixture loader shares (where the fixtures are, :func:`require`, the inputs, :func:`load_expected`, the
released key shapes, :func:`classifier_from_file`).

``tests/fixtures/make_fixtures.py`` made them with the authors' own model code at 224x224 (``window_size=56``):
small models (embed 4, depths 2-2-4-2, heads 1-2-4-8) in the released checkpoint format, and for the kernel
functions ``identity``, ``exp`` and ``relu`` the tokens out of each stage's last block (before patch merging and
before any norm) and the classifier logits for a fixed input ``x``. ``tests/fixtures/README.md`` gives every file's
format. The same functions as ``pvt_fixtures.py`` give what the tests of every family read (``released_classifier``,
``logit_cases``, ``expected_stage_tokens``).
"""
import json
import os
from pathlib import Path

import pytest
import timm
import torch

from inline_backbones import InLineSwinTransformer

# ``tests/fixtures`` beside this file; searched upwards too, so that copies of the tests at another depth (the
# mutation run executes them from ``mutants/tests``) find the repository's.
FIXTURES_ROOT = next((p for p in [Path(__file__).resolve().parent / 'fixtures',
                                  *(q / 'tests' / 'fixtures' for q in Path(__file__).resolve().parents)]
                      if (p / 'inputs.pt').is_file()), Path(__file__).resolve().parent / 'fixtures')
FIXTURE_DIR = FIXTURES_ROOT / 'inline-swin'
LAYOUTS = ('IIIS', 'IISS', 'IIMS2')
KERNELS = ('identity', 'exp', 'relu')
TIMM_MODEL = 'inline_swin_tiny'     # the timm model function the fixtures' mini archs override


def require(path=FIXTURE_DIR):
    """``path`` if it exists. Otherwise skip the test, or fail it when the environment variable ``CI`` is set: CI
    must never lose the comparisons with the authors' model."""
    if path.exists():
        return path
    message = (f'released-format fixture {path} is missing: the tests comparing with the authors\' model need '
               f'tests/fixtures (made by tests/fixtures/make_fixtures.py, see tests/fixtures/README.md)')
    if os.environ.get('CI'):
        pytest.fail(f'{message} (CI is set, so this is an error, not a skip)', pytrace=False)
    pytest.skip(message)


def fixture_input(crops):
    """The model input ``(len(crops), 3, h, w)`` of crops ``[[top, left, h, w], ...]`` of the fixtures' image:
    ``(image - 128) / 64`` in float32 (exact), as ``make_fixtures.py`` made it."""
    image = torch.load(require(FIXTURES_ROOT / 'inputs.pt'), map_location='cpu', weights_only=True)['image']
    return torch.stack([(image[0, :, top:top + h, left:left + w].float() - 128) / 64 for top, left, h, w in crops])


def load_expected(path):
    """An ``.expected.pt`` file (``weights_only=True``), each ``crops`` entry (at the top or one level down) given
    its input as ``x``."""
    expected = torch.load(require(path), map_location='cpu', weights_only=True)
    for case in [expected, *(v for v in expected.values() if isinstance(v, dict))]:
        if 'crops' in case:
            case['x'] = fixture_input(case['crops'])
    return expected


def released_state_dict_shapes(directory, arch):
    """The full released ``arch`` as the authors' code builds it (``{..., 'params': N, 'state_dict': {key: shape}}``),
    from ``released_state_dict_shapes.json`` in a family's fixture ``directory``."""
    return json.loads(require(directory / 'released_state_dict_shapes.json').read_text())[arch]


def classifier_from_file(timm_model, file, **kwargs):
    """``timm.create_model`` of ``timm_model`` (keyword overrides) from the released-format ``file``, in eval mode."""
    return timm.create_model(timm_model, pretrained=True, pretrained_cfg_overlay=dict(file=str(file)), **kwargs).eval()


def checkpoint_path(layout):
    return require(FIXTURE_DIR / f'mini-{layout}.pth')


def released_shapes(arch):
    """``{'config': {...}, 'params': N, 'state_dict': {key: shape}}`` of the full released ``arch`` (``'tiny'``
    ...): what the downloadable checkpoint holds, as the authors' code builds it."""
    return released_state_dict_shapes(FIXTURE_DIR, arch)


def expected(layout):
    """``{'arch': {...}, 'x': (1, 3, 224, 224), kernel: {'stage_tokens': [4 x (B, N, C)], 'logits'}}``."""
    checkpoint_path(layout)
    return load_expected(FIXTURE_DIR / f'mini-{layout}.expected.pt')


def mini_arch(layout):
    arch = expected(layout)['arch']
    return dict(embed_dims=arch['embed_dims'], depths=list(arch['depths']), num_heads=list(arch['num_heads']))


def logit_cases(layout, kernel_func='identity'):
    """``[(x, logits)]`` of the authors' ``layout`` model with ``kernel_func``: the fixture's input (1, 3, 224, 224)."""
    case = expected(layout)
    return [(case['x'], case[kernel_func]['logits'])]


def expected_stage_tokens(layout):
    """``(x, [4 x (B, N, C)])``: the input and the authors' stage tokens (identity kernel) at 224x224."""
    case = expected(layout)
    return case['x'], case['identity']['stage_tokens']


def released_classifier(layout, path=None, **kwargs):
    """``timm.create_model`` of the fixture's mini arch (keyword overrides) from a released-format file."""
    return classifier_from_file(TIMM_MODEL, path or checkpoint_path(layout), attn_type=layout, **mini_arch(layout),
                                **kwargs)


def released_backbone(layout, kernel_func='identity', **kwargs):
    """Our backbone built for the fixture's arch and loaded from its released-format file (strict)."""
    model = InLineSwinTransformer(
        arch=mini_arch(layout), attn_type=layout, kernel_func=kernel_func, drop_path_rate=0.,
        init_cfg=dict(type='Pretrained', checkpoint=str(checkpoint_path(layout))), **kwargs)
    model.init_weights()
    return model.eval()


def hooked_outputs(model, modules, x):
    """What each of ``modules`` returns while ``model`` runs on ``x`` (no grad), in call order, by forward hooks."""
    captured = []
    hooks = [module.register_forward_hook(lambda m, i, out: captured.append(out)) for module in modules]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return captured


def stage_tokens(backbone, x):
    """The tokens out of each stage's last block (before merging and norms), as the fixtures store them."""
    return [out[0] for out in hooked_outputs(backbone, backbone.layers, x)]


def rel_diff(a, b):
    """|a - b| / |b| (Frobenius norms)."""
    return ((a - b).norm() / b.norm()).item()


def assert_stage_tokens_equal(actual, reference, rtol=1e-4):
    """Each stage within ``rtol`` relative (Frobenius norm of the difference over the reference's)."""
    assert len(actual) == len(reference)
    for i, (a, r) in enumerate(zip(actual, reference, strict=True)):
        assert a.shape == r.shape, f'stage {i}: {tuple(a.shape)} vs {tuple(r.shape)}'
        rel = ((a - r).norm() / r.norm()).item()
        assert rel < rtol, f'stage {i}: relative difference {rel:.2e} >= {rtol}'
