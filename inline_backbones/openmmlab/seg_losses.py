"""mmseg glue: a class-weighted cross-entropy that accepts ignored pixels.

Imported only by configs (``custom_imports``), never by ``import inline_backbones``, since it imports
mmseg. Use it as ``loss_decode=dict(type='inline_backbones.ClassWeightedCrossEntropyLoss',
class_weight=[...])`` with the same arguments as mmseg's ``CrossEntropyLoss``.

Why: with ``class_weight`` set and no ``avg_factor``, mmseg 1.2's ``cross_entropy`` averages by
``class_weight[label]`` summed over every pixel, indexing the weights by the label itself, so a label map
holding ``ignore_index`` (255: what mmseg's preprocessor pads label maps with) raises ``IndexError: index
255 is out of bounds`` (open-mmlab/mmsegmentation issues 3734 and 3831, open; the maintained fork's mmseg 1.4.2
raises ``IndexError: too many indices`` there, with or without ignored pixels). This loss gives mmseg that
average factor itself, over the pixels that count:

    loss = sum_{i: y_i != ignore} w[y_i] * CE_i  /  sum_{i: y_i != ignore} w[y_i]

which is ``torch.nn.functional.cross_entropy(logits, labels, weight=w, ignore_index=ignore)``'s mean, and
equals mmseg's own result whenever no pixel is ignored. Everything else (the per-pixel loss, ``weight``,
``loss_weight``, the loss name) is mmseg's ``CrossEntropyLoss``.
"""
from mmseg.models.losses import CrossEntropyLoss

from ..registry import MODELS


@MODELS.register_module()
class ClassWeightedCrossEntropyLoss(CrossEntropyLoss):
    """mmseg's softmax ``CrossEntropyLoss`` with ``class_weight`` averaged over the non-ignored pixels."""

    def __init__(self, class_weight, **kwargs):
        if kwargs.get('use_sigmoid') or kwargs.get('use_mask'):
            raise ValueError('ClassWeightedCrossEntropyLoss is the softmax cross-entropy: for use_sigmoid or '
                             "use_mask use mmseg's CrossEntropyLoss")
        if kwargs.setdefault('avg_non_ignore', True) is not True:
            raise ValueError('ClassWeightedCrossEntropyLoss always averages over the non-ignored pixels: '
                             'leave avg_non_ignore out (or True)')
        super().__init__(class_weight=class_weight, **kwargs)
        if self.class_weight is None:
            raise ValueError('ClassWeightedCrossEntropyLoss needs class_weight (one weight per class); '
                             "without weights use mmseg's CrossEntropyLoss")

    def forward(self, cls_score, label, weight=None, avg_factor=None, reduction_override=None,
                ignore_index=-100, **kwargs):
        if len(self.class_weight) != cls_score.shape[1]:
            raise ValueError(f'class_weight has {len(self.class_weight)} entries but the head predicts '
                             f'{cls_score.shape[1]} classes: give one weight per class (num_classes)')
        reduction = reduction_override or self.reduction
        if avg_factor is None and reduction == 'mean':
            kept = label[label != ignore_index]
            if kept.numel() and (kept.min() < 0 or kept.max() >= cls_score.shape[1]):
                bad = kept.max() if kept.max() >= cls_score.shape[1] else kept.min()
                raise ValueError(f'label {int(bad)} is neither one of the head\'s {cls_score.shape[1]} classes '
                                 f'nor ignore_index ({ignore_index}): check num_classes, reduce_zero_label and '
                                 'the label maps')
            avg_factor = cls_score.new_tensor(self.class_weight)[kept].sum()
        return super().forward(cls_score, label, weight=weight, avg_factor=avg_factor,
                               reduction_override=reduction_override, ignore_index=ignore_index, **kwargs)
