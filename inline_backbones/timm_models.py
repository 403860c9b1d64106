"""The InLine-Swin ImageNet classifiers as timm models: ``inline_swin_tiny``, ``inline_swin_small``,
``inline_swin_base`` (registered in timm's model registry when ``inline_backbones`` is imported).

The classifier is the backbone :class:`InLineSwinTransformer` (the same trunk and keys, run by the same
stage loop, :func:`~inline_backbones.models.stages.iter_stages`) followed by the released model's head:
with ``t`` the tokens (B, N, C) out of the last stage, ``logits = head(mean_N(norm(t)))`` (LayerNorm
``norm``, average over the N tokens, Linear ``head``). As in timm's Swin, ``forward_features`` returns the
normalised last map NHWC (B, H, W, C) and ``forward_head`` pools it. The models trace with torch.fx through
timm's tracer (``timm.models.create_feature_extractor``; torchvision's with timm's notrace lists: the mixers
and the helpers that branch on sizes are leaves) and export with ``torch.export`` (dynamic sizes);
``torch.jit.script`` is not supported (the layers branch on Python objects such as the token map).
Its state dict holds exactly the keys of the released checkpoints (``patch_embed.*``, ``layers.*``,
``norm.*``, ``head.*``) except the buffers ``relative_position_index`` and ``attn_mask``, which the
model rebuilds (:data:`~inline_backbones.models.swin_checkpoint.RELEASED_BUFFERS`).

Released files load through timm, as released::

    timm.create_model('inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_swin_t.pth'))

timm hands the file to :meth:`InLineSwinClassifier.load_pretrained` (``custom_load`` in the pretrained
cfg), which reads it with the package's safe loader (``weights_only=True``, yacs not needed) and loads
it strictly: anything missing, unexpected or mis-shaped raises
:class:`~inline_backbones.checkpoint.CheckpointMismatchError` naming the keys. ``num_classes=N``
(N != 1000) keeps a new head; ``features_only=True`` gives the NCHW maps of the stages (timm's
``FeatureGetterNet`` over :meth:`InLineSwinClassifier.forward_intermediates`).
"""

import torch
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import register_notrace_function
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from torch import nn

from .checkpoint import extract_state_dict, filter_state_dict
from .checkpoint import load_pretrained as load_pretrained_file
from .models import InLineSwinTransformer
from .models.stages import iter_stages
from .models.swin_checkpoint import checkpoint_filter_fn as swin_checkpoint_filter



@register_notrace_function   # a leaf of fx graphs (also where timm_pvt.py calls it): it reads sizes
@torch.fx.wrap
def to_nhwc(x, tokens):
    """(B, N, C) tokens of the map ``tokens`` -> (B, H, W, C)."""
    return x.view(-1, *tokens.hw_shape, x.shape[-1])


