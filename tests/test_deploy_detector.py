"""Whole-model export of mmdet detectors (``inline_backbones.deployment.detector``): one ONNX file per detector,
run by ``inline_runtime`` (numpy + OpenCV + a runtime, no torch), gives mmdet's own ``inference_detector`` results
(``whole.check_whole``: the same detections, boxes, scores, labels and pasted masks) at sizes that resize to
non-square shapes that are not multiples of 32. Small configs with random weights: RetinaNet (InLine-PVT-T, test
resize lowered to 320x192, classification bias lowered so that the score threshold and ``max_per_img`` both cut
the set), the small padding-aware InLine-Swin Mask R-CNN (its random RPN gives proposals, its random bbox head
scores above the threshold) and the COCO Cascade Mask R-CNN on that small trunk."""
import os.path as osp
import re
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest
import torch

from inline_backbones.data.tool_inputs import ToolInputError
from inline_backbones.deployment import detector
from inline_backbones.deployment.whole import check_whole, export_whole, load_task_model
from inline_runtime import load, read_metadata

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
RETINANET = osp.join(ROOT, 'mmdet_configs', 'retinanet_inline-pvt-t_fpn_1x_coco.py')
MASK_RCNN = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py')
CASCADE = osp.join(ROOT, 'mmdet_configs', 'cascade-mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py')
RETINA_SCALE = (320, 192)
# (150, 230) -> 192x294 for RetinaNet (320x192) and 167x256 for the Mask R-CNN (256x256); (300, 100) -> 320x107
# and 256x85: padded by the helper on one side and on the other.
SHAPES = ((150, 230), (300, 100))


def smooth_images(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [(f'{h}x{w}', cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (7, 7), 3))
            for h, w in shapes]


def exported(tmp_path_factory, config, name, cfg_options=None, adjust=None):
    torch.manual_seed(0)
    cfg, task, model, meta = load_task_model(config, cfg_options=cfg_options)
    if adjust:
        adjust(model)
    path = str(tmp_path_factory.mktemp('detector') / f'{name}.onnx')
    start = time.perf_counter()
    export_whole(cfg, task, model, meta, path, min_side=32, max_side=1024)
    print(f'{name}: exported in {time.perf_counter() - start:.1f} s')
    return cfg, task, model, path


def lower_retina_bias(model):
    with torch.no_grad():
        model.bbox_head.retina_cls.bias.fill_(-8.0)      # scores ~0.3..0.9 for the 100 best, many below 0.05


@pytest.fixture(scope='module')
def retinanet(tmp_path_factory):
    return exported(tmp_path_factory, RETINANET, 'retinanet',
                    {'test_dataloader.dataset.pipeline.1.scale': RETINA_SCALE}, lower_retina_bias)


def decisive_masks(model):
    with torch.no_grad():   # mask probabilities away from 0.5, as a trained head's (random ones are all ~0.5)
        model.roi_head.mask_head.conv_logits.weight.mul_(10)


@pytest.fixture(scope='module')
def mask_rcnn(tmp_path_factory):
    return exported(tmp_path_factory, MASK_RCNN, 'mask_rcnn', adjust=decisive_masks)


@pytest.fixture(scope='module')
def cascade(tmp_path_factory):
    """The COCO Cascade Mask R-CNN with the small Swin trunk of the Mask R-CNN above, fewer proposals and a
    score threshold below the ~1/81 of a random 81-way softmax."""
    return exported(tmp_path_factory, CASCADE, 'cascade', {
        'test_dataloader.dataset.pipeline.1.scale': RETINA_SCALE,
        'model.backbone.arch': dict(_delete_=True, embed_dims=32, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8]),
        'model.backbone.attn_type': 'IIIS', 'model.neck.in_channels': [32, 64, 128, 256],
        'model.test_cfg.rpn.nms_pre': 300, 'model.test_cfg.rpn.max_per_img': 100,
        'model.test_cfg.rcnn.score_thr': 0.005})


