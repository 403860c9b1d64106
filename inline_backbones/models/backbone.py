"""What the backbones of every family share: the mmdet/mmseg conventions around the stage loop."""
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from ..checkpoint import load_pretrained


class StagedBackbone(BaseModule):
    """A backbone run by :func:`~.stages.iter_stages`, with mmdet/mmseg's conventions: ``out_indices``,
    ``frozen_stages`` (:meth:`_freeze_stages`, per family), ``norm_eval`` and ``init_cfg`` (a strict load
    of ``type='Pretrained'`` through the family's ``checkpoint_filter``, else a truncated-normal init)."""

    def _set_conventions(self, out_indices, frozen_stages, norm_eval, num_stages):
        out_indices = tuple(out_indices)
        if not out_indices or any(not 0 <= i < num_stages for i in out_indices):
            raise ValueError(f'out_indices {out_indices} must be non-empty and within [0, {num_stages - 1}]')
        if not -1 <= frozen_stages <= num_stages:
            raise ValueError(f'frozen_stages must be in [-1, {num_stages}], got {frozen_stages}')
        self.out_indices = out_indices
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval

    def init_weights(self):
        """Truncated-normal init from scratch (linears std 0.02, LayerNorms 1/0, then
        :meth:`_init_family_weights`), or a strict load of ``init_cfg`` type ``Pretrained``."""
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            load_pretrained(self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                            sha256=self.init_cfg.get('sha256'))
            self._is_init = True
            return
        if self.init_cfg is not None:
            super().init_weights()
            return
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        self._init_family_weights()
        self._is_init = True

    def _init_family_weights(self):
        """The family's own parameters (position tables, embeddings) from scratch."""

    def _freeze_stages(self):
        raise NotImplementedError

    def train(self, mode=True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, (_BatchNorm, nn.LayerNorm, nn.GroupNorm)):
                    m.eval()
        return self
