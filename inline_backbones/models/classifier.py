"""timm's classifier of every family: :class:`Classifier`, a thin wrapper around the family's trunk whose head's
input norm is the last stage's output norm where the family has them (InLine-Swin's final LayerNorm; nothing for
InLine-PVT), its builder (:func:`create_classifier`), which each family module's model functions call, and the
timm ``default_cfgs`` of a family's released models (:func:`released_default_cfgs`).

A classifier is ``logits = head(mean_{H,W}(norm(map)))`` with ``map`` the last stage's tokens, run by the
shared stage loop (:func:`~.stages.iter_stages`). As in timm's Swin,
``forward_features`` returns the normalised last map NHWC (B, H, W, C) and ``forward_head`` pools it;
``features_only=True`` gives the stages' NCHW maps through :meth:`forward_intermediates` (timm's
``FeatureGetterNet``). A family with a class token (``Family.prefix_tokens``, InLine-DeiT) is read as timm's
ViT: ``forward_features`` returns every token (B, 1 + N, C) (``output_fmt`` ``'NLC'``), ``global_pool='token'``
(its default) takes the class token, ``'avg'`` the mean of the map's tokens; its intermediates are its blocks', as
timm's ViT's (``InLineDeiTClassifier`` overrides the feature interface), without the class token. The models trace
with torch.fx through timm's tracer (the mixers and the helpers that branch on sizes are leaves) and export with
``torch.export``; ``torch.jit.script`` is refused with the reason (the layers branch on Python objects such as the
token map). Released files load through timm as released (``pretrained=True, pretrained_cfg_overlay=dict(file=PATH)``):
timm hands the file to :meth:`Classifier.load_pretrained` (``custom_load``), the package's safe and strict loader.
"""
from collections import deque

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import build_model_with_cfg, generate_default_cfgs
from timm.models._features import feature_take_indices
from torch import nn

from ..checkpoints.loading import download_checkpoint, extract_state_dict, filter_state_dict, load_pretrained
from ..checkpoints.released import arch_checkpoints
from .errors import ModelArgumentError
from .stages import to_nhwc
from .trunk import ARCH_REQUIRED, Trunk, adapt_first_conv, first_conv_weights, init_linear


def check_img_size(img_size):
    """timm's ``img_size`` (an int or an (H, W) pair of positive ints, or None) as a pair or None;
    :class:`~.errors.ModelArgumentError` naming the value. The pyramid families take any input size (no parameter
    is sized by it); InLine-DeiT's position grid is (its ``dynamic_img_size`` decides what other sizes get)."""
    if img_size is None:
        return None
    pair = (img_size, img_size) if isinstance(img_size, int) else img_size
    if (not isinstance(pair, (tuple, list)) or len(pair) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)):
        raise ModelArgumentError(f'img_size must be an int or an (H, W) pair of ints, got {img_size!r}')
    if min(pair) < 1:
        raise ModelArgumentError(f'img_size must be positive, got {img_size!r}')
    return tuple(pair)


def check_global_pool(global_pool, prefix_tokens=0):
    """``global_pool`` if the classifier takes it: ``'avg'``, ``''`` and, with prefix tokens, ``'token'``."""
    if global_pool in ('avg', '') or (prefix_tokens and global_pool == 'token'):
        return global_pool
    choices = "'token', 'avg' or ''" if prefix_tokens else "'avg' or ''"
    raise ModelArgumentError(f'global_pool must be {choices}, got {global_pool!r}')


