"""Access to the authors' released-format InLine-CSwin fixtures in ``tests/fixtures/inline-cswin`` (the format:
``tests/fixtures/README.md``): two small models built by the authors' ``CSWinTransformer`` at 224x224 with the
released ``la_split_size`` ``56-28-14-7`` (layouts ``IISS``, the released one, and ``SSII``), saved as the authors'
``main_ema.py`` saves checkpoints (``model`` and ``state_dict_ema``), the tokens out of each stage's last block and
the logits of both state dicts for a fixed input, and the key shapes and parameter counts of the full T/S/B. The same
functions as ``released_fixtures.py`` / ``pvt_fixtures.py`` (``logit_cases``, ``expected_stage_tokens``,
``released_classifier``)."""
from released_fixtures import FIXTURES_ROOT, classifier_from_file, load_expected, released_state_dict_shapes, require

CSWIN_DIR = FIXTURES_ROOT / 'inline-cswin'
LAYOUTS = ('IISS', 'SSII')
TIMM_MODEL = 'inline_cswin_tiny'    # the timm model function the fixtures' mini archs override


def checkpoint_path(layout):
    return require(CSWIN_DIR / f'mini-cswin-{layout}.pth')


def expected(layout):
    """``{'arch': {...}, 'x': (1, 3, 224, 224), 'stage_tokens': [4 x (B, N, C)], 'logits': (B, 1000),
    'ema_logits': (B, 1000)}`` (``ema_logits``: the file's ``state_dict_ema`` in the same model)."""
    checkpoint_path(layout)
    return load_expected(CSWIN_DIR / f'mini-cswin-{layout}.expected.pt')


def released(arch):
    """``{'builder', 'attn_type', 'la_split_size', 'img_size', 'cfg_file', 'params': N, 'state_dict': {key: shape}}``
    of the full released ``arch`` (``'tiny'``, ``'small'``, ``'base'``)."""
    return released_state_dict_shapes(CSWIN_DIR, arch)


def mini_arch(layout):
    """The fixture's arch: ``embed_dims`` (the first stage's width; each stage doubles it), ``depths``,
    ``num_heads``, ``split_size`` (the ``S`` blocks' stripe widths), ``mlp_ratio``."""
    arch = expected(layout)['arch']
    return {'embed_dims': arch['embed_dims'], 'depths': list(arch['depths']), 'num_heads': list(arch['num_heads']),
            'split_size': list(arch['split_size']), 'mlp_ratio': arch['mlp_ratio']}


def logit_cases(layout):
    """``[(x, logits)]`` of the authors' ``layout`` model (its ``model`` state dict) at 224x224."""
    case = expected(layout)
    return [(case['x'], case['logits'])]


def expected_stage_tokens(layout):
    """``(x, [4 x (B, N, C)])``: the input and the authors' stage tokens at 224x224."""
    case = expected(layout)
    return case['x'], case['stage_tokens']


def released_classifier(layout, path=None, **kwargs):
    """``timm.create_model`` of :data:`TIMM_MODEL` with ``attn_type`` and the keyword overrides (e.g.
    :func:`mini_arch`'s, as the model takes them) from a released-format file."""
    return classifier_from_file(TIMM_MODEL, path or checkpoint_path(layout), attn_type=layout, **kwargs)
