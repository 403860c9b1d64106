"""The InLine-PVT ImageNet classifiers as timm models: ``inline_pvt_{tiny,small,medium,large}`` (registered in
timm's model registry when ``inline_backbones`` is imported).

The classifier is the backbone :class:`~inline_backbones.models.InLinePVT` (the same stages and keys) followed
by the released model's head: with ``t`` the tokens (B, N, C) out of the last stage,
``logits = head(mean_N(t))`` (no final norm, no class token). Its state dict holds our names for the released
keys (:mod:`~inline_backbones.models.pvt_checkpoint`); released files load through timm as released::

    timm.create_model('inline_pvt_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_pvt_t.pth'))

timm hands the file to :meth:`InLinePVTClassifier.load_pretrained` (``custom_load``): the package's safe
loader (``weights_only=True``, yacs not needed), strict (anything missing, unexpected or mis-shaped raises
:class:`~inline_backbones.checkpoint.CheckpointMismatchError` naming the keys). ``pretrained=True`` alone
downloads the released file (``url`` of the pretrained cfg) into timm's cache first.
"""
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from torch import nn

from .checkpoint import extract_state_dict, filter_state_dict
from .checkpoint import load_pretrained as load_pretrained_file
from .models import InLinePVT
from .models.stages import iter_stages
from .released import PVT_ARCH_CHECKPOINTS
from .timm_models import to_nhwc


