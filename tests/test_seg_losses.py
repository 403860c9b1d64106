"""ClassWeightedCrossEntropyLoss: PyTorch's weighted, ignore-aware mean; mmseg's loss where mmseg works."""
import re

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip('mmseg')
from mmseg.models.losses import CrossEntropyLoss  # noqa: E402

from inline_backbones.openmmlab.line import check_one_line  # noqa: E402
from inline_backbones.openmmlab.seg_losses import ClassWeightedCrossEntropyLoss  # noqa: E402

WEIGHTS = [0.5, 1.0, 2.0, 1.5]


def batch(ignored):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, len(WEIGHTS), 9, 11, generator=g, requires_grad=True)
    labels = torch.randint(0, len(WEIGHTS), (2, 9, 11), generator=g)
    if ignored:
        labels[0, 5:] = 255      # a padded bottom band, as mmseg's preprocessor writes it
        labels[1, :, 7:] = 255   # a padded right band
    return logits, labels


def test_equals_torch_weighted_mean_over_the_pixels_that_count():
    logits, labels = batch(ignored=True)
    ours = ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS, loss_weight=0.4)(logits, labels, ignore_index=255)
    want = 0.4 * F.cross_entropy(logits, labels, weight=torch.tensor(WEIGHTS), ignore_index=255)
    torch.testing.assert_close(ours, want, rtol=1e-5, atol=1e-6)
    g_ours, = torch.autograd.grad(ours, logits)
    g_want, = torch.autograd.grad(want, logits)
    torch.testing.assert_close(g_ours, g_want, rtol=1e-5, atol=1e-7)
    assert g_ours[0, :, 5:].abs().max() == 0     # ignored pixels get no gradient


def test_equals_mmseg_without_ignored_pixels_where_mmseg_fails_with_them():
    logits, labels = batch(ignored=False)
    ours = ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)(logits, labels, ignore_index=255)
    if check_one_line() == 'onedl':
        # The fork's mmseg (onedl-mmsegmentation 1.4.2) fails with class weights even where no pixel is ignored.
        with pytest.raises(IndexError, match='too many indices'):
            CrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=True)(logits, labels, ignore_index=255)
    else:
        theirs = CrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=True)(logits, labels, ignore_index=255)
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    logits, labels = batch(ignored=True)
    # The reason the class exists (mmsegmentation issues 3734, 3831; the fork fails on another line of the same
    # average). When mmseg fixes it, this fails: then the shapes config can go back to mmseg's CrossEntropyLoss and
    # this module can go.
    with pytest.raises(IndexError, match='too many indices' if check_one_line() == 'onedl' else 'out of bounds'):
        CrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=True)(logits, labels, ignore_index=255)


def test_all_pixels_ignored_gives_zero_not_nan():
    logits, labels = batch(ignored=False)
    loss = ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)(logits, torch.full_like(labels, 255),
                                                               ignore_index=255)
    assert torch.isfinite(loss) and loss.item() == 0


def test_other_reductions_sample_weights_and_a_given_avg_factor_are_mmsegs():
    logits, labels = batch(ignored=True)
    w = torch.tensor(WEIGHTS)
    loss = ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)
    per_pixel = F.cross_entropy(logits, labels, weight=w, ignore_index=255, reduction='none')
    torch.testing.assert_close(loss(logits, labels, ignore_index=255, reduction_override='sum'), per_pixel.sum())
    torch.testing.assert_close(loss(logits, labels, ignore_index=255, reduction_override='none'), per_pixel)
    torch.testing.assert_close(loss(logits, labels, ignore_index=255, avg_factor=10.), per_pixel.sum() / 10.)
    sample = torch.rand(labels.shape, generator=torch.Generator().manual_seed(1))
    kept = w[labels.clamp(max=3)] * (labels != 255)
    torch.testing.assert_close(loss(logits, labels, weight=sample, ignore_index=255),
                               (per_pixel * sample).sum() / kept.sum())


def test_mistakes_are_named():
    def refused(message):
        return pytest.raises(ValueError, match='^' + re.escape(message) + '$')

    logits, labels = batch(ignored=False)
    with refused('class_weight has 3 entries but the head predicts 4 classes: give one weight per class '
                 '(num_classes)'):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS[:3])(logits, labels, ignore_index=255)
    for bad in (4, -3):       # one past the last class; a negative label
        labels[0, 0, 0] = bad
        with refused(f"label {bad} is neither one of the head's 4 classes nor ignore_index (255): check "
                     'num_classes, reduce_zero_label and the label maps'):
            ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)(logits, labels, ignore_index=255)
    with refused("ClassWeightedCrossEntropyLoss needs class_weight (one weight per class); without weights use "
                 "mmseg's CrossEntropyLoss"):
        ClassWeightedCrossEntropyLoss(class_weight=None)
    for option in ('use_sigmoid', 'use_mask'):
        with refused("ClassWeightedCrossEntropyLoss is the softmax cross-entropy: for use_sigmoid or use_mask use "
                     "mmseg's CrossEntropyLoss"):
            ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS, **{option: True})
    with refused('ClassWeightedCrossEntropyLoss always averages over the non-ignored pixels: leave avg_non_ignore '
                 'out (or True)'):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=False)
