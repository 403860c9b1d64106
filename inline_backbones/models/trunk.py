"""The trunk every model of every family is: a family's table (:class:`Family`) built into stages, and the
stage loop. The mmdet/mmseg backbone (:class:`~.backbone.Backbone`) and the timm classifier
(:class:`~.classifier.Classifier`) are thin wrappers around it, side by side.

A trunk is ``stem`` (the family's: Swin's patch embedding, or nothing for PVT, whose stages embed) followed by
``layers``, a list of :class:`~.stages.Stage`; stage ``i`` outputs ``stage_dims[i]`` channels at stride
``stride * 2**i``. What differs between families is data and two functions in the table: presets, layout
letters, options, how to build the stem and stages, how to run the stem, the checkpoint filter. Everything
else (the arch check, stochastic depth ``dpr = linspace(0, drop_path_rate, sum(depths))`` split over the
stages, the stage loop, the init, the freezing of the first stages) is here, once.
"""
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from timm.models._manipulate import adapt_input_conv
from torch import nn

from .. import frameworks
from .errors import ModelArgumentError
from .layout import parse_attn_layout
from .stages import iter_stages
from .tokens.graph_mode import refuse_scripting

ARCH_REQUIRED = ('embed_dims', 'depths', 'num_heads')

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Family:
    """A model family as a table.

    Attributes:
        name: What errors call the family, e.g. ``'InLine-Swin'``.
        arch_zoo: Presets by name: dicts with ``embed_dims``, ``depths``, ``num_heads``, ``attn_type`` and the
            family's other arch keys.
        arch_defaults: The optional keys of a custom arch dict and their values when left out.
        per_stage: The arch keys that are lists with one entry per stage (``depths`` and ``num_heads`` at least).
        letters: Layout letter -> mixer name (:func:`~.layout.parse_attn_layout`).
        mixed: The letters ``(a, b)`` of a mixed stage (layout letter ``M``, e.g. ``IIMS2``): its first k blocks
            ``a``'s mixer, the rest ``b``'s.
        options: The family's keyword options and their defaults (the models' ``**options``).
        build: ``build(trunk, arch, layout, drop_path_rates, in_channels, with_cp, **options)`` adds the stem's
            modules to ``trunk`` and returns ``(stages, stage_dims, stride)``: the :class:`~.stages.Stage` list,
            each stage's output width, the first stage's stride.
        stem: ``stem(trunk, x, regions) -> (x, tokens)``: what the first stage takes, from the checked and masked
            images, with its :class:`~.token_map.TokenMap` (``regions``: each image's pixels in padding-aware
            mode, else None).
        checkpoint_filter: ``filter(state_dict, model)``, the family's key filter (released, timm, mmdet keys).
        stem_modules: Attributes of the trunk that ``frozen_stages >= 0`` freezes (the stem's modules).
        output_norms: Stage outputs go through a LayerNorm (``norm{i}`` of the backbone; the classifier's
            ``norm`` is the last one), as in Swin; False: the stages' tokens as they are, as in PVT.
        norm_eps: The epsilon of those output norms (LayerNorm's 1e-5; DeiT's 1e-6).
        prefix_tokens: Tokens that are no cell of the map and come before its tokens in every stage (DeiT's
            class token: 1), made by the stem and carried by the token map (``TokenMap.prefix_tokens``); the
            stage maps (:func:`~.stages.to_nhwc`) leave them out. 0: the tokens are the map's.
        global_pool: The classifier's default pooling: ``'avg'`` (the mean over the map) or ``'token'`` (the first
            prefix token, DeiT's class token).
        position_params: Suffixes of parameter names drawn from a truncated normal (std 0.02) at init and
            excluded from weight decay (position tables and embeddings).
        pretrained_cfg: The family's entries of timm's pretrained cfgs (mean/std, crop, ...); its ``first_conv``
            names the convs that take the images (their weights adapt to ``in_channels``: :func:`adapt_first_conv`).
    """

    name: str
    arch_zoo: dict
    letters: dict
    mixed: tuple
    options: dict
    build: Callable
    stem: Callable
    checkpoint_filter: Callable
    arch_defaults: dict = field(default_factory=dict)
    per_stage: tuple = ('depths', 'num_heads')
    stem_modules: tuple = ()
    output_norms: bool = False
    norm_eps: float = 1e-5
    prefix_tokens: int = 0
    global_pool: str = 'avg'
    position_params: tuple = ()
    pretrained_cfg: dict = field(default_factory=dict)

    def resolve_arch(self, arch):
        """A copy of the preset named ``arch``, or of the custom dict ``arch`` with the defaults filled in;
        :class:`~.errors.ModelArgumentError` naming what is wrong."""
        if isinstance(arch, str):
            if arch not in self.arch_zoo:
                raise ModelArgumentError(f'unknown arch {arch!r} of {self.name}; choose one of '
                                         f'{sorted(self.arch_zoo)} or pass a dict')
            return copy.deepcopy(self.arch_zoo[arch])
        if not isinstance(arch, dict):
            raise ModelArgumentError(f'arch must be a str or a dict, got {type(arch).__name__}')
        missing = set(ARCH_REQUIRED) - set(arch)
        if missing:
            raise ModelArgumentError(f'custom arch dict lacks {sorted(missing)}')
        known = {*ARCH_REQUIRED, *self.arch_defaults, 'attn_type'}
        unknown = set(arch) - known
        if unknown:
            raise ModelArgumentError(f'custom arch dict has unknown keys {sorted(unknown)}; known: {sorted(known)}')
        arch = {**copy.deepcopy(self.arch_defaults), **copy.deepcopy(dict(arch))}
        lengths = {k: len(arch[k]) for k in self.per_stage}
        if len(set(lengths.values())) != 1:
            raise ModelArgumentError(f'arch lists must have one entry per stage, got lengths {lengths}')
        return arch

    def check_options(self, options, owner):
        """``options`` with the family's defaults filled in; :class:`~.errors.ModelArgumentError` naming an unknown
        one, and where an arch key given as an option (``embed_dims=...``) goes instead."""
        unknown = set(options) - set(self.options)
        if unknown:
            arch_keys = [k for k in (*ARCH_REQUIRED, *self.arch_defaults) if k in unknown]
            where = ''
            if arch_keys:
                presets = ', '.join(repr(name) for name in self.arch_zoo)
                optional = ''.join(f', {k}=[...]' for k in self.arch_defaults)
                where = (f'. The arch holds {", ".join(arch_keys)}: name a preset (arch={presets}) or give a size of '
                         f'your own, arch=dict(embed_dims=..., depths=[...], num_heads=[...]{optional}) (no released '
                         'checkpoint fits a size of your own: init_cfg=None)')
            raise ModelArgumentError(f'{owner} got unexpected keyword arguments {sorted(unknown)}; the {self.name} '
                                     f'options are {sorted(self.options)}{where}')
        return {**self.options, **options}


