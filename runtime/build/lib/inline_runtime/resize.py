"""Bilinear resizing of (C, H, W) score maps in numpy, as ``torch.nn.functional.interpolate(mode='bilinear')``.

For an output index ``o`` of a side of ``n`` inputs and ``m`` outputs the source coordinate is
``s = (o + 0.5) n / m - 0.5`` clamped at 0 (``align_corners=False``) or ``s = o (n - 1) / (m - 1)``
(``align_corners=True``); the output is ``(1 - l) x[floor s] + l x[min(floor s + 1, n - 1)]``, ``l = s - floor s``,
along H, then along W. OpenCV's ``INTER_LINEAR`` uses the same coordinates but reduced-precision weights (errors of
~1e-4 on float maps), so the logits are resized here to keep mmseg's label map where two classes nearly tie.
Channels are resized a block at a time, the label map kept as a running argmax: memory is one block, not C maps.
"""
import numpy as np


def source_weights(n_in, n_out, align_corners):
    """(lower index, upper index, upper weight) per output index along one side."""
    o = np.arange(n_out, dtype=np.float64)
    if align_corners:
        s = o * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros_like(o)
    else:
        s = np.maximum((o + 0.5) * (n_in / n_out) - 0.5, 0.0)
    lo = np.minimum(s.astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, (s - lo).astype(np.float32)


def resize_maps(maps, size, align_corners=False):
    """(C, h, w) float32 -> (C, H, W) for ``size = (H, W)``."""
    (lo_h, hi_h, w_h), (lo_w, hi_w, w_w) = (source_weights(n, m, align_corners)
                                            for n, m in zip(maps.shape[1:], size, strict=True))
    rows = maps[:, lo_h] * (1 - w_h)[:, None] + maps[:, hi_h] * w_h[:, None]
    return rows[:, :, lo_w] * (1 - w_w) + rows[:, :, hi_w] * w_w


def resize_and_label(logits, size, align_corners=False, keep_logits=False, threshold=0.3, block=16):
    """The label map at ``size`` of (C, h, w) logits resized bilinearly: ``argmax`` over classes (first on ties,
    as torch), or ``sigmoid > threshold`` for one channel; with ``keep_logits`` also the resized logits."""
    C = logits.shape[0]
    if C == 1:
        resized = resize_maps(logits, size, align_corners)
        labels = (1 / (1 + np.exp(-resized[0])) > threshold).astype(np.int64)
        return labels, (resized if keep_logits else None)
    best = np.full(size, -np.inf, np.float32)
    labels = np.zeros(size, np.int64)
    kept = np.empty((C, *size), np.float32) if keep_logits else None
    for start in range(0, C, block):
        part = resize_maps(logits[start:start + block], size, align_corners)
        if kept is not None:
            kept[start:start + len(part)] = part
        top = part.argmax(0)
        value = np.take_along_axis(part, top[None], 0)[0]
        better = value > best          # strictly: an earlier class keeps a tie, as argmax does
        labels[better] = top[better] + start
        best[better] = value[better]
    return labels, kept
