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

from .models.inline_pvt import PVT
from .released import PVT_ARCH_CHECKPOINTS
from .timm_classifier import Classifier, create_classifier


class InLinePVTClassifier(Classifier):
    """InLine-PVT ImageNet classifier: the family's stages, average pool, ``head`` (no final norm)
    (arguments: :class:`~inline_backbones.timm_classifier.Classifier`; options: :class:`InLinePVT`'s)."""

    family = PVT


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
    return create_classifier(InLinePVTClassifier, f'inline_pvt_{arch}', pretrained, pretrained_cfg_overlay,
                             dict(kwargs, arch=arch))


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
