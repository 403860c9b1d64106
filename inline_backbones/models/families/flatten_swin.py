"""FLatten-Swin-T/S/B in timm: ``flatten_swin_tiny``, ``flatten_swin_small``, ``flatten_swin_base``, the classifiers of
the Swin family's presets ``flatten-tiny``, ``flatten-small``, ``flatten-base`` (:mod:`.inline_swin`): the authors'
FLatten-Swin (Han et al., "FLatten Transformer: Vision Transformer using Focused Linear Attention", ICCV 2023;
LeapLabTHU/FLatten-Transformer), the models InLine is compared with.

Their pretrained cfgs are InLine-Swin's evaluation, which is the authors' (``TEST.CROP``: the short side resized to
256 bicubic, centre crop 224; ImageNet mean/std; 1000 classes), with the released links
(:data:`~inline_backbones.checkpoints.released.RELEASED_CHECKPOINTS`) and FLatten's origin and paper. The files load as
released, safely and strictly, through the Swin family's key filter::

    timm.create_model('flatten_swin_tiny', pretrained=True, pretrained_cfg_overlay=dict(file='flatten_swin_t.pth'))
"""
from timm.models import register_model

from ..classifier import create_classifier, released_default_cfgs
from .inline_swin import InLineSwinClassifier

# What differs from InLine's pretrained cfgs: whose models these are (the FLatten repository states no license).
ORIGIN = dict(origin_url='https://github.com/LeapLabTHU/FLatten-Transformer', paper_ids='arXiv:2308.00442',
              paper_name='FLatten Transformer: Vision Transformer using Focused Linear Attention', license=None)

# timm's pretrained cfgs of the released models (links: released.RELEASED_CHECKPOINTS) and their model functions,
# each documented by the paper's figures as released.PAPER_FIGURES has them (a test checks that they agree).
default_cfgs = released_default_cfgs(InLineSwinClassifier, 'flatten_swin_', cfg=ORIGIN)


@register_model
def flatten_swin_tiny(pretrained=False, **kwargs) -> InLineSwinClassifier:
    """FLatten-Swin-T: embed 96, depths 2-2-6-2, layout FFSS; ImageNet-1k top-1 82.1 (authors)."""
    return create_classifier(InLineSwinClassifier, 'flatten_swin_tiny', pretrained, arch='flatten-tiny', **kwargs)


@register_model
def flatten_swin_small(pretrained=False, **kwargs) -> InLineSwinClassifier:
    """FLatten-Swin-S: embed 96, depths 2-2-18-2, layout FFSS; ImageNet-1k top-1 83.5 (authors)."""
    return create_classifier(InLineSwinClassifier, 'flatten_swin_small', pretrained, arch='flatten-small', **kwargs)


@register_model
def flatten_swin_base(pretrained=False, **kwargs) -> InLineSwinClassifier:
    """FLatten-Swin-B: embed 128, depths 2-2-18-2, layout FFSS; ImageNet-1k top-1 83.8 (authors)."""
    return create_classifier(InLineSwinClassifier, 'flatten_swin_base', pretrained, arch='flatten-base', **kwargs)
