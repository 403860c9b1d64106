"""The regions the data preprocessors attach reach the padding-aware backbone through mmseg's slide inference
(which crops the batch), mmseg's training step and mmdet's batch augments, with the models' own code.

Where the regions are lost, the backbone falls back to inferring them from trailing exact zeros, which is
wrong on these batches: an image whose last rows (columns) normalise to exactly zero (pixels equal to the
mean in every channel), and a non-zero pad value."""
import pytest
import torch
import torch.nn.functional as F
from padding_cases import small_backbone

from inline_backbones.regions import SHAPES_ATTR, infer_image_shapes

pytest.importorskip('mmseg')
pytest.importorskip('mmdet')
from mmdet.testing import demo_mm_inputs  # noqa: E402
from mmengine.config import ConfigDict  # noqa: E402
from mmengine.logging import MessageHub  # noqa: E402
from mmengine.registry import init_default_scope  # noqa: E402
from mmengine.structures import PixelData  # noqa: E402
from mmseg.registry import MODELS as SEG_MODELS  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402
from mmseg.utils import register_all_modules  # noqa: E402

import inline_backbones.openmmlab.det_preprocessor  # noqa: E402,F401  (registers RegionDetDataPreprocessor)
import inline_backbones.openmmlab.seg_preprocessor  # noqa: E402,F401  (registers RegionSegDataPreProcessor)
from inline_backbones.openmmlab.det_preprocessor import RegionDetDataPreprocessor  # noqa: E402

MEAN, STD = [128., 128., 128.], [64., 64., 64.]
ARCH = dict(embed_dims=16, depths=[2, 2, 2, 2], num_heads=[1, 1, 2, 2], attn_type='IIIS')
CROP, STRIDE = (64, 64), (48, 48)
IMAGE = (100, 90)                      # padded to 128 x 96 by test_cfg=dict(size_divisor=32)


def segmentor(pad_val):
    register_all_modules(init_default_scope=False)
    init_default_scope('mmseg')
    model = SEG_MODELS.build(ConfigDict(
        type='EncoderDecoder',
        data_preprocessor=dict(type='inline_backbones.RegionSegDataPreProcessor', mean=MEAN, std=STD,
                               bgr_to_rgb=False, pad_val=pad_val, size_divisor=32,
                               test_cfg=dict(size_divisor=32)),
        backbone=dict(type='inline_backbones.InLineSwinTransformer', arch=ARCH, padding_aware=True,
                      drop_path_rate=0.),
        decode_head=dict(type='FCNHead', in_channels=[16, 32, 64, 128], in_index=[0, 1, 2, 3],
                         input_transform='resize_concat', channels=16, num_convs=1, concat_input=False,
                         num_classes=3, norm_cfg=None, align_corners=False,
                         loss_decode=dict(type='CrossEntropyLoss', loss_weight=1.0)),
        test_cfg=dict(mode='slide', crop_size=CROP, stride=STRIDE)))
    torch.manual_seed(0)
    with torch.no_grad():                         # every weight non-trivial, as in padding_cases
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if 'norm' in name else 0.1)
                    + (1.0 if name.endswith('weight') and 'norm' in name else 0.))
    return model.eval()


def seg_images(case):
    g = torch.Generator().manual_seed(1)
    imgs = [torch.randint(0, 256, (3, *IMAGE), generator=g, dtype=torch.uint8) for _ in range(2)]
    if case == 'mean-rows':
        imgs[0][:, -12:] = 128                 # image 0: its last 12 rows normalise to exactly 0
        imgs[1][:, :, -10:] = 128              # image 1: its last 10 columns
    return imgs


def seg_data(imgs, with_labels=False):
    samples = []
    for _ in imgs:
        sample = SegDataSample(metainfo=dict(img_shape=IMAGE, ori_shape=IMAGE))
        if with_labels:
            sample.gt_sem_seg = PixelData(data=torch.randint(0, 3, (1, *IMAGE)))
        samples.append(sample)
    return dict(inputs=list(imgs), data_samples=samples)


