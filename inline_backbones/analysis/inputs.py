"""What the attention analysis runs on: a backbone from a config or an arch (+ checkpoint), images
resized and normalised as the config's test pipeline does, and query points picked on objects. A config (mmdet/mmseg)
is read through the OpenMMLab edge (:mod:`inline_backbones.openmmlab.analysis_config`); an arch needs no OpenMMLab."""
import cv2
import numpy as np
import torch

from ..frameworks import require_openmmlab
from ..models import InLineSwinTransformer

IMAGENET_NORM = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], bgr_to_rgb=True)


def build_backbone(config=None, arch=None, checkpoint=None, prefix=None, **overrides):
    """An eval-mode :class:`InLineSwinTransformer` from an mmdet/mmseg ``config``'s ``model.backbone`` or
    from ``arch``, with ``overrides`` (e.g. ``attn_type``, ``kernel_func``); weights from ``checkpoint``
    (strict, ``prefix='backbone.'`` for detector/segmentor checkpoints) or random (truncated normal).
    Returns ``(backbone, norm)`` with ``norm`` the input normalisation (mean, std, bgr_to_rgb)."""
    if (config is None) == (arch is None):
        raise ValueError('give exactly one of config and arch')
    norm = dict(IMAGENET_NORM)
    if config is not None:
        require_openmmlab('an mmdet/mmseg config (--config; --arch needs none)')
        from ..openmmlab.analysis_config import config_backbone

        kwargs, config_norm = config_backbone(config, InLineSwinTransformer.__name__)
        norm.update(config_norm)
    else:
        kwargs = dict(arch=arch)
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    kwargs['init_cfg'] = dict(type='Pretrained', checkpoint=checkpoint, prefix=prefix) if checkpoint else None
    backbone = InLineSwinTransformer(**kwargs)
    backbone.init_weights()
    return backbone.eval(), norm


def fan_in_weights(module, seed, jitter=0.05):
    """Redraw every parameter of ``module`` in place (seeded): each weight of 2 or more dimensions from
    ``N(0, 1 / fan_in)`` (``fan_in``: the product of its dimensions after the first), then every parameter plus
    ``N(0, jitter^2)``, so that no bias, norm or table is zero and q.k spreads over O(1) (the released-format
    fixtures' weights, ``tests/fixtures/README.md``); the trunk's own init (truncated normal, std 0.02) leaves
    every attention score near zero, where all attentions are nearly uniform. Returns ``module``."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            if param.dim() >= 2:
                fan_in = param[0].numel()
                param.copy_(torch.randn(param.shape, generator=generator) / fan_in ** 0.5)
            param.add_(jitter * torch.randn(param.shape, generator=generator))
    return module


def load_image(path, norm, size=None, resize=None):
    """Read ``path`` and return ``(rgb uint8 H x W x 3, normalised 1 x 3 x H x W tensor)``.

    ``size`` (H, W) resizes exactly (bilinear, as mmcv's ``imresize``); otherwise ``resize``, a function of the BGR
    image (a config's test ``Resize``: :func:`inline_backbones.openmmlab.analysis_config.config_resize`), if given.
    """
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise FileNotFoundError(f'cannot read image {path!r}')
    if size is not None:
        img = cv2.resize(img, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    elif resize is not None:
        img = resize(img)
    rgb = np.ascontiguousarray(img[..., ::-1])
    net = rgb if norm.get('bgr_to_rgb', True) else img
    tensor = (torch.from_numpy(net.astype(np.float32)) - torch.tensor(norm['mean'])) / torch.tensor(norm['std'])
    return rgb, tensor.permute(2, 0, 1).unsqueeze(0).contiguous()


def object_points(rgb, num_points, min_distance=0.2, min_saliency=0.5):
    """Up to ``num_points`` pixel points (x, y) on objects: the maxima of the colour distance to the
    image's median colour (the background's, when objects cover less than half of it), box-blurred so
    that they fall inside objects, each at least ``min_distance`` of the shorter side from the others and
    at least ``min_saliency`` times as salient as the first."""
    height, width = rgb.shape[:2]
    step = max(1, min(height, width) // 64)
    small = rgb[::step, ::step].astype(np.float32)
    saliency = np.linalg.norm(small - np.median(small.reshape(-1, 3), axis=0), axis=-1)
    blur = max(3, min(small.shape[:2]) // 8)
    saliency = cv2.blur(saliency, (blur, blur))
    ys, xs = np.mgrid[:small.shape[0], :small.shape[1]]
    radius = min_distance * min(small.shape[:2])
    points, first = [], saliency.max()
    for _ in range(num_points):
        y, x = np.unravel_index(np.argmax(saliency), saliency.shape)
        if saliency[y, x] < min_saliency * first:
            break
        points.append((int(x * step + step // 2), int(y * step + step // 2)))
        saliency[(ys - y) ** 2 + (xs - x) ** 2 < radius ** 2] = -1
    return points


def token_index(points, image_shape, hw_shape):
    """Flat token indices of pixel points (x, y) on a token map of ``hw_shape`` covering the image."""
    (height, width), (H, W) = image_shape, hw_shape
    return [min(int(y * H / height), H - 1) * W + min(int(x * W / width), W - 1) for x, y in points]