class InLinePVTClassifier(InLinePVT):
    """InLine-PVT ImageNet classifier: the backbone's stages, average pool, ``head``.

    Args:
        embed_dims, depths, num_heads, mlp_ratios, sr_ratios, attn_type, patch_norm_eps, sr_norm_eps,
            block_norm_eps: the architecture (see :class:`~inline_backbones.models.InLinePVT`).
        num_classes (int): Classes of ``head``; 0 leaves the pooled features (``head`` is Identity).
        global_pool (str): ``'avg'`` (mean over tokens) or ``''`` (no pooling: per-token logits).
        in_chans (int): Input channels.
        **kwargs: other :class:`~inline_backbones.models.InLinePVT` arguments (``drop_rate``,
            ``drop_path_rate``, ``with_cp``, ...).
    """

    def __init__(self, embed_dims, depths, num_heads, mlp_ratios, sr_ratios, attn_type, patch_norm_eps,
                 sr_norm_eps, block_norm_eps, num_classes=1000, global_pool='avg', in_chans=3, **kwargs):
        if global_pool not in ('avg', ''):
            raise ValueError(f"global_pool must be 'avg' or '', got {global_pool!r}")
        if kwargs.get('padding_aware'):
            raise ValueError('padding_aware is not supported by the classifier (it pools every token of the '
                             'input): use the InLinePVT backbone for padded batches of different sizes')
        arch = dict(embed_dims=list(embed_dims), depths=list(depths), num_heads=list(num_heads),
                    mlp_ratios=list(mlp_ratios), sr_ratios=list(sr_ratios), patch_norm_eps=patch_norm_eps,
                    sr_norm_eps=sr_norm_eps, block_norm_eps=block_norm_eps)
        super().__init__(arch=arch, attn_type=attn_type, in_channels=in_chans, out_indices=(len(depths) - 1,),
                         **kwargs)
        self.out_indices = ()
        self.feature_info = [dict(num_chs=c, reduction=4 * 2 ** i, module=f'layers.{i}')
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
        """Position embeddings are not decayed (as in PVT's training)."""
        return {n for n, _ in self.named_parameters() if n.endswith('pos_embed')}

    def forward_features(self, x):
        """(B, C_in, H, W) -> the last stage's map, NHWC (B, H', W', C)."""
        for out, tokens in iter_stages(self, x):
            pass
        return to_nhwc(out, tokens)

    def forward_head(self, x, pre_logits=False):
        """NHWC map -> average over H', W' (``global_pool='avg'``) -> ``head``."""
        if self.global_pool == 'avg':
            x = x.mean(dim=(1, 2))
        return x if pre_logits else self.head(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(self, x, indices=None, norm=False, stop_early=False, output_fmt='NCHW',
                              intermediates_only=False):
        """Stage maps for ``features_only`` (timm's interface): the NCHW (or NHWC) outputs of the stages in
        ``indices`` and, unless ``intermediates_only``, the last stage's NHWC map (``norm``: no norm exists).
        With ``intermediates_only`` the stages after the last index are skipped."""
        if output_fmt not in ('NCHW', 'NHWC'):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NHWC', got {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.layers), indices)
        intermediates = []
        for i, (out, tokens) in enumerate(iter_stages(self, x, stop=max_index if intermediates_only else None)):
            if i in take_indices:
                y = to_nhwc(out, tokens)
                intermediates.append(y.permute(0, 3, 1, 2).contiguous() if output_fmt == 'NCHW' else y)
        if intermediates_only:
            return intermediates
        return to_nhwc(out, tokens), intermediates

    def prune_intermediate_layers(self, indices=1, prune_norm=False, prune_head=True):
        """Drop the stages after the last of ``indices`` (and the head if asked)."""
        take_indices, max_index = feature_take_indices(len(self.layers), indices)
        self.layers = self.layers[:max_index + 1]
        if prune_head:
            self.reset_classifier(0, '')
        return take_indices

    def load_pretrained(self, path):
        """Load a released file (or an mmengine / bare state dict file) safely and strictly."""
        load_pretrained_file(self, path)


def checkpoint_filter_fn(state_dict, model, source='state dict'):
    """timm's ``pretrained_filter_fn``: unwrap, rename the released keys, check strictly."""
    return filter_state_dict(model, extract_state_dict(state_dict), source)


def _cfg(arch, **kwargs):
    """The authors' evaluation: squash-resize to 256x256 (bicubic), centre crop 224, ImageNet mean/std."""
    return {
        'url': (PVT_ARCH_CHECKPOINTS[arch], f'inline_pvt_{arch[0]}.pth'), 'num_classes': 1000,
        'input_size': (3, 224, 224), 'pool_size': (7, 7), 'crop_pct': 224 / 256, 'crop_mode': 'squash',
        'interpolation': 'bicubic', 'fixed_input_size': False, 'mean': IMAGENET_DEFAULT_MEAN,
        'std': IMAGENET_DEFAULT_STD, 'first_conv': 'layers.0.embed.proj', 'classifier': 'head',
        'custom_load': True,  # timm calls model.load_pretrained(file): our safe, strict loader
        'license': 'mit', 'origin_url': 'https://github.com/LeapLabTHU/InLine', 'paper_ids': 'arXiv:2412.06590',
        'paper_name': 'Bridging the Divide: Reconsidering Softmax and Linear Attention',
        **kwargs,
    }


default_cfgs = generate_default_cfgs({f'inline_pvt_{arch}.in1k': _cfg(arch)
                                      for arch in ('tiny', 'small', 'medium', 'large')})


def _create_inline_pvt(arch, pretrained=False, pretrained_cfg_overlay=None, **kwargs):
    kwargs = {k: v for k, v in InLinePVT.arch_zoo[arch].items() if k not in kwargs} | kwargs
    out_indices = kwargs.pop('out_indices', tuple(range(len(kwargs['depths']))))
    # A file the user names is a released checkpoint: keep our loader for it (timm resets ``custom_load``
    # when an overlay names a weight source, unless the overlay sets it).
    pretrained_cfg_overlay = {'custom_load': True, **(pretrained_cfg_overlay or {})}
    return build_model_with_cfg(
        InLinePVTClassifier, f'inline_pvt_{arch}', pretrained, pretrained_cfg_overlay=pretrained_cfg_overlay,
        pretrained_filter_fn=checkpoint_filter_fn, feature_cfg=dict(feature_cls='getter', out_indices=out_indices),
        **kwargs)


@register_model
def inline_pvt_tiny(pretrained=False, **kwargs):
    """InLine-PVT-T @ 224: depths 2-2-2-2, layout IIII; 12.0M params, 2.0G FLOPs (paper)."""
    return _create_inline_pvt('tiny', pretrained, **kwargs)


@register_model
def inline_pvt_small(pretrained=False, **kwargs):
    """InLine-PVT-S @ 224: depths 3-4-6-3, layout IIII; 21.6M params, 3.9G FLOPs (paper)."""
    return _create_inline_pvt('small', pretrained, **kwargs)


@register_model
def inline_pvt_medium(pretrained=False, **kwargs):
    """InLine-PVT-M @ 224: depths 3-4-18-3, layout IIII; 37.6M params, 6.9G FLOPs (paper)."""
    return _create_inline_pvt('medium', pretrained, **kwargs)


@register_model
def inline_pvt_large(pretrained=False, **kwargs):
    """InLine-PVT-L @ 224: depths 3-8-27-3, layout IIII; 51.2M params (paper: 50.2M), 10.2G FLOPs (paper)."""
    return _create_inline_pvt('large', pretrained, **kwargs)
