"""Access to the authors' released-format FLatten-Swin fixtures in ``tests/fixtures/flatten-swin`` (the format:
``tests/fixtures/README.md``; made by ``tests/fixtures/make_flatten_fixtures.py`` with the FLatten authors'
``FLattenSwinTransformer``): ``mini-flatten-FFSS`` (the released layout, windows 56 at 224 px) and
``mini-flatten-FFFF-w4`` (FLatten in every stage, windows of 4 at 64 px, shifted in odd blocks), saved as the
authors' ``main.py`` saves checkpoints, the tokens out of each stage's last block and the logits for fixed inputs,
and the key shapes and parameter counts of the full FLatten-Swin-T/S/B. The same functions as the other loaders
(``logit_cases``, ``expected_stage_tokens``, ``released_classifier``), plus ``released_backbone``."""
from released_fixtures import FIXTURES_ROOT, classifier_from_file, load_expected, released_state_dict_shapes, require

from inline_backbones import InLineSwinTransformer

FLATTEN_DIR = FIXTURES_ROOT / 'flatten-swin'
MINIS = ('mini-flatten-FFSS', 'mini-flatten-FFFF-w4')
TIMM_MODEL = 'flatten_swin_tiny'    # the timm model function the fixtures' mini archs override


def checkpoint_path(name):
    return require(FLATTEN_DIR / f'{name}.pth')


def expected(name):
    """``{'arch': {...}, 'crops', 'x': (B, 3, S, S), 'stage_tokens': [4 x (B, N, C)], 'logits': (B, classes)}``;
    ``arch``: ``embed_dims``, ``depths``, ``num_heads``, ``attn_type`` (ours), ``authors_attn_type``,
    ``window_size``, ``img_size``, ``num_classes`` (0: ``logits`` are the pooled features)."""
    checkpoint_path(name)
    return load_expected(FLATTEN_DIR / f'{name}.expected.pt')


def released(arch):
    """``{'config': {...}, 'cfg_file', 'params': N, 'state_dict': {key: shape}}`` of the full released ``arch``
    (``'tiny'``, ``'small'``, ``'base'``), as the authors' code builds it."""
    return released_state_dict_shapes(FLATTEN_DIR, arch)


def model_kwargs(name):
    """Our arguments for the fixture's model: the arch dict with our layout, and the FLatten window options."""
    arch = expected(name)['arch']
    return dict(arch=dict(embed_dims=arch['embed_dims'], depths=list(arch['depths']),
                          num_heads=list(arch['num_heads']), attn_type=arch['attn_type']),
                flatten_window_size=arch['window_size'], flatten_img_size=arch['img_size'])


def logit_cases(name):
    """``[(x, logits)]`` of the authors' model."""
    case = expected(name)
    return [(case['x'], case['logits'])]


def expected_stage_tokens(name):
    """``(x, [4 x (B, N, C)])``: the input and the authors' stage tokens."""
    case = expected(name)
    return case['x'], case['stage_tokens']


def released_classifier(name, path=None, **kwargs):
    """``timm.create_model`` of :data:`TIMM_MODEL` over the fixture's arch from its released-format file (strict)."""
    options = model_kwargs(name)
    arch = options.pop('arch')
    return classifier_from_file(TIMM_MODEL, path or checkpoint_path(name), drop_path_rate=0.,
                                num_classes=expected(name)['arch']['num_classes'], **arch, **options, **kwargs)


def released_backbone(name, **kwargs):
    """Our backbone for the fixture's arch, loaded from its released-format file through ``init_cfg`` (strict)."""
    model = InLineSwinTransformer(**model_kwargs(name), drop_path_rate=0.,
                                  init_cfg=dict(type='Pretrained', checkpoint=str(checkpoint_path(name))), **kwargs)
    model.init_weights()
    return model.eval()
