"""Benchmark model names -> models: one grammar that says whose model each name is.

This package's models are named bare, other libraries' with their library as a prefix (:data:`GRAMMAR`). A bare
name that is another library's model (``swin-t``: mmdet's or timm's?) is refused with the prefixed choices, an
unknown name with the grammar. :func:`parse` reads a name, :func:`build_backbone` and :func:`build_task_model` build
it (random weights, no drop path).
"""
import re
from dataclasses import dataclass, replace
from pathlib import Path

from torch import nn
from torch.nn import functional as F

from ..models.mixers.inline.paths import PATHS

GRAMMAR = """model names (--models, --reference):
  this package (bare)
    inline-swin-{t,s,b}[-pa][-w{w}][@torch|@reference|@triton]
        InLine-Swin; -pa: padding-aware mode (given each image's size); -w{w}: InLine attention in windows of w,
        softmax windows of max(7, w // 8) (the authors' rule); @path: InLine attention's implementation forced
    inline-pvt-{t,s,m,l}[-pa][@torch|@reference|@triton]
        InLine-PVT (InLine attention over all tokens in every stage)
    flatten-swin-{t,s,b}[-pa][-global]
        FLatten-Swin (the authors' presets flatten-*: focused linear attention in stages 1-2, windows of 56 and 28
        tokens as released, Swin's softmax windows of 7 in 3-4); -global: the FLatten blocks over the whole map,
        their positional encoding resized to it
    inline-cswin-{t,s,b}[-pa]
        InLine-CSwin (global InLine attention with LePE in stages 1-2, CSWin's cross-shaped stripes in 3-4)
    cswin-t-stripes
        CSWin-T (Dong et al. 2022: embed 64, depths 1-2-21-1, heads 2-4-8-16) on this package's trunk: CSWin's
        LePE cross-shaped stripe softmax attention in every stage (stripes 1, 2, 7; the last stage global)
    swin-t-global
        Swin-T's hierarchy on this package's trunk with softmax attention over the whole map in every block
  other libraries (prefixed)
    mmdet:swin-{t,s,b}      mmdet's SwinTransformer, window 7
    mmdet:pvt-{t,s,m,l}     mmdet's PyramidVisionTransformer (PVT v1)
    timm:swin-t             timm's swin_tiny_patch4_window7_224, img_size = the input, features_only
    timm:swin-t-w{w}        timm's Swin-T trunk with windows of w (clamped to each stage's map, as Swin's code does)
    timm:pvt-v2-b1          timm's pvt_v2_b1, features_only
  whole models (--task mask-rcnn | upernet, from the configs)
    mask-rcnn: inline-swin-{t,s,b}, mmdet:swin-{t,s}      upernet: inline-swin-{t,s,b}, mmseg:swin-{t,s,b}"""

SWIN_ARCH = {'t': 'tiny', 's': 'small', 'b': 'base'}
# CSWin-T's published arch (Dong et al. 2022, Table 1), the softmax counterpart of InLine-CSwin-T
CSWIN_T = dict(embed_dims=64, depths=[1, 2, 21, 1], num_heads=[2, 4, 8, 16], split_size=[1, 2, 7, 7])
PVT_ARCH = {'t': 'tiny', 's': 'small', 'm': 'medium', 'l': 'large'}
OURS = 'inline_backbones'
# (library, pattern); the pattern's ``family`` group says which reference model a row is compared with by default.
PATTERNS = (
    (OURS, r'inline-(?P<family>swin)-(?P<arch>[tsb])(?P<pa>-pa)?(?:-w(?P<window>[1-9]\d*))?(?:@(?P<path>[\w-]+))?'),
    (OURS, r'inline-(?P<family>pvt)-(?P<arch>[tsml])(?P<pa>-pa)?(?:@(?P<path>[\w-]+))?'),
    (OURS, r'inline-(?P<family>cswin)-(?P<arch>[tsb])(?P<pa>-pa)?'),
    (OURS, r'(?P<flatten>flatten)-(?P<family>swin)-(?P<arch>[tsb])(?P<pa>-pa)?(?P<flatten_global>-global)?'),
    (OURS, r'(?P<family>swin)-(?P<arch>t)-(?P<variant>global)'),
    (OURS, r'(?P<family>cswin)-(?P<arch>t)-(?P<variant>stripes)'),
    ('mmdet', r'(?P<family>swin)-(?P<arch>[tsb])'),
    ('mmdet', r'(?P<family>pvt)-(?P<arch>[tsml])'),
    ('mmseg', r'(?P<family>swin)-(?P<arch>[tsb])'),
    ('timm', r'(?P<family>swin)-(?P<arch>t)(?:-w(?P<window>[1-9]\d*))?'),
    ('timm', r'(?P<family>pvt)-(?P<variant>v2-b1)'),
)
# The families (a name's ``family``) and their models, as the help lists them.
FAMILIES = {
    'swin': ('inline-swin-*', 'flatten-swin-*', 'swin-t-global', 'mmdet:swin-*', 'mmseg:swin-*', 'timm:swin-t*'),
    'pvt': ('inline-pvt-*', 'mmdet:pvt-*', 'timm:pvt-v2-b1'),
    'cswin': ('inline-cswin-*', 'cswin-t-stripes'),
}
_REPO = Path(__file__).resolve().parents[2]
TASK_CONFIGS = {
    'mask-rcnn': {
        **{f'inline-swin-{s}': f'{_REPO}/mmdet_configs/mask-rcnn_inline-swin-{s}_fpn_ms-crop-1x_coco.py'
           for s in 'tsb'},
        'mmdet:swin-t': 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py',
        'mmdet:swin-s': 'mmdet::swin/mask-rcnn_swin-s-p4-w7_fpn_amp-ms-crop-3x_coco.py',
    },
    'upernet': {
        **{f'inline-swin-{s}': f'{_REPO}/mmseg_configs/inline-swin-{a}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
           for s, a in SWIN_ARCH.items()},
        **{f'mmseg:swin-{s}': f'mmseg::swin/swin-{a}-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'
           for s, a in SWIN_ARCH.items()},
    },
}


