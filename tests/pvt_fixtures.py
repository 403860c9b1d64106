"""Access to the authors' released-format InLine-PVT fixtures in ``tests/fixtures/inline-pvt``: two small models
(layouts ``IIII`` and ``IISS``) saved by the authors' code, their stage tokens and logits at 224x224 (batch 2),
256x320 and 250x330, and the key shapes and parameter counts of the full T/S/M/L (``tests/fixtures/README.md``). The
same functions as ``released_fixtures.py`` give what the tests of every family read (``released_classifier``,
``logit_cases``, ``expected_stage_tokens``)."""
from released_fixtures import FIXTURES_ROOT, classifier_from_file, load_expected, released_state_dict_shapes, require

from inline_backbones import InLinePVT

PVT_DIR = FIXTURES_ROOT / 'inline-pvt'
LAYOUTS = ('IIII', 'IISS')
SIZES = ('224x224', '256x320', '250x330')
TIMM_MODEL = 'inline_pvt_tiny'      # the timm model function the fixtures' mini archs override


def checkpoint_path(layout):
    return require(PVT_DIR / f'mini-pvt-{layout}.pth')


def expected(layout):
    """``{'arch': {...}, size: {'x', 'stage_tokens': [4 x (B, N, C)], 'logits': (B, 1000)}}``."""
    checkpoint_path(layout)
    return load_expected(PVT_DIR / f'mini-pvt-{layout}.expected.pt')


def released(arch):
    """``{'params': N, 'state_dict': {key: shape}, ...}`` of the full released ``arch`` (``'tiny'`` ...)."""
    return released_state_dict_shapes(PVT_DIR, arch)


def mini_arch(layout):
    arch = expected(layout)['arch']
    return {k: list(arch[k]) for k in ('embed_dims', 'depths', 'num_heads', 'mlp_ratios', 'sr_ratios')}


def released_backbone(layout, **kwargs):
    """Our backbone of the fixture's arch, loaded from its released-format file through ``init_cfg``
    (``kwargs`` override, e.g. ``attn_type``)."""
    kwargs = {'attn_type': layout, **kwargs}
    model = InLinePVT(arch=mini_arch(layout), drop_path_rate=0.,
                      init_cfg=dict(type='Pretrained', checkpoint=str(checkpoint_path(layout))), **kwargs)
    model.init_weights()
    return model.eval()


def logit_cases(layout):
    """``[(x, logits)]`` of the authors' ``layout`` model at each of :data:`SIZES`."""
    case = expected(layout)
    return [(case[size]['x'], case[size]['logits']) for size in SIZES]


def expected_stage_tokens(layout):
    """``(x, [4 x (B, N, C)])``: the input and the authors' stage tokens at 256x320."""
    case = expected(layout)['256x320']
    return case['x'], case['stage_tokens']


def released_classifier(layout, path=None, **kwargs):
    """``timm.create_model`` of the fixture's mini arch (keyword overrides) from a released-format file."""
    return classifier_from_file(TIMM_MODEL, path or checkpoint_path(layout), attn_type=layout, **mini_arch(layout),
                                **kwargs)