def reference_slide(model, inputs, shapes):
    """mmseg's slide inference written out, each crop through the backbone with its true region given
    explicitly: rows min(h, y2) - y1 and columns min(w, x2) - x1 of each image, at least 0."""
    (h_crop, w_crop), (h_stride, w_stride) = CROP, STRIDE
    B, _, H, W = inputs.shape
    preds = torch.zeros(B, model.decode_head.out_channels, H, W)
    count = torch.zeros(B, 1, H, W)
    for i in range(max(H - h_crop + h_stride - 1, 0) // h_stride + 1):
        for j in range(max(W - w_crop + w_stride - 1, 0) // w_stride + 1):
            y2, x2 = min(i * h_stride + h_crop, H), min(j * w_stride + w_crop, W)
            y1, x1 = max(y2 - h_crop, 0), max(x2 - w_crop, 0)
            crop = inputs[:, :, y1:y2, x1:x2]
            regions = [(max(0, min(h, y2) - y1), max(0, min(w, x2) - x1)) for h, w in shapes]
            feats = model.backbone(crop, image_shapes=regions)
            logits = model.decode_head.predict(feats, [dict(img_shape=crop.shape[2:])] * B, model.test_cfg)
            preds += F.pad(logits, (x1, W - x2, y1, H - y2))
            count[:, :, y1:y2, x1:x2] += 1
    return preds / count


@pytest.mark.parametrize('case, pad_val', [('mean-rows', 0), ('pad-value', 1)], ids=['mean-rows', 'pad-value'])
def test_slide_inference_gives_each_crop_its_own_region(case, pad_val):
    """mmseg's EncoderDecoder.test_step with mode='slide' (crops of the test-time padded batch, each sent to
    ``backbone(crop)``) equals the written-out slide with every crop's true region passed explicitly."""
    model = segmentor(pad_val)
    imgs = seg_images(case)
    data = seg_data(imgs)
    with torch.no_grad():
        results = model.test_step(data)
        inputs = model.data_preprocessor(seg_data(imgs), False)['inputs']
        assert inputs.shape[-2:] == (128, 96)
        plain = inputs.clone().as_subclass(torch.Tensor)
        # Inference would be wrong on this batch: the carried regions are what the comparison exercises.
        assert infer_image_shapes(plain).tolist() != [list(IMAGE)] * 2
        expected = reference_slide(model, plain, [IMAGE] * 2)
    for b, result in enumerate(results):
        got = result.seg_logits.data
        ref = expected[b, :, :IMAGE[0], :IMAGE[1]]
        error = ((got - ref).norm() / ref.norm()).item()
        assert error < 1e-5, (b, error)


def test_training_step_reads_the_carried_regions():
    """mmseg's loss path (training-mode preprocessing: pad to the batch's size, x32) with images of two
    sizes: the backbone gets the samples' img_shape, and the losses back-propagate."""
    model = segmentor(pad_val=0).train()
    imgs = [torch.full((3, 100, 90), 128, dtype=torch.uint8), torch.full((3, 70, 120), 128, dtype=torch.uint8)]
    imgs[0][:, :50, :50] = 7                    # only part of each image differs from the mean
    imgs[1][:, :30, :30] = 250
    data = seg_data(imgs, with_labels=True)
    for sample, img in zip(data['data_samples'], imgs, strict=True):
        sample.set_metainfo(dict(img_shape=tuple(img.shape[1:]), ori_shape=tuple(img.shape[1:])))
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 3, (1, *img.shape[1:])))
    seen = []
    hook = model.backbone.register_forward_pre_hook(
        lambda m, args: seen.append(getattr(args[0], SHAPES_ATTR, None)))
    try:
        batch = model.data_preprocessor(data, True)
        losses = model(**batch, mode='loss')
    finally:
        hook.remove()
    assert seen[0].tolist() == [[100, 90], [70, 120]]
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.backbone.parameters())
    assert sum(p.grad.abs().sum() for p in model.backbone.parameters()) > 0