def check_against_mmdet(exported_model, runtime='onnxruntime'):
    """``check_whole`` (raises if the file disagrees with mmdet); each image's summary, which shows that mmdet
    found many detections and the file all of them."""
    cfg, task, model, path = exported_model
    summaries = check_whole(path, cfg, task, model, smooth_images(*SHAPES), runtime=runtime)
    for summary in summaries:
        matched, found, in_file = map(int, re.search(r'(\d+)/(\d+) detections matched \(file: (\d+)\)',
                                                      summary).groups())
        assert matched == found == in_file >= 10, summary
    return summaries


@pytest.mark.slow
def test_retinanet_file_gives_mmdets_detections(retinanet):
    summaries = check_against_mmdet(retinanet)
    assert all(s.split(': ')[1].startswith('100/100') for s in summaries), summaries   # max_per_img cut the set


@pytest.mark.slow
def test_retinanet_file_in_openvino(retinanet):
    pytest.importorskip('openvino')
    check_against_mmdet(retinanet, runtime='openvino')


@pytest.mark.slow
def test_retinanet_metadata(retinanet):
    cfg, _, model, path = retinanet
    meta = read_metadata(path)
    assert (meta['task'], meta['model'], meta['outputs']) == ('detection', 'RetinaNet', ['boxes', 'scores', 'labels'])
    assert meta['input_names'] == ['image', 'img_shape', 'scale_factor']
    assert meta['input']['size_divisor'] == model.data_preprocessor.pad_size_divisor == 32
    assert meta['resize'] == dict(scale=list(RETINA_SCALE), scale_factor=None, keep_ratio=True)
    assert meta['test_cfg']['score_thr'] == model.bbox_head.test_cfg.score_thr
    assert meta['test_cfg']['max_per_img'] == model.bbox_head.test_cfg.max_per_img
    assert len(meta['classes']) == model.bbox_head.num_classes


@pytest.mark.slow
def test_runtime_needs_no_torch(retinanet):
    """The file runs in a process that never imports torch or OpenMMLab."""
    _, _, _, path = retinanet
    code = ('import sys, numpy as np\n'
            'from inline_runtime import load\n'
            f'result = load({path!r}).predict(np.full((150, 230, 3), 90, np.uint8))\n'
            'assert result["boxes"].shape[1] == 4 and result["masks"] is None\n'
            'banned = {"torch", "torchvision", "mmengine", "mmcv", "mmdet", "mmseg", "inline_backbones"}\n'
            'print(sorted(banned & {m.split(".")[0] for m in sys.modules}))\n')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]', out.stdout + out.stderr


@pytest.mark.slow
def test_mask_rcnn_file_gives_mmdets_detections_and_masks(mask_rcnn):
    summaries = check_against_mmdet(mask_rcnn)
    assert all('mask IoU' in s for s in summaries), summaries


@pytest.mark.slow
def test_cascade_mask_rcnn_file_gives_mmdets_detections_and_masks(cascade):
    summaries = check_against_mmdet(cascade)
    assert all('mask IoU' in s for s in summaries), summaries


@pytest.mark.slow
def test_mask_rcnn_result_layout(mask_rcnn):
    _, _, _, path = mask_rcnn
    (_, image), = smooth_images((150, 230), seed=1)
    result = load(path).predict(image)
    n = len(result['scores'])
    assert result['boxes'].shape == (n, 4) and result['labels'].dtype == np.int64
    assert result['masks'].shape == (n, 150, 230) and result['masks'].dtype == bool
    assert np.all(np.diff(result['scores']) <= 0)       # best first, as mmdet


def test_unsupported_detector_is_refused(tmp_path):
    config = tmp_path / 'fcos.py'
    config.write_text("_base_ = 'mmdet::fcos/fcos_r50-caffe_fpn_gn-head_1x_coco.py'\n")
    cfg, _, model, meta = load_task_model(str(config))
    with pytest.raises(ToolInputError, match=r"RetinaNet, MaskRCNN, CascadeRCNN detectors; this config builds FCOS"):
        detector.prepare(model, cfg, meta)
