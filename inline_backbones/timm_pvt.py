"""The InLine-PVT ImageNet classifiers as timm models: ``inline_pvt_{tiny,small,medium,large}`` (registered in
timm's model registry when ``inline_backbones`` is imported).

The classifier is the backbone :class:`~inline_backbones.models.InLinePVT` (the same stages and keys) with timm's
classifier interface (:mod:`inline_backbones.timm_classifier`) and the released model's head: with ``t`` the tokens
(B, N, C) out of the last stage, ``logits = head(mean_N(t))`` (no final norm, no class token). Its state dict holds
our names for the released keys (:mod:`~inline_backbones.models.pvt_checkpoint`); released files load through timm as
released::

    timm.create_model('inline_pvt_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_pvt_t.pth'))

timm hands the file to :meth:`InLinePVTClassifier.load_pretrained` (``custom_load``): the package's safe
loader (``weights_only=True``, yacs not needed), strict (anything missing, unexpected or mis-shaped raises
:class:`~inline_backbones.checkpoint.CheckpointMismatchError` naming the keys). ``pretrained=True`` alone
downloads the released file (``url`` of the pretrained cfg) into torch's hub cache first (the package's verified
download, :func:`~inline_backbones.timm_classifier.create_classifier`).
"""
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import generate_default_cfgs, register_model
from torch import nn

from .models import InLinePVT
from .released import PVT_ARCH_CHECKPOINTS
from .timm_classifier import ClassifierMixin, check_global_pool, create_classifier


class InLinePVTClassifier(ClassifierMixin, InLinePVT):
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
        check_global_pool(global_pool)
        if kwargs.get('padding_aware'):
            raise ValueError('padding_aware is not supported by the classifier (it pools every token of the '
                             'input): use the InLinePVT backbone for padded batches of different sizes')
        arch = dict(embed_dims=list(embed_dims), depths=list(depths), num_heads=list(num_heads),
                    mlp_ratios=list(mlp_ratios), sr_ratios=list(sr_ratios), patch_norm_eps=patch_norm_eps,
                    sr_norm_eps=sr_norm_eps, block_norm_eps=block_norm_eps)
        super().__init__(arch=arch, attn_type=attn_type, in_channels=in_chans, out_indices=(len(depths) - 1,),
                         **kwargs)
        self.norm = nn.Identity()          # no final norm in this family
        self._init_classifier(num_classes, global_pool, 4)

    def no_weight_decay(self):
        """Position embeddings are not decayed (as in PVT's training)."""
        return {n for n, _ in self.named_parameters() if n.endswith('pos_embed')}


def _cfg(arch, **kwargs):
    """The authors' evaluation: squash-resize to 256x256 (bicubic), centre crop 224, ImageNet mean/std."""
    return {
        'url': PVT_ARCH_CHECKPOINTS[arch], 'num_classes': 1000,
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
    return create_classifier(InLinePVTClassifier, f'inline_pvt_{arch}', pretrained, pretrained_cfg_overlay, kwargs)


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
