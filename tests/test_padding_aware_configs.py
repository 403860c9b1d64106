"""Through the repository's own (embedded) Mask R-CNN and UperNet configs, with their data preprocessors:
an image's backbone outputs in a padded batch of two equal the image alone on its own region, for an
image whose size is a multiple of 32 and for one that is not."""
import os.path as osp

import pytest
import torch
from helpers import build_detector, build_segmentor
from padding_cases import IMAGE_SIZES, images, relative_difference_on_region

pytest.importorskip('mmdet')
pytest.importorskip('mmseg')
from mmdet.testing import demo_mm_inputs  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def backbone_outputs(model, run):
    captured = []
    hook = model.backbone.register_forward_hook(lambda m, i, out: captured.append(out))
    try:
        with torch.no_grad():
            run()
    finally:
        hook.remove()
    return captured[0]


def assert_batched_equals_alone(model, run_batch, run_alone):
    batched = backbone_outputs(model, run_batch)
    assert batched[0].shape[-2:] == (40, 56)                  # padded to 160 x 224 pixels
    for i, hw in enumerate(IMAGE_SIZES):
        alone = backbone_outputs(model, lambda i=i: run_alone(i))
        assert relative_difference_on_region(batched, alone, i, hw) < 1e-4


def test_mask_rcnn_config_test_step():
    cfg = Config.fromfile(osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py'))
    model = build_detector(cfg).eval()

    def packed(indices):
        data = demo_mm_inputs(batch_size=2, image_shapes=[(3, *hw) for hw in IMAGE_SIZES], num_classes=4)
        data['inputs'] = images()
        return {k: [v[i] for i in indices] for k, v in data.items()}

    assert_batched_equals_alone(model, lambda: model.test_step(packed([0, 1])),
                                lambda i: model.test_step(packed([i])))


def test_upernet_config_data_preprocessor():
    """mmseg's test mode refuses batches of different sizes, so the batch is made by the config's data
    preprocessor in training mode (padding to the batch's largest size, x32, instead of the crop)."""
    cfg = Config.fromfile(osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py'))
    cfg.model.data_preprocessor.size = None
    cfg.model.data_preprocessor.size_divisor = 32
    model = build_segmentor(cfg).eval()

    def run(indices):
        imgs = images()
        samples = [SegDataSample(metainfo=dict(img_shape=IMAGE_SIZES[i], ori_shape=IMAGE_SIZES[i])) for i in indices]
        data = model.data_preprocessor(dict(inputs=[imgs[i] for i in indices], data_samples=samples), True)
        return model.extract_feat(data['inputs'])

    assert_batched_equals_alone(model, lambda: run([0, 1]), lambda i: run([i]))