@dataclass(frozen=True)
class Name:
    """A parsed model name; ``str(name)`` writes it back in the grammar."""

    library: str
    family: str
    arch: str = ''
    variant: str = ''
    padding_aware: bool = False
    window: int | None = None
    path: str | None = None
    flatten: str | None = None      # FLatten-Swin: 'windows' (as released) or 'global'

    def __str__(self):
        if self.library != OURS:
            body = f'{self.family}-{self.variant or self.arch}' + (f'-w{self.window}' if self.window else '')
            return f'{self.library}:{body}'
        if self.variant:
            return f'{self.family}-{self.arch}-{self.variant}'
        if self.flatten:
            return (f'flatten-{self.family}-{self.arch}' + ('-pa' if self.padding_aware else '')
                    + ('-global' if self.flatten == 'global' else ''))
        return (f'inline-{self.family}-{self.arch}' + ('-pa' if self.padding_aware else '')
                + (f'-w{self.window}' if self.window else '') + (f'@{self.path}' if self.path else ''))

    @property
    def ours(self):
        return self.library == OURS


class OtherLibraryName(ValueError):
    """A bare name of other libraries' models (``swin-t``): ``text``, and ``candidates``, the prefixed names it may
    mean (``mmdet:swin-t``, ...)."""

    def __init__(self, text, candidates):
        super().__init__(f'model {text!r} is another library\'s: say whose, {" or ".join(candidates)}')
        self.text, self.candidates = text, candidates


def _match(library, body):
    for lib, pattern in PATTERNS:
        match = re.fullmatch(pattern, body)
        if lib == library and match:
            groups = {k: v for k, v in match.groupdict().items() if v is not None}
            window = int(groups.pop('window')) if 'window' in groups else None
            if groups.pop('flatten', None):
                groups['flatten'] = 'global' if groups.pop('flatten_global', None) else 'windows'
            return Name(library, window=window, padding_aware=bool(groups.pop('pa', None)), **groups)
    return None


def parse(text):
    """The :class:`Name` of ``text``; ValueError (one message) for a name outside :data:`GRAMMAR` or an unknown
    ``@path``, :class:`OtherLibraryName` (a ValueError) for a bare name of other libraries' models."""
    library, sep, body = text.rpartition(':')
    name = _match(library if sep else OURS, body)
    if name is None and not sep:
        candidates = [f'{lib}:{body}' for lib in dict.fromkeys(lib for lib, _ in PATTERNS if lib != OURS)
                      if _match(lib, body)]
        if candidates:
            raise OtherLibraryName(text, candidates)
    if name is None:
        raise ValueError(f'unknown model {text!r}\n{GRAMMAR}')
    if name.path and name.path not in PATHS:
        raise ValueError(f'model {text!r}: unknown InLine attention path @{name.path}; choose one of {PATHS}')
    return name


def padding_aware_twin(name):
    """The padding-aware twin of one of this package's models (``inline-swin-t@torch`` -> ``inline-swin-t-pa@torch``),
    None for other models and for twins themselves."""
    if not name.ours or name.variant or name.padding_aware:
        return None
    return replace(name, padding_aware=True)


class GlobalSoftmaxAttention(nn.Module):
    """Softmax attention over every token of the map (the global-window Swin baseline); a token mixer
    (``mixer(x, tokens)``, docs/architecture.md#the-one-contract) that needs nothing from the map."""

    def __init__(self, embed_dims, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def forward(self, x, tokens):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))