@pytest.mark.parametrize('augment', ['fixed-size-pad', 'sync-random-resize'])
def test_mmdet_batch_augments_then_clone_and_crop_reach_the_backbone(augment):
    """mmdet's DetDataPreprocessor with a batch augment (training mode): the carried regions are the
    samples' img_shape after the augment, and a clone's crop of the batch reaches the backbone with its own
    region (the same outputs as with that region passed explicitly)."""
    augments = {'fixed-size-pad': dict(type='BatchFixedSizePad', size=(160, 192)),
                'sync-random-resize': dict(type='BatchSyncRandomResize', random_size_range=(96, 96),
                                           size_divisor=32, interval=1)}
    init_default_scope('mmdet')
    pre = RegionDetDataPreprocessor(mean=MEAN, std=STD, pad_size_divisor=32, batch_augments=[augments[augment]])
    shapes = [(100, 90), (70, 120)]

    def make_data():
        data = demo_mm_inputs(batch_size=2, image_shapes=[(3, *s) for s in shapes], num_classes=3)
        g = torch.Generator().manual_seed(2)
        data['inputs'] = [torch.randint(0, 256, (3, *s), generator=g, dtype=torch.uint8) for s in shapes]
        data['inputs'][0][:, -12:] = 128           # last rows of image 0 normalise to exactly zero
        data['inputs'][1][:, :, -8:] = 128         # last columns of image 1
        return data

    hub = MessageHub.get_current_instance()
    saved = hub.runtime_info.get('iter')
    hub.update_info('iter', 0)
    try:
        out = pre(make_data(), training=True)
        if augment == 'sync-random-resize':      # the first batch sets the size, later ones are resized
            out = pre(make_data(), training=True)
    finally:
        hub.runtime_info.pop('iter')
        if saved is not None:
            hub.update_info('iter', saved)
    x, samples = out['inputs'], out['data_samples']
    img_shapes = [tuple(s.img_shape) for s in samples]
    if augment == 'sync-random-resize':
        assert x.shape[-2:] != (128, 128) and img_shapes != shapes     # the batch was rescaled
    else:
        assert x.shape[-2:] == (160, 192) and img_shapes == shapes
    assert getattr(x, SHAPES_ATTR).tolist() == [list(s) for s in img_shapes]
    H, W = x.shape[-2:]
    y1, x1 = H // 3, W // 4
    crop = x.clone()[:, :, y1:, x1:]
    regions = [(max(0, h - y1), max(0, w - x1)) for h, w in img_shapes]
    plain = crop.as_subclass(torch.Tensor)
    assert infer_image_shapes(plain).tolist() != [list(r) for r in regions]
    model = small_backbone('tiny', padding_aware=True)
    with torch.no_grad():
        got, ref = model(crop), model(plain, image_shapes=regions)
    for a, b in zip(got, ref, strict=True):
        assert torch.equal(a, b)


def test_both_preprocessors_default_to_test_mode():
    """Called without ``training`` (as mmengine's test and val loops do), neither applies training padding or batch
    augments: the seg preprocessor pads to test_cfg's size_divisor, not to its training size; the det one skips its
    BatchFixedSizePad. Each still carries the regions."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    from inline_backbones.openmmlab.seg_preprocessor import RegionSegDataPreProcessor

    image = torch.randint(0, 256, (3, 50, 70), dtype=torch.uint8)
    sample = SegDataSample(gt_sem_seg=PixelData(data=torch.zeros(1, 50, 70, dtype=torch.uint8)),
                           metainfo=dict(img_shape=(50, 70), ori_shape=(50, 70)))
    seg = RegionSegDataPreProcessor(mean=MEAN, std=STD, size=(96, 96), test_cfg=dict(size_divisor=32))
    for call, hw in ((lambda d: seg(d), (64, 96)), (lambda d: seg(d, True), (96, 96))):
        x = call(dict(inputs=[image], data_samples=[sample.clone()]))['inputs']
        assert x.shape[-2:] == hw and getattr(x, SHAPES_ATTR).tolist() == [[50, 70]]
    init_default_scope('mmdet')
    det = RegionDetDataPreprocessor(mean=MEAN, std=STD, pad_size_divisor=32,
                                    batch_augments=[dict(type='BatchFixedSizePad', size=(160, 192))])
    for call, hw in ((lambda d: det(d), (64, 96)), (lambda d: det(d, True), (160, 192))):
        data = demo_mm_inputs(batch_size=1, image_shapes=[(3, 50, 70)], num_classes=3)
        x = call(data)['inputs']
        assert x.shape[-2:] == hw and getattr(x, SHAPES_ATTR).tolist() == [[50, 70]]
