"""Shared pieces of the padding-aware tests: small presets, images, batches padded by mmdet's and mmseg's own
data preprocessors (mmdet and mmseg imported there: a test without them is skipped), per-region comparison, a mixer
on a padded map against the image alone."""
import math

import pytest
import torch

from inline_backbones import InLineSwinTransformer
from inline_backbones.models.tokens.token_map import TokenMap

# The T/S/B layouts on a small trunk (embed 16, depths 2-2-4-2) so the tests stay fast.
SMALL_PRESETS = {
    'tiny': dict(embed_dims=16, depths=[2, 2, 4, 2], num_heads=[1, 2, 4, 8], attn_type='IIIS'),
    'small': dict(embed_dims=16, depths=[2, 2, 4, 2], num_heads=[1, 2, 4, 8], attn_type='IISS'),
    'base': dict(embed_dims=16, depths=[2, 2, 4, 2], num_heads=[1, 2, 4, 8], attn_type='IIMS2'),
}
# (height, width) of two images: one a multiple of 32, one not; batched they pad to 160 x 224.
IMAGE_SIZES = [(128, 224), (150, 171)]
STRIDES = (4, 8, 16, 32)


def randomized(model):
    """``model`` with every parameter drawn non-trivially (norm weights near 1), in eval mode."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if 'norm' in name else 0.1)
                    + (1.0 if name.endswith('weight') and 'norm' in name else 0.))
    return model.eval()


def small_backbone(preset, depths=None, **kwargs):
    """A randomly initialised small backbone (every parameter non-trivial), eval mode, seed fixed; ``depths``
    (optional) shortens its stages where a test's cost is per block (ONNX export)."""
    torch.manual_seed(0)
    arch = SMALL_PRESETS[preset] if depths is None else dict(SMALL_PRESETS[preset], depths=depths)
    return randomized(InLineSwinTransformer(arch=arch, drop_path_rate=0., **kwargs))


def images(seed=0):
    """uint8 (3, H, W) images of IMAGE_SIZES, as a pipeline's PackInputs gives them."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8) for h, w in IMAGE_SIZES]


MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def preprocessed(preprocessor, sample_type, imgs, training):
    """``imgs`` through an OpenMMLab data ``preprocessor``, each with its shape in a ``sample_type``: the batch and
    each image's shape as the preprocessor left it."""
    samples = [sample_type(metainfo=dict(img_shape=tuple(i.shape[1:]))) for i in imgs]
    data = preprocessor(dict(inputs=list(imgs), data_samples=samples), training)
    return data['inputs'], [s.img_shape for s in data['data_samples']]


def det_batch(imgs):
    """mmdet's own DetDataPreprocessor: normalise, then zero-pad to the batch's largest size and x32."""
    mmdet_pre = pytest.importorskip('mmdet.models.data_preprocessors')
    from mmdet.structures import DetDataSample

    pre = mmdet_pre.DetDataPreprocessor(mean=MEAN, std=STD, bgr_to_rgb=True, pad_size_divisor=32)
    return preprocessed(pre, DetDataSample, imgs, False)


def seg_batch(imgs):
    """mmseg's own SegDataPreProcessor (training mode, the one that batches different sizes)."""
    mmseg_pre = pytest.importorskip('mmseg.models.data_preprocessor')
    from mmseg.structures import SegDataSample

    pre = mmseg_pre.SegDataPreProcessor(mean=MEAN, std=STD, bgr_to_rgb=True, size_divisor=32)
    return preprocessed(pre, SegDataSample, imgs, True)


def relative_difference_on_region(batched, alone, index, hw):
    """max over stages of |batched - alone| / |alone| (Frobenius) on image ``index``'s own region."""
    worst = 0.
    for out_b, out_a, stride in zip(batched, alone, STRIDES, strict=True):
        h, w = math.ceil(hw[0] / stride), math.ceil(hw[1] / stride)
        a = out_a[0, :, :h, :w]
        b = out_b[index, :, :h, :w]
        worst = max(worst, ((b - a).norm() / a.norm()).item())
    return worst


def region_differences(model, make_batch, explicit):
    """Per image of :func:`images`, the relative difference of its maps batched by ``make_batch`` (padded to
    160 x 224) and alone, on its own region (``explicit``: regions given, else carried or inferred)."""
    imgs = images()
    batch, shapes = make_batch(imgs)
    assert batch.shape[-2:] == (160, 224)
    with torch.no_grad():
        batched = model(batch, image_shapes=shapes if explicit and model.padding_aware else None)
        worst = []
        for i, img in enumerate(imgs):
            alone, alone_shapes = make_batch([img])
            out = model(alone, image_shapes=alone_shapes if explicit and model.padding_aware else None)
            worst.append(relative_difference_on_region(batched, out, i, IMAGE_SIZES[i]))
    return worst


def assert_padded_map_equals_image_alone(mixer, map_hw=(12, 12), image_hw=(7, 9)):
    """``mixer`` on a map of ``map_hw`` tokens holding one image of ``image_hw`` tokens (the rest random: padding may
    hold anything) equals it on the image's own tokens alone, on the image. Returns the map, for further checks."""
    (H, W), (h, w), C = map_hw, image_hw, mixer.embed_dims
    x = torch.randn(1, H * W, C)
    own = x.view(1, H, W, C)[:, :h, :w].reshape(1, h * w, C)
    region = torch.tensor([[h, w]])
    with torch.no_grad():
        padded = mixer(x, TokenMap.of(x, map_hw, region))
        alone = mixer(own, TokenMap.of(own, image_hw, region))
    torch.testing.assert_close(padded.view(H, W, C)[:h, :w], alone.view(h, w, C), rtol=1e-4, atol=1e-5)
    return x
