"""What the paper's recipes set on the backbone, for a transformers model built from ``TimmBackboneConfig``.

transformers builds the timm backbone from the config alone (``TimmBackboneConfig`` is a strict dataclass: backbone
name, channels, out indices, output stride, frozen BN), so ``timm.create_model``'s ``drop_path_rate`` cannot be given
through it, and the model keeps the classifier's default (0.1); the recipes use 0.2-0.3. :func:`set_drop_path_rate`
sets it afterwards, as the build would have: block ``i`` of the ``n`` blocks of the whole arch gets
``rate * i / (n - 1)`` (``linspace(0, rate, n)``, :class:`~inline_backbones.models.trunk.Trunk`), also for the blocks of
stages that ``features_only`` pruned away, which keeps the kept blocks' rates those of the full model.
"""
import torch
from timm.layers import DropPath
from torch import nn

from ..models.errors import ModelArgumentError
from .weights import inline_backbones_in


def set_drop_path_rate(model, rate):
    """Set the stochastic depth of every InLine backbone in ``model`` (a transformers model, or any module holding
    timm models of this package) to ``rate``; returns ``{module path: per-block rates of the blocks it has}``."""
    if not 0 <= rate < 1:
        raise ModelArgumentError(f'drop_path_rate must be in [0, 1), got {rate}')
    backbones = inline_backbones_in(model)
    if not backbones:
        raise ModelArgumentError(f'{type(model).__name__} holds no InLine backbone: build it with '
                                 'TimmBackboneConfig(backbone=NAME, ...) after `import inline_backbones`')
    rates = {}
    for path, backbone in backbones.items():
        depths = list(backbone.arch['depths'])
        dpr = torch.linspace(0, rate, sum(depths), device='cpu').tolist()
        blocks = [block for stage in backbone.layers for block in stage.blocks]
        for block, r in zip(blocks, dpr, strict=False):       # pruned stages: the first blocks only
            block.drop_path = DropPath(r) if r > 0 else nn.Identity()
        backbone.drop_path_rate = rate
        rates[path] = dpr[:len(blocks)]
    return rates