class InLineSwinClassifier(InLineSwinTransformer):
    """InLine-Swin ImageNet classifier: the backbone's trunk, final ``norm``, average pool, ``head``.

    Args:
        embed_dims, depths, num_heads, attn_type: the architecture (see :class:`InLineSwinTransformer`).
        num_classes (int): Classes of ``head``; 0 leaves the pooled features (``head`` is Identity).
        global_pool (str): ``'avg'`` (mean over tokens) or ``''`` (no pooling: per-token logits).
        in_chans (int): Input channels.
        drop_rate (float): Dropout after patch embedding, in MLPs and after attention projections
            (none before the head, as in the released models).
        **kwargs: other :class:`InLineSwinTransformer` arguments (``kernel_func``, ``window_size``,
            ``drop_path_rate``, ``with_cp``, ...).
    """

    def __init__(self, embed_dims=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), attn_type='IIIS',
                 num_classes=1000, global_pool='avg', in_chans=3, drop_rate=0., **kwargs):
        if global_pool not in ('avg', ''):
            raise ValueError(f"global_pool must be 'avg' or '', got {global_pool!r}")
        if kwargs.get('padding_aware'):
            raise ValueError('padding_aware is not supported by the classifier (it pools every token of the '
                             'input): use the InLineSwinTransformer backbone for padded batches of different sizes')
        last = len(depths) - 1
        super().__init__(arch=dict(embed_dims=embed_dims, depths=list(depths), num_heads=list(num_heads)),
                         attn_type=attn_type, in_channels=in_chans, drop_rate=drop_rate, out_indices=(last,),
                         **kwargs)
        # The backbone's output norm of the last stage is the released model's final ``norm``.
        self.norm = self._modules.pop(f'norm{last}')
        self.out_indices = ()
        stride = self.patch_embed.patch_size
        self.feature_info = [dict(num_chs=c, reduction=stride * 2 ** i, module=f'layers.{i}')
                             for i, c in enumerate(self.num_features)]
        # timm's convention from here on: num_features is the width of the pooled features.
        self.num_features = self.head_hidden_size = self.num_features[-1]
        self.num_classes = num_classes
        self.global_pool = global_pool
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
        self.init_weights()

    # ---- timm's classifier interface --------------------------------------------------------------
    def get_classifier(self):
        return self.head

    def reset_classifier(self, num_classes, global_pool=None):
        """A new (truncated-normal) head of ``num_classes`` (0: Identity)."""
        if global_pool is not None:
            if global_pool not in ('avg', ''):
                raise ValueError(f"global_pool must be 'avg' or '', got {global_pool!r}")
            self.global_pool = global_pool
        self.num_classes = num_classes
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
        if num_classes > 0:
            nn.init.trunc_normal_(self.head.weight, std=.02)
            nn.init.zeros_(self.head.bias)

    def set_grad_checkpointing(self, enable=True):
        """Gradient checkpointing of every block (the backbone's ``with_cp``)."""
        for stage in self.layers:
            for block in stage.blocks:
                block.with_cp = enable

    def no_weight_decay(self):
        """Relative position bias tables are not decayed (as in Swin's and InLine's training)."""
        return {n for n, _ in self.named_parameters() if n.endswith('relative_position_bias_table')}

    def forward_features(self, x):
        """(B, C_in, H, W) -> the last stage's normalised map, NHWC (B, H', W', C), as timm's Swin."""
        for out, tokens in iter_stages(self, x):
            pass
        return to_nhwc(self.norm(out), tokens)

    def forward_head(self, x, pre_logits=False):
        """NHWC map -> average over H', W' (``global_pool='avg'``) -> ``head``."""
        if self.global_pool == 'avg':
            x = x.mean(dim=(1, 2))
        return x if pre_logits else self.head(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(self, x, indices=None, norm=False, stop_early=False, output_fmt='NCHW',
                              intermediates_only=False):
        """Stage maps for ``features_only`` (timm's interface): the NCHW (or NHWC) outputs of the stages
        in ``indices`` (before patch merging; the last one through ``norm`` if ``norm``), and unless
        ``intermediates_only`` also the final normalised map (NHWC). With ``intermediates_only`` the stages
        after the last index are skipped (``stop_early`` is implied); otherwise all run."""
        if output_fmt not in ('NCHW', 'NHWC'):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NHWC', got {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.layers), indices)
        last = len(self.layers) - 1
        intermediates = []
        stages = iter_stages(self, x, stop=max_index if intermediates_only else None)
        for i, (out, tokens) in enumerate(stages):
            if i in take_indices:
                y = to_nhwc(self.norm(out) if norm and i == last else out, tokens)
                intermediates.append(y.permute(0, 3, 1, 2).contiguous() if output_fmt == 'NCHW' else y)
        if intermediates_only:
            return intermediates
        return to_nhwc(self.norm(out), tokens), intermediates

    def prune_intermediate_layers(self, indices=1, prune_norm=False, prune_head=True):
        """Drop the stages after the last of ``indices`` (and the final norm / head if asked)."""
        take_indices, max_index = feature_take_indices(len(self.layers), indices)
        self.layers = self.layers[:max_index + 1]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.reset_classifier(0, '')
        return take_indices

    # ---- released checkpoints -----------------------------------------------------------------------
    def load_pretrained(self, path):
        """Load a released file (or an mmengine / bare state dict file) safely and strictly."""
        load_pretrained_file(self, path, filter_fn=swin_checkpoint_filter)


def checkpoint_filter_fn(state_dict, model, source='state dict'):
    """The checkpoint's state dict as ``model`` takes it, checked strictly (timm's ``pretrained_filter_fn``).

    Unwraps ``{'model': ...}`` / ``{'state_dict': ...}`` and ``module.``, then applies the family's filter
    (:func:`inline_backbones.models.swin_checkpoint.checkpoint_filter_fn`: drops the rebuilt buffers and,
    when the file's head has another number of classes than the model's, the file's ``head.*``). Raises
    :class:`CheckpointMismatchError` if any other key is missing, unexpected or mis-shaped.
    """
    return filter_state_dict(model, extract_state_dict(state_dict), source, filter_fn=swin_checkpoint_filter)


def _cfg(**kwargs):
    """Evaluation as in the authors' (Swin's) code: resize the short side to 256 (bicubic), centre crop
    224, ImageNet mean/std; 1000 classes."""
    return {
        'url': '', 'num_classes': 1000, 'input_size': (3, 224, 224), 'pool_size': (7, 7),
        'crop_pct': 224 / 256, 'crop_mode': 'center', 'interpolation': 'bicubic', 'fixed_input_size': False,
        'mean': IMAGENET_DEFAULT_MEAN, 'std': IMAGENET_DEFAULT_STD,
        'first_conv': 'patch_embed.proj', 'classifier': 'head',
        'custom_load': True,  # timm calls model.load_pretrained(file): our safe, strict loader
        'license': 'mit', 'origin_url': 'https://github.com/LeapLabTHU/InLine', 'paper_ids': 'arXiv:2412.06590',
        'paper_name': 'Bridging the Divide: Reconsidering Softmax and Linear Attention',
        **kwargs,
    }


default_cfgs = generate_default_cfgs({
    'inline_swin_tiny.in1k': _cfg(),
    'inline_swin_small.in1k': _cfg(),
    'inline_swin_base.in1k': _cfg(),
})


def _create_inline_swin(variant, pretrained=False, pretrained_cfg_overlay=None, **kwargs):
    out_indices = kwargs.pop('out_indices', tuple(range(len(kwargs['depths']))))
    # A file (or url) the user names is a released checkpoint: keep our loader for it. timm resets
    # ``custom_load`` when an overlay names a weight source, unless the overlay sets it explicitly.
    pretrained_cfg_overlay = {'custom_load': True, **(pretrained_cfg_overlay or {})}
    return build_model_with_cfg(
        InLineSwinClassifier, variant, pretrained, pretrained_cfg_overlay=pretrained_cfg_overlay,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(feature_cls='getter', out_indices=out_indices),
        **kwargs)


def _arch(preset, kwargs):
    """The preset of ``InLineSwinTransformer.arch_zoo`` with keyword overrides on top."""
    return {**InLineSwinTransformer.arch_zoo[preset], **kwargs}


@register_model
def inline_swin_tiny(pretrained=False, **kwargs):
    """InLine-Swin-T @ 224: embed 96, depths 2-2-6-2, layout IIIS; ImageNet-1k top-1 82.4 (paper)."""
    return _create_inline_swin('inline_swin_tiny', pretrained, **_arch('tiny', kwargs))


@register_model
def inline_swin_small(pretrained=False, **kwargs):
    """InLine-Swin-S @ 224: embed 96, depths 2-2-18-2, layout IISS; ImageNet-1k top-1 83.6 (paper)."""
    return _create_inline_swin('inline_swin_small', pretrained, **_arch('small', kwargs))


@register_model
def inline_swin_base(pretrained=False, **kwargs):
    """InLine-Swin-B @ 224: embed 128, depths 2-2-18-2, layout IIMS2; ImageNet-1k top-1 84.1 (paper)."""
    return _create_inline_swin('inline_swin_base', pretrained, **_arch('base', kwargs))