def _ours(name):
    from .. import InLineCSwinTransformer, InLinePVT, InLineSwinTransformer

    if name.variant == 'stripes':
        return InLineCSwinTransformer(CSWIN_T, attn_type='SSSS', drop_path_rate=0.)
    if name.family == 'cswin':
        return InLineCSwinTransformer(SWIN_ARCH[name.arch], drop_path_rate=0., padding_aware=name.padding_aware)
    if name.variant == 'global':
        model = InLineSwinTransformer('tiny', attn_type='IIII', drop_path_rate=0.)
        for stage in model.layers:
            for block in stage.blocks:
                block.attn = GlobalSoftmaxAttention(block.attn.embed_dims, block.attn.num_heads)
        return model
    if name.family == 'pvt':
        return InLinePVT(PVT_ARCH[name.arch], drop_path_rate=0., padding_aware=name.padding_aware)
    if name.flatten:
        return InLineSwinTransformer(f'flatten-{SWIN_ARCH[name.arch]}', drop_path_rate=0.,
                                     padding_aware=name.padding_aware, flatten_global=name.flatten == 'global')
    return InLineSwinTransformer(SWIN_ARCH[name.arch], drop_path_rate=0., padding_aware=name.padding_aware,
                                 inline_window_size=name.window, window_size=max(7, (name.window or 0) // 8))


def _mmdet(name):
    from .. import InLinePVT, InLineSwinTransformer

    if name.family == 'swin':
        from mmdet.models.backbones import SwinTransformer

        arch = InLineSwinTransformer.arch_zoo[SWIN_ARCH[name.arch]]
        return SwinTransformer(embed_dims=arch['embed_dims'], depths=arch['depths'], num_heads=arch['num_heads'],
                               window_size=7, drop_path_rate=0.)
    from mmdet.models.backbones import PyramidVisionTransformer

    return PyramidVisionTransformer(num_layers=InLinePVT.arch_zoo[f'pvt-v1-{PVT_ARCH[name.arch]}']['depths'],
                                    drop_path_rate=0.)


def _timm(name, size):
    import timm

    if name.family == 'pvt':
        return timm.create_model('pvt_v2_b1', features_only=True, drop_path_rate=0.)
    if name.window is None:
        return timm.create_model('swin_tiny_patch4_window7_224', img_size=size, features_only=True, drop_path_rate=0.)
    from timm.models.swin_transformer import SwinTransformer

    model = SwinTransformer(img_size=size, window_size=name.window, embed_dim=96, depths=(2, 2, 6, 2),
                            num_heads=(3, 6, 12, 24), num_classes=0, drop_path_rate=0.)
    model.forward = model.forward_features  # the trunk only, like the other backbones
    return model


def build_backbone(name, size):
    """The backbone ``name`` (a :class:`Name` or its text) for inputs of ``size`` = (H, W) pixels (timm's Swin is
    built for one input size), random weights, drop path off."""
    name = parse(name) if isinstance(name, str) else name
    if name.library == 'mmseg':
        raise ValueError(f'{name}: mmseg\'s Swin is benchmarked inside UperNet (--task upernet); as a backbone use '
                         'mmdet:swin-* (the same network)')
    if name.ours:
        return _ours(name)
    return _mmdet(name) if name.library == 'mmdet' else _timm(name, size)


class TaskForward(nn.Module):
    """A whole detector/segmentor in mmengine's ``tensor`` mode, called on an image batch."""

    def __init__(self, model, sample_cls):
        super().__init__()
        self.model, self.sample_cls = model, sample_cls

    def forward(self, x):
        H, W = x.shape[-2:]
        meta = dict(img_shape=(H, W), ori_shape=(H, W), pad_shape=(H, W), batch_input_shape=(H, W),
                    scale_factor=(1.0, 1.0))
        return self.model(x, data_samples=[self.sample_cls(metainfo=meta) for _ in range(len(x))], mode='tensor')


def task_config(task, name):
    """The config of model ``name`` inside ``task`` ('mask-rcnn' or 'upernet'); ValueError naming the choices."""
    configs = TASK_CONFIGS[task]
    if str(name) not in configs:
        raise ValueError(f'no {task} config for {str(name)!r}; choose from {", ".join(configs)}')
    return configs[str(name)]


def build_task_model(task, name):
    """The whole ``task`` model of ``name`` from its config (:data:`TASK_CONFIGS`), as a :class:`TaskForward`."""
    from ..openmmlab.task_tools import build_task_model as build

    config = task_config(task, name)
    if '::' in config:           # mmdet's or mmseg's own config: Config.fromfile does not resolve the scope
        from mmengine.hub import get_config

        config = get_config(config)
    _, model, sample_cls = build(config)
    return TaskForward(model, sample_cls)
