"""The mmdet/mmseg backbone of every family: the trunk (:class:`~.trunk.Trunk`) with mmengine's conventions.

It is a plain ``nn.Module`` that follows mmengine's module protocol (``init_cfg``, ``init_weights()``, ``is_init``:
what an mmengine ``BaseModule`` parent calls on its children), so the same class serves mmdet, mmseg and plain
PyTorch, and importing it needs no OpenMMLab. The OpenMMLab edge (:mod:`inline_backbones.openmmlab.edge`) registers
it in the ``inline_backbones`` scope and lends it mmengine's logger and initializers
(:mod:`inline_backbones.frameworks`).
"""
import copy

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from .. import frameworks
from ..checkpoints.loading import load_pretrained
from .errors import ModelArgumentError
from .stages import to_nchw
from .trunk import Trunk


class Backbone(Trunk):
    """A family's trunk as an mmdet/mmseg backbone (a family subclass: ``class X(Backbone, family=TABLE)``).

    ``forward(x, image_shapes=None)`` returns the NCHW maps of the ``out_indices`` stages (strides 4, 8, 16, 32
    for four stages), each through its output norm ``norm{i}`` where the family has them.

    Args:
        arch, attn_type, in_channels, drop_path_rate, with_cp, padding_aware: the trunk's
            (:class:`~.trunk.Trunk`).
        out_indices (Sequence[int]): Stages whose outputs are returned.
        frozen_stages (int): -1 freezes nothing; ``k >= 0`` freezes the stem's modules and the first ``k``
            stages with their output norms (eval mode, no gradients).
        norm_eval (bool): Keep normalization layers in eval mode while training (LayerNorm has no running
            statistics, so this only matters for BatchNorm layers a subclass adds).
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=PATH[, prefix='backbone.'][, sha256=...])``
            loads a released ImageNet checkpoint, or a detector's / segmentor's with ``prefix``, strictly through
            the family's ``checkpoint_filter`` (:func:`inline_backbones.checkpoints.loading.load_pretrained`); None: a
            truncated-normal init (:meth:`~.trunk.Trunk.init_trunk_weights`); another type is one of mmengine's
            initializers (``Kaiming`` ...), applied through the OpenMMLab edge (an error without a line).
        **options: The family's options (``family.options``); an unknown one is a
            :class:`~.errors.ModelArgumentError` listing them.
    """

    def __init__(self, arch=None, attn_type=None, in_channels=3, drop_path_rate=0.1, out_indices=(0, 1, 2, 3),
                 frozen_stages=-1, norm_eval=False, with_cp=False, padding_aware=False, init_cfg=None, **options):
        super().__init__(arch=next(iter(self.family.arch_zoo)) if arch is None else arch, attn_type=attn_type,
                         in_channels=in_channels, drop_path_rate=drop_path_rate, with_cp=with_cp,
                         padding_aware=padding_aware, options=options)
        self.init_cfg = copy.deepcopy(init_cfg)
        self._is_init = False
        num_stages = len(self.layers)
        out_indices = tuple(out_indices)
        if not out_indices or any(not 0 <= i < num_stages for i in out_indices):
            raise ModelArgumentError(f'out_indices {out_indices} must be non-empty and within [0, {num_stages - 1}]')
        if not -1 <= frozen_stages <= num_stages:
            raise ModelArgumentError(f'frozen_stages must be in [-1, {num_stages}], got {frozen_stages}')
        self.out_indices = out_indices
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self.num_features = list(self.stage_dims)
        if self.family.output_norms:
            for i in out_indices:
                self.add_module(f'norm{i}', nn.LayerNorm(self.num_features[i], eps=self.family.norm_eps))
        self._freeze_stages()

    def forward(self, x, image_shapes=None):
        """(B, C_in, H, W) -> tuple of NCHW maps of the ``out_indices`` stages.

        Padding-aware mode: each image's own ``(height, width)`` in pixels comes from ``image_shapes``
        ((B, 2) or a list of pairs), else from shapes carried by ``x`` from this package's data
        preprocessors, else is inferred from ``x`` (padding = trailing rows/columns that are exactly
        zero in every channel); see :mod:`inline_backbones.regions` for what inference
        relies on. Pixels and tokens outside each region are then excluded from everything the region's
        tokens see, and the outputs are zero outside each image's region (at every stage, the region
        is ``ceil(shape / stride)``). Without the mode, ``image_shapes`` must be None. Export (``torch.export``,
        the default ONNX exporter) and ``torch.compile`` of the mode take ``image_shapes`` as a (B, 2) integer
        tensor input (docs/deployment.md#what-exports-with-which-exporter).
        """
        outs = []
        for i, (out, tokens) in enumerate(self.iter_stages(x, image_shapes, stop=max(self.out_indices))):
            if i in self.out_indices:
                norm = getattr(self, f'norm{i}', None)
                outs.append(to_nchw(out if norm is None else norm(out), tokens))
        return tuple(outs)

    @property
    def is_init(self):
        """Whether :meth:`init_weights` ran (mmengine's parents then do not initialise the backbone again)."""
        return self._is_init

    def init_weights(self):
        """A strict load of ``init_cfg`` type ``Pretrained`` (the file and its sha256 prefix logged: a Runner's log says
        where the backbone's weights came from), another ``init_cfg`` by mmengine's initializers, or from scratch."""
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            load_pretrained(self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                            sha256=self.init_cfg.get('sha256'), logger=frameworks.logger())
        elif self.init_cfg is not None:
            frameworks.initialize(self, self.init_cfg)
        else:
            self.init_trunk_weights()
        self._is_init = True

    def _freeze_stages(self):
        self.freeze(self.frozen_stages, {i: getattr(self, f'norm{i}', None) for i in range(len(self.layers))})

    def train(self, mode=True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, (_BatchNorm, nn.LayerNorm, nn.GroupNorm)):
                    m.eval()
        return self
