from .inline_attention import InLineAttention
from .inline_swin import InLineSwinTransformer
from .layout import parse_attn_layout
from .linear_attention import LinearAttention
from .window_attention import WindowAttention

__all__ = ['InLineAttention', 'InLineSwinTransformer', 'LinearAttention', 'WindowAttention', 'parse_attn_layout']
