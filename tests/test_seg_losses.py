"""ClassWeightedCrossEntropyLoss: PyTorch's weighted, ignore-aware mean; mmseg's loss where mmseg works."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip('mmseg')
from mmseg.models.losses import CrossEntropyLoss  # noqa: E402

from inline_backbones.seg_losses import ClassWeightedCrossEntropyLoss  # noqa: E402

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
    theirs = CrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=True)(logits, labels, ignore_index=255)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    logits, labels = batch(ignored=True)
    # The reason the class exists (mmsegmentation issues 3734, 3831). When mmseg fixes it, this fails: then
    # the shapes config can go back to mmseg's CrossEntropyLoss and this module can go.
    with pytest.raises(IndexError, match='out of bounds'):
        CrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=True)(logits, labels, ignore_index=255)


def test_all_pixels_ignored_gives_zero_not_nan():
    logits, labels = batch(ignored=False)
    loss = ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)(logits, torch.full_like(labels, 255),
                                                               ignore_index=255)
    assert torch.isfinite(loss) and loss.item() == 0


def test_mistakes_are_named():
    logits, labels = batch(ignored=False)
    with pytest.raises(ValueError, match='class_weight has 3 entries but the head predicts 4 classes'):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS[:3])(logits, labels, ignore_index=255)
    labels[0, 0, 0] = 7
    with pytest.raises(ValueError, match=r"label 7 is neither one of the head's 4 classes nor ignore_index \(255\)"):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)(logits, labels, ignore_index=255)
    labels[0, 0, 0] = -3
    with pytest.raises(ValueError, match='label -3 is neither'):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS)(logits, labels, ignore_index=255)
    with pytest.raises(ValueError, match='needs class_weight'):
        ClassWeightedCrossEntropyLoss(class_weight=None)
    with pytest.raises(ValueError, match='softmax cross-entropy'):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS, use_sigmoid=True)
    with pytest.raises(ValueError, match='always averages over the non-ignored pixels'):
        ClassWeightedCrossEntropyLoss(class_weight=WEIGHTS, avg_non_ignore=False)
