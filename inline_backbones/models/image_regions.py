"""Each image's own region in a zero-padded batch, for the backbone's padding-aware mode.

mmdet's and mmseg's data preprocessors stack images of different sizes into one tensor: each image sits
at the top-left and the rest (bottom rows, right columns) is padding. The padding-aware backbone needs
each image's ``(height, width)`` in pixels. It gets them, in this order of precedence:

1. **Explicit** (always wins): ``backbone(x, image_shapes=...)``, or shapes attached to the batch tensor
   with :func:`attach_image_shapes` (what :mod:`inline_backbones.det_preprocessor` and
   :mod:`inline_backbones.seg_preprocessor` do from each sample's ``img_shape``, so the repository's
   configs need no detector or segmentor code).
2. **Inferred** from the input by :func:`infer_image_shapes`, which relies on exactly this: the padding
   is on the bottom/right and holds exact zeros in every channel (mmdet/mmseg normalise first, then pad
   with ``pad_value=0``), and the image's own last row and last column are not exactly zero in every
   channel. An image whose bottom rows or right columns normalise to exactly zero (a pixel equal to the
   mean in every channel: impossible for uint8 images with the ImageNet means 123.675/116.28/103.53,
   possible with integer means or float pipelines) is inferred too small: those rows/columns are treated
   as padding. Use the explicit route wherever that can happen.
"""
import torch

SHAPES_ATTR = 'inline_image_shapes'


def attach_image_shapes(inputs, image_shapes):
    """Attach each image's ``(height, width)`` (a (B, 2) int tensor or a list of pairs) to ``inputs``."""
    setattr(inputs, SHAPES_ATTR, check_image_shapes(image_shapes, inputs))
    return inputs


def check_image_shapes(image_shapes, inputs):
    """(B, 2) long tensor on the host; raise ValueError unless 1 <= h <= H and 1 <= w <= W.

    The shapes stay on the host (a device tensor is copied once): every decision taken from them (which
    maps to mask, how to cut windows) then costs no device synchronisation; masks are built on the
    device from them (:func:`region_mask`)."""
    shapes = torch.as_tensor(image_shapes, dtype=torch.long, device='cpu').reshape(-1, 2)
    B, H, W = inputs.shape[0], *inputs.shape[-2:]
    if shapes.shape[0] != B:
        raise ValueError(f'image_shapes gives {shapes.shape[0]} images for a batch of {B}')
    bad = (shapes < 1).any(1) | (shapes[:, 0] > H) | (shapes[:, 1] > W)
    if bad.any():
        i = int(bad.nonzero()[0])
        raise ValueError(f'image {i} has shape {tuple(shapes[i].tolist())}, outside the {H}x{W} batch input')
    return shapes


def infer_image_shapes(inputs):
    """(B, 2) on the host: one past the last row / column holding a non-zero value in any channel (see
    module doc). One device-to-host copy per batch."""
    nonzero = inputs.ne(0).any(dim=1)                                           # (B, H, W)
    rows, cols = nonzero.any(dim=2), nonzero.any(dim=1)
    height = (rows * torch.arange(1, rows.shape[1] + 1, device=inputs.device)).amax(1)
    width = (cols * torch.arange(1, cols.shape[1] + 1, device=inputs.device)).amax(1)
    shapes = torch.stack([height, width], dim=1).cpu()
    empty = shapes[:, 0].eq(0)
    if empty.any():
        raise ValueError(f'image {int(empty.nonzero()[0])} of the batch is exactly zero everywhere, so its '
                         f'region cannot be inferred: pass image_shapes explicitly')
    return shapes


def image_shapes_of(inputs, image_shapes=None):
    """The explicit shapes (argument, then attached ones) if any, else the inferred ones."""
    if image_shapes is None:
        image_shapes = getattr(inputs, SHAPES_ATTR, None)
    if image_shapes is None:
        return infer_image_shapes(inputs)
    return check_image_shapes(image_shapes, inputs)


def downsample_shapes(shapes, stride):
    """Region in tokens after a stride-``stride`` patch embedding or merging: ceil(shape / stride)."""
    return torch.div(shapes + stride - 1, stride, rounding_mode='floor')


def region_mask(shapes, hw_shape, dtype, device=None):
    """(B, H*W, 1) mask on ``device``, 1 on each image's ``shapes`` rows x cols of the H x W map."""
    H, W = hw_shape
    shapes = shapes.to(device)
    rows = torch.arange(H, device=device) < shapes[:, :1]                        # (B, H)
    cols = torch.arange(W, device=device) < shapes[:, 1:]                        # (B, W)
    return (rows[:, :, None] & cols[:, None, :]).reshape(-1, H * W, 1).to(dtype)


def fills_map(shapes, hw_shape):
    """True when every image covers the whole H x W map (nothing to mask)."""
    return bool((shapes[:, 0] >= hw_shape[0]).all() and (shapes[:, 1] >= hw_shape[1]).all())


def attach_sample_shapes(data):
    """Attach each data sample's ``img_shape`` (the image before padding) to ``data['inputs']``: the
    explicit route of this package's mmdet/mmseg data preprocessors. Returns ``data``."""
    samples = data.get('data_samples')
    if samples:
        attach_image_shapes(data['inputs'], [sample.metainfo['img_shape'][:2] for sample in samples])
    return data
