"""Access to the authors' released-format InLine-DeiT fixtures in ``tests/fixtures/inline-deit`` (the format:
``tests/fixtures/README.md``): two small models built by the authors' ``VisionTransformer`` with InLine attention,
one at 224x224 (InLine-DeiT-T's resolution) and one at 288x288 (InLine-DeiT-S's), saved as the authors' ``main.py``
saves checkpoints, the tokens out of every block and the logits for fixed inputs, and the key shapes and parameter
counts of the full T/S/B (built at 224, 288 and 448, their released resolutions). The same functions as the other
families' loaders (``logit_cases``, ``released_classifier``); a plain ViT has blocks, not stages:
``expected_block_tokens``."""
from released_fixtures import FIXTURES_ROOT, classifier_from_file, load_expected, released_state_dict_shapes, require

DEIT_DIR = FIXTURES_ROOT / 'inline-deit'
SIZES = (224, 288)
TIMM_MODEL = 'inline_deit_tiny'     # the timm model function the fixtures' mini archs override


def checkpoint_path(img_size):
    return require(DEIT_DIR / f'mini-deit-{img_size}.pth')


def expected(img_size):
    """``{'arch': {...}, 'x': (B, 3, S, S), 'block_tokens': [depth x (B, 1 + N, C)], 'logits': (B, 1000)}``
    (batch 2 at 224, 1 at 288; token 0 is the class token)."""
    checkpoint_path(img_size)
    return load_expected(DEIT_DIR / f'mini-deit-{img_size}.expected.pt')


def released(arch):
    """``{'builder', 'img_size', 'cfg_file', 'params': N, 'state_dict': {key: shape}}`` of the full released ``arch``
    (``'tiny'``, ``'small'``, ``'base'``)."""
    return released_state_dict_shapes(DEIT_DIR, arch)


def mini_arch(img_size):
    """The fixture's arch: ``embed_dims``, ``depth``, ``num_heads``, ``patch_size``, ``mlp_ratio``, ``img_size``."""
    return dict(expected(img_size)['arch'])


def logit_cases(img_size):
    """``[(x, logits)]`` of the authors' model made for ``img_size``."""
    case = expected(img_size)
    return [(case['x'], case['logits'])]


def expected_block_tokens(img_size):
    """``(x, [depth x (B, 1 + N, C)])``: the input and the tokens out of each of the authors' blocks (no norm)."""
    case = expected(img_size)
    return case['x'], case['block_tokens']


def released_classifier(img_size, path=None, **kwargs):
    """``timm.create_model`` of :data:`TIMM_MODEL` at ``img_size`` with the keyword overrides (e.g.
    :func:`mini_arch`'s, as the model takes them) from a released-format file."""
    return classifier_from_file(TIMM_MODEL, path or checkpoint_path(img_size), img_size=img_size, **kwargs)
