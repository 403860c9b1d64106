"""The InLine-Swin ImageNet classifiers as timm models: ``inline_swin_tiny``, ``inline_swin_small``,
``inline_swin_base`` (registered in timm's model registry when ``inline_backbones`` is imported).

The classifier is the backbone :class:`InLineSwinTransformer` (the same trunk and keys) with timm's classifier
interface (:mod:`inline_backbones.timm_classifier`) and the released model's head: with ``t`` the tokens (B, N, C) out
of the last stage, ``logits = head(mean_N(norm(t)))`` (LayerNorm ``norm``, average over the N tokens, Linear
``head``). Its state dict holds exactly the keys of the released checkpoints (``patch_embed.*``, ``layers.*``,
``norm.*``, ``head.*``) except the buffers ``relative_position_index`` and ``attn_mask``, which the model rebuilds
(:data:`~inline_backbones.models.swin_checkpoint.RELEASED_BUFFERS`).

Released files load through timm: ``pretrained=True`` downloads the authors' file once (torch's hub cache,
verified; offline, the error says where to put a copy), or name a local copy::

    timm.create_model('inline_swin_tiny', pretrained=True)
    timm.create_model('inline_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='inline_swin_t.pth'))

timm hands the file to :meth:`InLineSwinClassifier.load_pretrained` (``custom_load`` in the pretrained
cfg), which reads it with the package's safe loader (``weights_only=True``, yacs not needed) and loads
it strictly: anything missing, unexpected or mis-shaped raises
:class:`~inline_backbones.checkpoint.CheckpointMismatchError` naming the keys. ``num_classes=N``
(N != 1000) keeps a new head; ``features_only=True`` gives the NCHW maps of the stages (timm's
``FeatureGetterNet`` over :meth:`InLineSwinClassifier.forward_intermediates`).
"""

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import generate_default_cfgs, register_model

from .models import InLineSwinTransformer
from .released import SWIN_ARCH_CHECKPOINTS
from .timm_classifier import ClassifierMixin, check_global_pool, checkpoint_filter_fn, create_classifier, to_nhwc

__all__ = ['InLineSwinClassifier', 'checkpoint_filter_fn', 'to_nhwc']


class InLineSwinClassifier(ClassifierMixin, InLineSwinTransformer):
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
        check_global_pool(global_pool)
        if kwargs.get('padding_aware'):
            raise ValueError('padding_aware is not supported by the classifier (it pools every token of the '
                             'input): use the InLineSwinTransformer backbone for padded batches of different sizes')
        last = len(depths) - 1
        super().__init__(arch=dict(embed_dims=embed_dims, depths=list(depths), num_heads=list(num_heads)),
                         attn_type=attn_type, in_channels=in_chans, drop_rate=drop_rate, out_indices=(last,),
                         **kwargs)
        # The backbone's output norm of the last stage is the released model's final ``norm``.
        self.norm = self._modules.pop(f'norm{last}')
        self._init_classifier(num_classes, global_pool, self.patch_embed.patch_size)

    def no_weight_decay(self):
        """Relative position bias tables are not decayed (as in Swin's and InLine's training)."""
        return {n for n, _ in self.named_parameters() if n.endswith('relative_position_bias_table')}


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
    'inline_swin_tiny.in1k': _cfg(url=SWIN_ARCH_CHECKPOINTS['tiny']),
    'inline_swin_small.in1k': _cfg(url=SWIN_ARCH_CHECKPOINTS['small']),
    'inline_swin_base.in1k': _cfg(url=SWIN_ARCH_CHECKPOINTS['base']),
})


def _create_inline_swin(variant, pretrained=False, pretrained_cfg_overlay=None, **kwargs):
    return create_classifier(InLineSwinClassifier, variant, pretrained, pretrained_cfg_overlay, kwargs)


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
