"""Images as the test pipelines of mmseg/mmdet see them, in numpy and OpenCV.

* :func:`read_image`: ``cv2.imread(path, IMREAD_COLOR)``, BGR uint8, what mmcv's ``LoadImageFromFile`` decodes.
* :func:`pipeline_resize`: mmcv's ``Resize`` (``imrescale`` / ``imresize`` with OpenCV's bilinear): with
  ``keep_ratio`` the factor is ``min(max(scale) / max(h, w), min(scale) / min(h, w))`` and the new size
  ``int(w * f + 0.5) x int(h * f + 0.5)``; without, exactly ``scale`` (w, h); or ``scale_factor`` alone. Returns the
  image and ``(w_scale, h_scale)`` = new size / old size per side, as mmcv records ``scale_factor``.
* :func:`pad_to`: bottom/right padding with a per-channel value (the normalisation mean: 0 after normalising, which
  is what mmdet's and mmseg's data preprocessors pad with) to a multiple of ``divisor`` and at least ``min_size``.
"""
import difflib
import os
import os.path as osp

import cv2
import numpy as np

from .backends import RuntimeInputError


def closest(path):
    """`` (did you mean X?)`` for the file in ``path``'s folder whose name is closest to it, or ''."""
    folder = osp.dirname(path) or '.'
    if not osp.isdir(folder):
        return f' (the folder {folder!r} does not exist either)'
    match = difflib.get_close_matches(osp.basename(path), sorted(os.listdir(folder)), n=1, cutoff=0.6)
    return f' (did you mean {osp.join(osp.dirname(path), match[0])!r}?)' if match else ''


def is_image(path):
    """Whether OpenCV can decode ``path`` (by its signature, ``cv2.haveImageReader``, not its extension)."""
    return osp.isfile(path) and cv2.haveImageReader(path)


def image_inputs(inputs):
    """``(images, skipped)`` for the command line's ``inputs`` (files, or one or more folders).

    A folder gives its images in name order (hidden files ignored) and skips the rest (``skipped``: their paths).
    A file given by name must exist and be an image. No image at all is an error.
    """
    images, skipped = [], []
    for given in inputs:
        if osp.isdir(given):
            for name in sorted(os.listdir(given)):
                path = osp.join(given, name)
                if name.startswith('.') or osp.isdir(path):
                    continue
                (images if is_image(path) else skipped).append(path)
        elif not osp.exists(given):
            raise RuntimeInputError(f'image not found: {given!r}{closest(given)}')
        elif not is_image(given):
            raise RuntimeInputError(f'{given!r} is not an image OpenCV can read (JPEG, PNG, BMP, TIFF, WebP ...): give '
                                    'image files, or a folder (whose other files are skipped)')
        else:
            images.append(given)
    if not images:
        raise RuntimeInputError(f'no image in {", ".join(map(repr, inputs))}'
                                + (f' ({len(skipped)} other file(s) skipped)' if skipped else ''))
    return images, skipped


def read_image(path):
    """(H, W, 3) BGR uint8 of an image file; RuntimeInputError if it cannot be read."""
    image = cv2.imread(os.fspath(path), cv2.IMREAD_COLOR)
    if image is None:
        raise RuntimeInputError(f'{path}: not an image OpenCV can read')
    return image


def rescale_size(w, h, scale):
    """mmcv's ``rescale_size``: (new_w, new_h) for a keep-ratio resize to ``scale`` (a number, or (long, short)
    edges in either order)."""
    if isinstance(scale, (int, float)):
        factor = float(scale)
    else:
        factor = min(max(scale) / max(h, w), min(scale) / min(h, w))
    return int(w * factor + 0.5), int(h * factor + 0.5)


def pipeline_resize(image, resize):
    """``image`` resized by the metadata's ``resize`` (None: unchanged) and ``(w_scale, h_scale)``."""
    h, w = image.shape[:2]
    if not resize:
        return image, (1.0, 1.0)
    if resize.get('scale') is not None:
        size = rescale_size(w, h, resize['scale']) if resize.get('keep_ratio') else tuple(resize['scale'])
    else:
        factor = resize['scale_factor']
        factor = (factor, factor) if isinstance(factor, (int, float)) else factor
        size = rescale_size(w, h, factor[0]) if resize.get('keep_ratio') else \
            (int(w * factor[0] + 0.5), int(h * factor[1] + 0.5))
    if size == (w, h):
        return image, (1.0, 1.0)
    out = cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)
    return out, (size[0] / w, size[1] / h)


def pad_to(image, value, divisor=None, min_size=None):
    """``image`` (H, W, C) padded bottom/right with ``value`` (per channel) so that each side is a multiple of
    ``divisor`` and at least ``min_size``; returns it and the padded (bottom, right) amounts."""
    h, w = image.shape[:2]
    H, W = h, w
    if min_size:
        H, W = max(H, min_size[0]), max(W, min_size[1])
    if divisor:
        H, W = -(-H // divisor) * divisor, -(-W // divisor) * divisor
    if (H, W) == (h, w):
        return image, (0, 0)
    out = np.empty((H, W, image.shape[2]), np.float32)
    out[...] = np.asarray(value, np.float32)
    out[:h, :w] = image
    return out, (H - h, W - w)


def to_input(image):
    """(H, W, 3) image -> the file's (1, 3, H, W) float32 input (raw pixel values)."""
    return np.ascontiguousarray(image.transpose(2, 0, 1)[None], dtype=np.float32)