class Trunk(nn.Module):
    """The stem and stages of a family's model (the class attribute ``family``, set by the class keyword
    ``family=``: ``class X(Backbone, family=TABLE)``).

    Args:
        arch (str | dict): A preset of ``family.arch_zoo`` or a custom dict (:meth:`Family.resolve_arch`).
        attn_type (str, optional): Layout string overriding the arch's, e.g. ``'IIIS'``.
        in_channels (int): Input channels.
        drop_path_rate (float): Stochastic depth, increasing linearly from 0 over all blocks.
        with_cp (bool): Gradient checkpointing of every block.
        padding_aware (bool): Each image of a zero-padded batch sees only its own region
            (:mod:`inline_backbones.regions`, :func:`~.stages.iter_stages`).
        options (dict): The family's options (``family.options``).
        **kwargs: For the next class of a wrapper's bases.
    """

    family: Family = None
    __prepare_scriptable__ = refuse_scripting     # torch.jit.script(model): the reason and the alternatives

    def __init_subclass__(cls, family=None, **kwargs):
        """``class X(Backbone, family=TABLE)``: the subclass's family table, and its presets as ``arch_zoo``
        (mmpretrain's name for them)."""
        super().__init_subclass__(**kwargs)
        if family is not None:
            cls.family, cls.arch_zoo = family, family.arch_zoo

    def __init__(self, *, arch, attn_type, in_channels, drop_path_rate, with_cp, padding_aware=False, options=None,
                 **kwargs):
        super().__init__(**kwargs)
        family = self.family
        arch = family.resolve_arch(arch)
        attn_type = arch.get('attn_type') if attn_type is None else attn_type
        if attn_type is None:
            example = next(iter(family.arch_zoo.values()))['attn_type']
            raise ModelArgumentError(f'a custom arch needs an attention layout: give attn_type, e.g. "{example}"')
        depths = arch['depths']
        layout = parse_attn_layout(attn_type, depths, family.letters, family.mixed)
        options = family.check_options(options or {}, type(self).__name__)
        dpr = torch.linspace(0, drop_path_rate, sum(depths), device='cpu')  # on the host also under a meta device
        drop_path_rates = [rates.tolist() for rates in dpr.split(depths)]

        self.arch = arch
        self.attn_type = attn_type
        self.drop_path_rate = drop_path_rate
        self.in_channels = in_channels
        self.padding_aware = bool(padding_aware)
        stages, self.stage_dims, self.stride = family.build(self, arch, layout, drop_path_rates, in_channels,
                                                            with_cp, **options)
        self.layers = nn.ModuleList(stages)
        self.min_input_size = self.stride * 2 ** (len(stages) - 1)

    @property
    def checkpoint_filter(self):
        """The key filter of :func:`~inline_backbones.checkpoints.loading.load_pretrained`: the family's, then
        :func:`adapt_first_conv` (a file of 3 input channels into a model of ``in_channels`` others)."""
        return filter_checkpoint

    def stem(self, x, regions):
        """The family's stem: what the first stage takes, with its token map."""
        return self.family.stem(self, x, regions)

    def iter_stages(self, x, image_shapes=None, stop=None):
        """Each stage's output tokens (B, N, C) and map, up to stage ``stop`` (:func:`~.stages.iter_stages`)."""
        return iter_stages(self, x, image_shapes, stop)

    def init_trunk_weights(self):
        """From scratch: linears by :func:`init_linear`, LayerNorms weight 1 and bias 0, the family's
        ``position_params`` by :func:`trunc_normal_init`."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                init_linear(m)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith(self.family.position_params):
                trunc_normal_init(p)

    def freeze(self, frozen_stages, norms=None):
        """Eval mode and no gradients for the stem's modules (``frozen_stages >= 0``) and the first
        ``frozen_stages`` stages, each with its output norm ``norms[i]`` where there is one."""
        if frozen_stages < 0:
            return
        modules = [getattr(self, name) for name in self.family.stem_modules]
        for i in range(frozen_stages):
            modules += [self.layers[i]] + ([norms[i]] if norms and norms.get(i) is not None else [])
        for m in modules:
            m.eval()
            for p in m.parameters():
                p.requires_grad = False

    def set_grad_checkpointing(self, enable=True):
        """Gradient checkpointing of every block (the ``with_cp`` argument)."""
        for stage in self.layers:
            for block in stage.blocks:
                block.with_cp = enable

    def no_weight_decay(self):
        """Names of the parameters not decayed in training (the family's ``position_params``)."""
        return {n for n, _ in self.named_parameters() if n.endswith(self.family.position_params)}


def trunc_normal_init(tensor):
    """``tensor`` drawn, in place, from N(0, 0.02^2) truncated to [-2, 2] (torch's ``trunc_normal_``; Swin's and
    timm's init of linear weights and position parameters)."""
    nn.init.trunc_normal_(tensor, std=.02)


def init_linear(linear):
    """A linear from scratch, the trunk's and a classifier's new head alike: ``weight`` by
    :func:`trunc_normal_init`, ``bias = 0``."""
    trunc_normal_init(linear.weight)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


def first_conv_weights(model):
    """The weight keys of ``model``'s convs that take the images: ``first_conv`` of its family's pretrained cfg
    (timm's entry; a name or a tuple of names), each with ``.weight``."""
    names = model.family.pretrained_cfg.get('first_conv') or ()
    return [f'{name}.weight' for name in ((names,) if isinstance(names, str) else names)]


def adapt_first_conv(state_dict, model):
    """``state_dict`` (in ``model``'s keys) with the weights of the first convs (:func:`first_conv_weights`) fitted
    to the model's input channels, as timm does for its own models (its pretrained cfg's ``first_conv``): where the
    file's weight ``W`` (O, 3, k, k) differs from the model's only in its input channels, it becomes timm's
    ``adapt_input_conv(n, W)``:

    * n = 1: ``W'[:, 0] = sum_c W[:, c]``, so a grey image ``x`` gives exactly what the file's RGB model gives for
      ``x`` repeated to three channels (the conv is linear in its input);
    * n != 3: ``W'[:, i] = (3 / n) W[:, i mod 3]`` (the RGB weights repeated, scaled to keep the output's scale).

    Each adaptation is logged: by the backbone (which has ``init_cfg``) into
    :func:`~inline_backbones.frameworks.logger` (under OpenMMLab mmengine's current logger, a Runner's log), by a timm
    classifier into this module's ``logging`` logger, as timm logs its own. A weight timm cannot adapt (a file of
    other than 3 channels into another count) is left as it is, for the strict check to name. Modifies and returns
    ``state_dict`` (a filter's result, e.g. a :class:`~inline_backbones.checkpoints.loading.FilteredStateDict`, keeps
    its type).
    """
    own = model.state_dict()
    logger = frameworks.logger() if hasattr(model, 'init_cfg') else _logger
    for key in first_conv_weights(model):
        weight, target = state_dict.get(key), own.get(key)
        if weight is None or target is None or weight.dim() != 4 or weight.shape == target.shape:
            continue
        if weight.shape[:1] + weight.shape[2:] != target.shape[:1] + target.shape[2:]:
            continue                                # another arch: the strict check names the shapes
        try:
            state_dict[key] = adapt_input_conv(target.shape[1], weight)
        except NotImplementedError:
            continue                                # not RGB: the strict check names the shapes
        how = ('summed over the channels' if target.shape[1] == 1 else
               f'channels repeated, scaled by {weight.shape[1]}/{target.shape[1]}')
        logger.info(f'checkpoint {key} has {weight.shape[1]} input channels, the model {target.shape[1]}: adapted by '
                    f"timm's adapt_input_conv ({how})")
    return state_dict


def filter_checkpoint(state_dict, model):
    """A trunk's checkpoint filter: ``model.family.checkpoint_filter`` (the file's keys in the model's), then
    :func:`adapt_first_conv` (the images' convs to the model's input channels)."""
    return adapt_first_conv(model.family.checkpoint_filter(state_dict, model), model)
