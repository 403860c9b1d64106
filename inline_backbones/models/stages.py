"""A stage (optional embedding, blocks, optional downsampling) and the one stage loop that the
mmdet/mmseg backbones, the timm classifiers and the attention analysis all run.

A backbone provides ``stem(x, image_shapes) -> (x, tokens)`` (the input checked, and what the first
stage takes, with its :class:`~.token_map.TokenMap`) and ``layers``, a list of :class:`Stage`.
:func:`iter_stages` runs them and yields each stage's output tokens with their map.
"""
from torch import nn

from .blocks import TransformerBlock


class Stage(nn.Module):
    """``embed`` (optional: ``(x, tokens) -> (x, tokens)``, e.g. PVT's per-stage patch embedding), the
    blocks (``mixer_cfgs[j]`` for block j, see :class:`~.blocks.TransformerBlock`), then ``downsample``
    (optional, same form, e.g. Swin's patch merging).

    Returns the stage output (the last block's tokens) with its map, and what the next stage takes.
    """

    def __init__(self, embed_dims, num_heads, mixer_cfgs, mlp_ratio=4., drop_rate=0., drop_path_rates=None,
                 with_cp=False, norm_eps=1e-5, embed=None, downsample=None):
        super().__init__()
        depth = len(mixer_cfgs)
        drop_path_rates = drop_path_rates or [0.] * depth
        self.embed = embed
        self.blocks = nn.ModuleList([
            TransformerBlock(embed_dims, num_heads, cfg, block_index=j, mlp_ratio=mlp_ratio, drop_rate=drop_rate,
                             drop_path_rate=drop_path_rates[j], with_cp=with_cp, norm_eps=norm_eps)
            for j, cfg in enumerate(mixer_cfgs)
        ])
        self.downsample = downsample

    def forward(self, x, tokens):
        if self.embed is not None:
            x, tokens = self.embed(x, tokens)
        for block in self.blocks:
            x = block(x, tokens)
        if self.downsample is None:
            return x, tokens, x, tokens
        x_next, tokens_next = self.downsample(x, tokens)
        return x, tokens, x_next, tokens_next


def iter_stages(model, x, image_shapes=None, stop=None):
    """Run ``model.stem`` and ``model.layers`` (up to index ``stop``) on the images ``x``; yield each
    stage's output tokens (B, N, C) and :class:`~.token_map.TokenMap`."""
    x, tokens = model.stem(x, image_shapes)
    for stage in model.layers[:None if stop is None else stop + 1]:
        out, out_tokens, x, tokens = stage(x, tokens)
        yield out, out_tokens
