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

from .models.inline_swin import SWIN
from .released import SWIN_ARCH_CHECKPOINTS
from .timm_classifier import Classifier, checkpoint_filter_fn, create_classifier, to_nhwc

__all__ = ['InLineSwinClassifier', 'checkpoint_filter_fn', 'to_nhwc']


class InLineSwinClassifier(Classifier):
    """InLine-Swin ImageNet classifier: the family's trunk, final ``norm``, average pool, ``head``
    (arguments: :class:`~inline_backbones.timm_classifier.Classifier`; options: :class:`InLineSwinTransformer`'s)."""

    family = SWIN


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


def _create_inline_swin(arch, pretrained=False, pretrained_cfg_overlay=None, **kwargs):
    return create_classifier(InLineSwinClassifier, f'inline_swin_{arch}', pretrained, pretrained_cfg_overlay,
                             dict(kwargs, arch=arch))


@register_model
def inline_swin_tiny(pretrained=False, **kwargs):
    """InLine-Swin-T @ 224: embed 96, depths 2-2-6-2, layout IIIS; ImageNet-1k top-1 82.4 (paper)."""
    return _create_inline_swin('tiny', pretrained, **kwargs)


@register_model
def inline_swin_small(pretrained=False, **kwargs):
    """InLine-Swin-S @ 224: embed 96, depths 2-2-18-2, layout IISS; ImageNet-1k top-1 83.6 (paper)."""
    return _create_inline_swin('small', pretrained, **kwargs)


@register_model
def inline_swin_base(pretrained=False, **kwargs):
    """InLine-Swin-B @ 224: embed 128, depths 2-2-18-2, layout IIMS2; ImageNet-1k top-1 84.1 (paper)."""
    return _create_inline_swin('base', pretrained, **kwargs)