class Classifier(Trunk):
    """A family's trunk as a timm ImageNet classifier (a family subclass: ``class X(Classifier, family=TABLE)``):
    ``logits = head(mean_{H,W}(norm(map)))``, ``norm`` the last stage's output norm where the family has them.

    Args:
        arch (str | dict, optional): A preset of the family (default: its first) or a custom arch dict.
        num_classes (int): Classes of ``head``; 0 leaves the pooled features (``head`` is Identity).
        global_pool (str, optional): ``'avg'`` (mean over the map), ``'token'`` (the class token, where the family
            has one) or ``''`` (no pooling: per-position logits). None: the family's (``Family.global_pool``).
        in_chans (int): Input channels. A released (RGB) file loads into another count through timm's
            ``adapt_input_conv`` of the first conv (:func:`~.trunk.adapt_first_conv`).
        img_size (int | tuple[int, int], optional): timm's argument, checked to be a size. Where the family's arch
            has an ``img_size`` (InLine-DeiT: the grid of its position embedding and, without its
            ``dynamic_img_size``, the one input size it takes), it sets it, as in timm's ViT.
            Otherwise it has no effect: the model takes any input size (InLine attention is global over the map,
            window attention pads to whole windows, PVT's position embeddings are resized to each map), so no
            parameter depends on it; timm's pretrained cfg keeps the released models' 224 x 224, as timm's Swin
            keeps its own.
        attn_type, drop_path_rate, with_cp: the trunk's (:class:`~.trunk.Trunk`).
        **kwargs: keys of the arch (``embed_dims``, ``depths``, ``num_heads``, ... as timm's model functions pass
            them: they override the preset's) and the family's options (``drop_rate``, ``kernel_func``, ...).
    """

    # forward_features returns NHWC maps, as timm's Swin; timm's tests and users read the layout from here.
    output_fmt = 'NHWC'

    def __init__(self, arch=None, num_classes=1000, global_pool=None, in_chans=3, img_size=None, attn_type=None,
                 drop_path_rate=0.1, with_cp=False, **kwargs):
        global_pool = check_global_pool(self.family.global_pool if global_pool is None else global_pool,
                                        self.family.prefix_tokens)
        img_size = check_img_size(img_size)
        if kwargs.pop('padding_aware', False):
            raise ValueError('padding_aware is not supported by the classifier (it pools every token of the input): '
                             'use the mmdet/mmseg backbone for padded batches of different sizes')
        family = self.family
        arch = family.resolve_arch(next(iter(family.arch_zoo)) if arch is None else arch)
        arch.update({k: kwargs.pop(k) for k in [*ARCH_REQUIRED, *family.arch_defaults] if k in kwargs})
        if img_size is not None and 'img_size' in family.arch_defaults:
            arch['img_size'] = img_size
        super().__init__(arch=arch, attn_type=attn_type, in_channels=in_chans, drop_path_rate=drop_path_rate,
                         with_cp=with_cp, options=kwargs)
        self.feature_info = [dict(num_chs=c, reduction=self.stride * 2 ** i, module=f'layers.{i}')
                             for i, c in enumerate(self.stage_dims)]
        self.num_features = self.head_hidden_size = self.stage_dims[-1]
        self.num_prefix_tokens = family.prefix_tokens
        if self.num_prefix_tokens:
            self.output_fmt = 'NLC'      # forward_features: every token, as timm's ViT
        self.norm = nn.LayerNorm(self.num_features, eps=family.norm_eps) if family.output_norms else nn.Identity()
        self.num_classes = num_classes
        self.global_pool = global_pool
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
        self.init_trunk_weights()

    def get_classifier(self):
        return self.head

    def reset_classifier(self, num_classes, global_pool=None):
        """A new head of ``num_classes`` (0: Identity), initialised as the trunk's linears
        (:func:`~.trunk.init_linear`)."""
        if global_pool is not None:
            self.global_pool = check_global_pool(global_pool, self.num_prefix_tokens)
        self.num_classes = num_classes
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
        if num_classes > 0:
            init_linear(self.head)

    def forward_features(self, x):
        """(B, C_in, H, W) -> the last stage's normalised map, NHWC (B, H', W', C); with prefix tokens every
        normalised token, NLC (B, P + H'W', C)."""
        out, tokens = deque(self.iter_stages(x), maxlen=1).pop()    # run every stage, keep the last output
        return self._final(out, tokens)

    def _final(self, out, tokens):
        """The last stage's tokens as ``forward_features`` returns them."""
        out = self.norm(out)
        return out if self.num_prefix_tokens else to_nhwc(out, tokens)

    def forward_head(self, x, pre_logits=False):
        """``forward_features``' output -> the class token (``global_pool='token'``) or the average over the map
        (``'avg'``: H', W'; with prefix tokens the map's tokens) -> ``head``."""
        if self.global_pool == 'token':
            x = x[:, 0]
        elif self.global_pool == 'avg':
            x = x[:, self.num_prefix_tokens:].mean(dim=1) if self.num_prefix_tokens else x.mean(dim=(1, 2))
        return x if pre_logits else self.head(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(self, x, indices=None, norm=False, stop_early=False, output_fmt='NCHW',
                              intermediates_only=False):
        """Stage maps for ``features_only`` (timm's interface): the NCHW (or NHWC) outputs of the stages
        in ``indices`` (the last one through ``norm`` if ``norm``; prefix tokens left out), and unless
        ``intermediates_only`` also ``forward_features``' output. With ``intermediates_only`` the stages after the
        last index are skipped (``stop_early`` is implied); otherwise all run."""
        if output_fmt not in ('NCHW', 'NHWC'):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NHWC', got {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.layers), indices)
        last = len(self.layers) - 1
        intermediates = []
        for i, (out, tokens) in enumerate(self.iter_stages(x, stop=max_index if intermediates_only else None)):
            if i in take_indices:
                y = to_nhwc(self.norm(out) if norm and i == last else out, tokens)
                intermediates.append(y.permute(0, 3, 1, 2).contiguous() if output_fmt == 'NCHW' else y)
        if intermediates_only:
            return intermediates
        return self._final(out, tokens), intermediates

    def prune_intermediate_layers(self, indices=1, prune_norm=False, prune_head=True):
        """Drop the stages after the last of ``indices`` (and the final norm / head if asked)."""
        take_indices, max_index = feature_take_indices(len(self.layers), indices)
        self.layers = self.layers[:max_index + 1]
        self.prune_top(prune_norm, prune_head)
        return take_indices

    def prune_top(self, prune_norm, prune_head):
        """What pruning drops after the features: the final norm (Identity) if ``prune_norm``, the head and its
        pooling (``reset_classifier(0, '')``) if ``prune_head``."""
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.reset_classifier(0, '')

    @classmethod
    def default_out_indices(cls, depths):
        """``features_only``'s default ``out_indices`` for a model of ``depths``: every stage (timm's own default is
        5 stages)."""
        return tuple(range(len(depths)))

    def load_pretrained(self, path):
        """Load a released file (or an mmengine / bare state dict file) safely and strictly, through the
        family's ``checkpoint_filter``."""
        load_pretrained(self, path)


def checkpoint_filter_fn(state_dict, model):
    """timm's ``pretrained_filter_fn``: unwrap ``{'model': ...}`` / ``{'state_dict': ...}`` and ``module.``,
    apply the model's family filter, check strictly
    (:class:`~inline_backbones.checkpoints.loading.CheckpointMismatchError`) with the first conv adapted to the model's
    input channels (:func:`~.trunk.adapt_first_conv`), and return that conv as the file has it: timm's
    ``load_pretrained`` adapts its pretrained cfg's ``first_conv`` itself after this filter (by the same
    ``adapt_input_conv``), so adapting it here too would adapt it twice."""
    as_in_file = {}

    def family_filter(state_dict, model):
        filtered = model.family.checkpoint_filter(state_dict, model)
        as_in_file.update((k, filtered[k]) for k in first_conv_weights(model) if k in filtered)
        return adapt_first_conv(filtered, model)

    checked = filter_state_dict(model, extract_state_dict(state_dict), filter_fn=family_filter)
    checked.update(as_in_file)
    return checked


TIMM_HINT = "timm.create_model(..., pretrained=True, pretrained_cfg_overlay=dict(file=PATH))"


def pretrained_cfg(family, url, **overrides):
    """timm's pretrained cfg of a released ImageNet-1k model of ``family``: what the released models share (224
    input, 7 x 7 last map, crop 224/256 bicubic, ImageNet mean/std, ``head``, our loader, the paper), then the
    family's entries (``Family.pretrained_cfg``: its crop mode and first conv), then ``overrides`` (another paper's
    models on the family's trunk: their origin and paper)."""
    return {
        'url': url, 'num_classes': 1000, 'input_size': (3, 224, 224), 'pool_size': (7, 7), 'crop_pct': 224 / 256,
        'interpolation': 'bicubic', 'fixed_input_size': False, 'mean': IMAGENET_DEFAULT_MEAN,
        'std': IMAGENET_DEFAULT_STD, 'classifier': 'head',
        'custom_load': True,  # timm calls model.load_pretrained(file): our safe, strict loader
        'license': 'mit', 'origin_url': 'https://github.com/LeapLabTHU/InLine', 'paper_ids': 'arXiv:2412.06590',
        'paper_name': 'Bridging the Divide: Reconsidering Softmax and Linear Attention',
        **family.pretrained_cfg, **overrides,
    }


def create_classifier(cls, variant, pretrained=False, pretrained_cfg_overlay=None, **kwargs):
    """timm's ``build_model_with_cfg`` for our classifiers: features through ``forward_intermediates``, and a
    file (or url) the user names loads with our loader (timm resets ``custom_load`` when an overlay names a
    weight source, unless the overlay sets it explicitly).

    ``pretrained=True`` with a ``url`` (the released link by default) downloads it as the mmengine route does
    (:func:`~inline_backbones.checkpoints.loading.download_checkpoint`: torch's hub cache, a file named by the link's
    hash, kept only if it loads safely as a checkpoint, a timeout, errors that say what to do) and hands timm the
    local file. ``kwargs``: the classifier's (``arch``: the preset of ``variant``), timm's (``features_only``...)."""
    from timm.models._builder import resolve_pretrained_cfg

    depths = kwargs.get('depths') or cls.family.resolve_arch(kwargs['arch'])['depths']
    pretrained_cfg_overlay = {'custom_load': True, **(pretrained_cfg_overlay or {})}
    if pretrained:
        cfg = resolve_pretrained_cfg(variant, pretrained_cfg=kwargs.get('pretrained_cfg'),
                                     pretrained_cfg_overlay=pretrained_cfg_overlay)
        url = cfg.url[0] if isinstance(cfg.url, (tuple, list)) else cfg.url
        if url and not cfg.file and not cfg.state_dict and not cfg.hf_hub_id:
            pretrained_cfg_overlay['file'] = download_checkpoint(url, hint=TIMM_HINT)
    return build_model_with_cfg(
        cls, variant, pretrained, pretrained_cfg_overlay=pretrained_cfg_overlay,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(feature_cls='getter', out_indices=cls.default_out_indices(depths)),   # out_indices= wins
        **kwargs)


def released_default_cfgs(cls, prefix, cfg=None, arch_cfgs=None):
    """timm's ``default_cfgs`` of a family's released models (those named ``{prefix}{arch}`` in
    :mod:`inline_backbones.checkpoints.released`): :func:`pretrained_cfg` of each one's link under
    ``{prefix}{arch}.in1k``, with the entries ``cfg`` overrides, then those ``arch_cfgs[arch]`` overrides for that
    model alone (e.g. its input size). The family module sets it as its ``default_cfgs`` before its model functions,
    where timm's ``register_model`` finds it."""
    return generate_default_cfgs({
        f'{prefix}{arch}.in1k': pretrained_cfg(cls.family, url, **(cfg or {}), **(arch_cfgs or {}).get(arch, {}))
        for arch, url in arch_checkpoints(prefix).items()})
