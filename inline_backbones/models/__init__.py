from .inline_attention import InLineAttention
from .inline_pvt import InLinePVT
from .inline_swin import InLineSwinTransformer
from .layout import parse_attn_layout
from .linear_attention import LinearAttention
from .window_attention import WindowAttention

__all__ = ['InLineAttention', 'InLinePVT', 'InLineSwinTransformer', 'LinearAttention', 'WindowAttention',
           'parse_attn_layout']
