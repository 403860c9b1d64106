"""InLine backbones in Hugging Face transformers' dense-prediction models (UperNet, Mask2Former, the DETR family).

transformers builds a timm backbone by name: ``TimmBackboneConfig(backbone='inline_swin_tiny', out_indices=[0, 1, 2,
3])`` as the ``backbone_config`` of ``UperNetConfig``, ``Mask2FormerConfig``, ``DeformableDetrConfig``, ... makes
``timm.create_model(name, features_only=True, out_indices=...)`` of the classifiers this package registers with timm
(``import inline_backbones`` first), randomly initialised: transformers 5 no longer hands ``pretrained`` to a backbone
built from its parent's config. :func:`load_released_backbone` puts the authors' released ImageNet-1k weights into
it, and :func:`set_drop_path_rate` the recipes' stochastic depth, which ``TimmBackboneConfig`` cannot carry. Nothing
here patches transformers; everything else (training, ``save_pretrained`` / ``from_pretrained``) is
transformers' own. docs/transformers.md says what differs from the OpenMMLab models.
"""
from .options import set_drop_path_rate
from .weights import inline_backbones_in, load_released_backbone

__all__ = ['inline_backbones_in', 'load_released_backbone', 'set_drop_path_rate']
