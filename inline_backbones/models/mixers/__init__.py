"""The token mixers, by name, and how a block gets its own.

A mixer is any module with the contract ``mixer(x, tokens) -> y``: ``x`` the (B, N, C) tokens of a
map, ``tokens`` the stage's :class:`~.token_map.TokenMap`, ``y`` the (B, N, C) mixed tokens. Its
constructor takes ``(embed_dims, num_heads, **cfg)``. A layout letter names a mixer (:mod:`.layout`);
the backbone gives each name its config; adding a mixer is one entry in :data:`MIXERS`.

Mixers whose class sets ``alternates_shift`` cut the map into windows and take the shifted windows on
the odd blocks of a stage (``shift=True``), as in Swin. Mixers whose class sets ``reads_block_input`` also take
the block's input before its norm (:class:`~..blocks.TransformerBlock`).
"""

from ..errors import ModelArgumentError
from ..tokens.graph_mode import graph_leaf
from .cswin_attention import CSwinInLineAttention, CSwinStripeAttention
from .deit_attention import PrefixInLineAttention
from .flatten_attention import FocusedLinearAttention
from .inline.attention import InLineAttention
from .linear_attention import LinearAttention
from .pvt_attention import InLinePVTAttention, SpatialReductionAttention
from .window_attention import WindowAttention

MIXERS = {
    'inline': InLineAttention,      # InLine attention, global or in windows (letter I)
    'window': WindowAttention,      # Swin's (shifted) window softmax attention (letter S of InLine-Swin)
    'linear': LinearAttention,      # plain linear attention, the ablation (letter L)
    'inline_pvt': InLinePVTAttention,                # InLine-PVT's InLine attention (letter I of InLine-PVT)
    'spatial_reduction': SpatialReductionAttention,  # PVT v1's spatial-reduction softmax (letter S of InLine-PVT)
    'inline_cswin': CSwinInLineAttention,            # InLine-CSwin's global InLine with LePE (letter I of InLine-CSwin)
    'cswin_stripes': CSwinStripeAttention,           # CSWin's LePE cross-shaped stripes (letter S of InLine-CSwin)
    'inline_deit': PrefixInLineAttention,            # InLine over a class token and the map (letter I of InLine-DeiT)
    'flatten': FocusedLinearAttention,               # FLatten's focused linear attention (letter F of InLine-Swin)
}


def register_mixer(name, cls):
    """Add a mixer class under ``name`` (for layouts and configs), a leaf of fx traces (:func:`graph_leaf`)."""
    MIXERS[name] = graph_leaf(cls)
    return cls


for _name, _cls in list(MIXERS.items()):
    register_mixer(_name, _cls)


def build_mixer(cfg, embed_dims, num_heads, block_index):
    """The mixer of block ``block_index`` of a stage from ``cfg`` (``dict(type=name, **kwargs)``)."""
    cfg = dict(cfg)
    name = cfg.pop('type')
    if name not in MIXERS:
        raise ModelArgumentError(f'unknown token mixer {name!r}; registered: {sorted(MIXERS)}')
    cls = MIXERS[name]
    if getattr(cls, 'alternates_shift', False):
        cfg['shift'] = block_index % 2 == 1
    return cls(embed_dims, num_heads, **cfg)
