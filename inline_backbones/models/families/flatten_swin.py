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
from ..classifier import register_classifiers
from .inline_swin import InLineSwinClassifier

# What differs from InLine's pretrained cfgs: whose models these are (the FLatten repository states no license).
ORIGIN = dict(origin_url='https://github.com/LeapLabTHU/FLatten-Transformer', paper_ids='arXiv:2308.00442',
              paper_name='FLatten Transformer: Vision Transformer using Focused Linear Attention', license=None)

# flatten_swin_{arch}(pretrained=False, **kwargs) here and in timm's registry (docstrings: released.PAPER_FIGURES).
register_classifiers(InLineSwinClassifier, 'flatten_swin_', globals(), preset_prefix='flatten-', cfg=ORIGIN)
