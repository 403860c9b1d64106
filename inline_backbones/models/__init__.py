"""The models: tokens and their maps (:mod:`.tokens`), the token mixers (:mod:`.mixers`), the trunk every family
shares (:mod:`.trunk`, :mod:`.stages`, :mod:`.blocks`, :mod:`.layout`) with its two thin wrappers side by side, the
mmdet/mmseg backbone (:mod:`.backbone`) and the timm classifier (:mod:`.classifier`), and one module per family
(:mod:`.families`: its table, backbone, timm classifiers)."""
from .families import flatten_swin  # noqa: F401  (registers flatten_swin_{tiny,small,base} in timm)
from .families.inline_cswin import InLineCSwinClassifier, InLineCSwinTransformer
from .families.inline_deit import InLineDeiTClassifier
from .families.inline_pvt import InLinePVT, InLinePVTClassifier
from .families.inline_swin import InLineSwinClassifier, InLineSwinTransformer
from .layout import parse_attn_layout
from .mixers.inline.attention import InLineAttention
from .mixers.linear_attention import LinearAttention
from .mixers.window_attention import WindowAttention

__all__ = ['InLineAttention', 'InLineCSwinClassifier', 'InLineCSwinTransformer', 'InLineDeiTClassifier',
           'InLinePVT', 'InLinePVTClassifier', 'InLineSwinClassifier', 'InLineSwinTransformer',
           'LinearAttention', 'WindowAttention', 'parse_attn_layout']
