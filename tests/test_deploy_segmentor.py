"""Whole-model export of segmentors (inline_backbones/deployment) and the torch-free runtime (inline_runtime):
the file, run as a serving machine runs it, against mmseg's own inference (``inference_model``) on the same
images; the helper's parts against the torch/mmcv/pycocotools functions they reproduce."""
import copy
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tool_modules import ROOT, load_tool

from inline_backbones.deployment import segmentor
from inline_backbones.deployment.rewrites import IntegerUpsample, MatmulAdaptiveAvgPool2d
from inline_backbones.deployment.tool import synthetic_image
from inline_backbones.deployment.whole import WholeExportMismatch, check_whole, load_task_model
from inline_runtime import RuntimeInputError, load
from inline_runtime.images import pad_to, pipeline_resize
from inline_runtime.outputs import rle_encode
from inline_runtime.resize import resize_and_label, resize_maps

MINI = 'mmseg_configs/inline-swin-mini_upernet_shapes-256x256.py'
# The modules a serving machine does not have: the runtime must run with every one of them unimportable.
BLOCKED = ('torch', 'torchvision', 'timm', 'mmengine', 'mmcv', 'mmdet', 'mmseg', 'inline_backbones')


@pytest.mark.parametrize('size', [1, 2, 3, 6, (2, 5)])
def test_matmul_adaptive_pooling_equals_torch(size):
    for hw in [(1, 1), (5, 7), (64, 86), (17, 3)]:
        x = torch.randn(2, 4, *hw, dtype=torch.float64)
        torch.testing.assert_close(MatmulAdaptiveAvgPool2d(size)(x), torch.nn.AdaptiveAvgPool2d(size)(x))


def test_integer_upsample_equals_mmseg_upsample():
    from mmseg.models.utils import Upsample

    x = torch.randn(1, 3, 7, 11)
    for mode, corners in [('bilinear', False), ('nearest', None)]:
        torch.testing.assert_close(IntegerUpsample(2, mode, corners)(x), Upsample(scale_factor=2, mode=mode,
                                                                                    align_corners=corners)(x))


@pytest.mark.parametrize('align_corners', [False, True])
def test_resize_maps_equals_torch_bilinear(align_corners):
    """In float64, where torch's CPU kernel is exact (in float32 it is off by ~1e-4, OpenCV's too)."""
    x = np.random.default_rng(0).normal(size=(5, 31, 47))
    for size in [(100, 150), (31, 47), (13, 9), (1, 1)]:
        ref = F.interpolate(torch.from_numpy(x)[None], size=size, mode='bilinear', align_corners=align_corners)[0]
        np.testing.assert_allclose(resize_maps(x, size, align_corners), ref.numpy(), atol=1e-6)


def test_resize_and_label_is_the_argmax_of_the_resized_logits_first_on_ties():
    x = np.random.default_rng(1).normal(size=(40, 20, 30)).astype(np.float32)
    x[7] = x[3]                                # a tie everywhere between classes 3 and 7: 3 wins, as torch's argmax
    labels, kept = resize_and_label(x, (50, 70), keep_logits=True, block=6)
    np.testing.assert_array_equal(labels, kept.argmax(0))
    np.testing.assert_allclose(kept, resize_maps(x, (50, 70)), atol=1e-6)
    assert not (labels == 7).any() and (labels == 3).any()


@pytest.mark.parametrize('scale,keep', [((2048, 512), True), ((1333, 800), True), ((96, 160), True),
                                        ((300, 200), False)])
def test_pipeline_resize_equals_mmcv_resize(scale, keep):
    from mmcv.transforms import Resize

    for h, w in [(1000, 1500), (333, 517), (512, 512), (97, 61)]:
        image = synthetic_image(h, w)
        ref = Resize(scale=scale, keep_ratio=keep)(dict(img=image.copy()))
        out, factor = pipeline_resize(image, dict(scale=list(scale), keep_ratio=keep))
        np.testing.assert_array_equal(out, ref['img'])
        assert factor == pytest.approx(tuple(ref['scale_factor']))


def test_pad_to_pads_bottom_right_with_the_value():
    image = np.full((20, 30, 3), 7, np.uint8)
    out, (bottom, right) = pad_to(image, [1.5, 2.5, 3.5], divisor=32, min_size=(64, 16))
    assert out.shape == (64, 32, 3) and (bottom, right) == (44, 2)
    assert (out[:20, :30] == 7).all() and (out[20:, :, 1] == 2.5).all() and (out[:, 30:, 2] == 3.5).all()


def test_rle_equals_pycocotools():
    from pycocotools import mask as coco_mask

    rng = np.random.default_rng(0)
    for shape in [(5, 7), (64, 80), (1, 1), (300, 200)]:
        for mask in [rng.random(shape) < 0.02, np.ones(shape, bool), np.zeros(shape, bool), rng.random(shape) < 0.5]:
            ref = coco_mask.encode(np.asfortranarray(mask.astype(np.uint8)))
            assert rle_encode(mask) == {'size': list(ref['size']), 'counts': ref['counts'].decode()}


@pytest.fixture(scope='module')
def mini(tmp_path_factory):
    """The mini UperNet (random weights, saved as a trained checkpoint with its classes) exported whole by the tool,
    with its logits; and the model with those weights."""
    from contextlib import redirect_stdout
    from io import StringIO

    folder = tmp_path_factory.mktemp('whole')
    cfg, _, model, _ = load_task_model(str(ROOT / MINI))
    classes = ['background', 'disc', 'box', 'triangle', 'hexagon']
    checkpoint = folder / 'mini.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {'dataset_meta': {'classes': classes}}}, checkpoint)
    out = folder / 'mini.onnx'
    printed = StringIO()
    with redirect_stdout(printed):
        status = load_tool('tools/deployment/export_onnx.py').main(
            [str(ROOT / MINI), '--whole', '--checkpoint', str(checkpoint), '--logits', '--out', str(out),
             '--check-sizes', '96x128', '250x333'])
    return dict(path=out, printed=printed.getvalue(), status=status, cfg=cfg, model=model)


def agree(result, ref):
    ok, summary = segmentor.compare(result, ref)
    assert ok, summary
    return summary


@pytest.mark.slow
def test_export_tool_writes_a_checked_file_that_says_what_it_holds(mini):
    printed = mini['printed']
    assert mini['status'] == 0 and mini['path'].exists(), printed
    assert 'in the file: BGR to RGB; normalisation; backbone; neck; decode head (UPerHead)' in printed
    assert 'completed by inline_runtime: read the image' in printed
    assert printed.count('labels agree on') == 2 and 'DISAGREES' not in printed and f'OK: {mini["path"]}' in printed
    meta = load(mini['path']).meta
    assert meta['task'] == 'segmentation' and meta['classes'][:2] == ['background', 'disc']
    assert meta['outputs'] == ['labels', 'logits'] and meta['input']['to_rgb'] is True


@pytest.mark.slow
@pytest.mark.parametrize('h,w', [(333, 517), (64, 64), (20, 300), (700, 1100)])
def test_whole_file_equals_mmseg_at_any_size(mini, h, w):
    """Any height and width (not multiples of 32), one file; 20x300 is padded to 32 (as mmseg pads it) and the
    padding-aware backbone sees its region (the file's second input), as in mmseg."""
    image = synthetic_image(h, w, seed=h)
    result = load(mini['path']).predict(image, logits=True)
    ref = segmentor.reference(mini['model'], mini['cfg'], image)
    agree(result, ref)
    assert np.abs(result['logits'] - ref['logits']).max() / np.abs(ref['logits']).max() < 1e-4


@pytest.mark.slow
def test_slide_mode_equals_mmseg_slide_inference(mini):
    from mmengine.config import ConfigDict

    slide = ConfigDict(mode='slide', crop_size=(128, 128), stride=(96, 96))
    predictor = load(mini['path'])
    predictor.meta['test_cfg'] = dict(mode='slide', crop_size=[128, 128], stride=[96, 96])
    model = copy.deepcopy(mini['model'])
    model.test_cfg = slide
    image = synthetic_image(250, 333, seed=3)
    agree(predictor.predict(image, logits=True), segmentor.reference(model, mini['cfg'], image))


@pytest.mark.slow
def test_test_resize_and_logits_resized_back_equal_mmseg(mini):
    """A config that resizes at test time: the helper resizes the image, and the file's logits back to it."""
    cfg = copy.deepcopy(mini['cfg'])
    cfg.test_pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(160, 96), keep_ratio=True),
                         dict(type='PackSegInputs')]
    cfg.test_dataloader.dataset.pipeline = cfg.test_pipeline
    predictor = load(mini['path'])
    predictor.meta['resize'] = segmentor.resize_meta(cfg)
    image = synthetic_image(300, 410, seed=5)
    result = predictor.predict(image, logits=True)
    assert result['labels'].shape == (300, 410)
    agree(result, segmentor.reference(mini['model'], cfg, image))


@pytest.mark.slow
def test_runtime_runs_without_torch_or_openmmlab(mini, tmp_path):
    """``python -m inline_runtime`` in a process where importing torch, mmengine, mmcv, mmdet, mmseg or
    inline_backbones fails; it writes tools/infer.py's outputs, and the label map is the in-process one."""
    images = tmp_path / 'images'
    images.mkdir()
    image = synthetic_image(140, 230, seed=9)
    cv2.imwrite(str(images / 'street.png'), image)
    (images / 'notes.txt').write_text('not an image')
    blocker = (
        'import importlib.abc, runpy, sys\n'
        'class Block(importlib.abc.MetaPathFinder):\n'
        '    def find_spec(self, name, path, target=None):\n'
        f'        if name.split(".")[0] in {BLOCKED!r}:\n'
        '            raise ImportError(f"{name} is not on this serving machine")\n'
        'sys.meta_path.insert(0, Block())\n'
        'sys.argv = ["inline_runtime", *sys.argv[1:]]\n'
        'try:\n'
        '    runpy.run_module("inline_runtime", run_name="__main__")\n'
        'finally:\n'
        f'    assert not set(m.split(".")[0] for m in sys.modules) & set({BLOCKED!r})\n')
    run = subprocess.run([sys.executable, '-c', blocker, str(mini['path']), str(images), '--out-dir',
                          str(tmp_path / 'out')], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stderr[-2000:]
    assert 'skipped 1 file(s)' in run.stdout
    labels = cv2.imread(str(tmp_path / 'out' / 'pred' / 'street.png'), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(labels, load(mini['path']).predict(image)['labels'])
    assert cv2.imread(str(tmp_path / 'out' / 'vis' / 'street.png')).shape == image.shape
    described = subprocess.run([sys.executable, '-c', blocker, str(mini['path']), '--describe'], capture_output=True,
                               text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert described.returncode == 0 and 'completed by inline_runtime:' in described.stdout, described.stderr


@pytest.mark.slow
def test_openvino_fp32_equals_onnxruntime(mini):
    pytest.importorskip('openvino')
    image = synthetic_image(250, 333, seed=11)
    ort = load(mini['path']).predict(image, logits=True)
    ov = load(mini['path'], runtime='openvino').predict(image, logits=True)
    assert (ov['labels'] == ort['labels']).mean() > 0.999
    assert np.abs(ov['logits'] - ort['logits']).max() / np.abs(ort['logits']).max() < 1e-4


@pytest.mark.slow
def test_openvino_bf16_runs_where_the_cpu_has_it(mini):
    pytest.importorskip('openvino')
    from inline_runtime.backends import cpu_has_bf16

    if not cpu_has_bf16():
        with pytest.raises(RuntimeInputError, match='no bf16'):
            load(mini['path'], runtime='openvino', precision='bf16')
        pytest.skip('this CPU has no bf16 (AMX or avx512_bf16): the refusal was checked instead')
    image = synthetic_image(250, 333, seed=12)
    fp32 = load(mini['path']).predict(image, logits=True)
    bf16 = load(mini['path'], runtime='openvino', precision='bf16').predict(image, logits=True)
    assert np.isfinite(bf16['logits']).all()
    error = np.abs(bf16['logits'] - fp32['logits']).max() / np.abs(fp32['logits']).max()
    assert 1e-5 < error < 0.1, error       # bf16 ran (not fp32), and stayed close
    assert (bf16['labels'] == fp32['labels']).mean() > 0.9


def test_runtime_errors_name_the_problem(tmp_path):
    with pytest.raises(RuntimeInputError, match='no such file'):
        load(tmp_path / 'missing.onnx')
    backbone_only = tmp_path / 'backbone.onnx'
    torch.onnx.export(torch.nn.Conv2d(3, 4, 3), (torch.randn(1, 3, 8, 8),), backbone_only, dynamo=False)
    with pytest.raises(ValueError, match='no .inline_runtime. metadata'):
        load(backbone_only)


@pytest.mark.slow
def test_onnxruntime_refuses_bf16(mini):
    with pytest.raises(RuntimeInputError, match='runs fp32'):
        load(mini['path'], precision='bf16')


@pytest.mark.slow
def test_a_file_that_disagrees_is_deleted(mini, tmp_path):
    """The check compares with the model: a model that changed after the export (here: one weight) fails it."""
    path = tmp_path / 'copy.onnx'
    path.write_bytes(mini['path'].read_bytes())
    model = copy.deepcopy(mini['model'])
    with torch.no_grad():
        model.decode_head.conv_seg.bias[1] += 50.
    with pytest.raises(WholeExportMismatch, match='file deleted'):
        check_whole(str(path), mini['cfg'], 'mmseg', model, [('img', synthetic_image(96, 128))], report=lambda s: None)
    assert not path.exists()


def test_pipeline_steps_the_helper_cannot_reproduce_are_refused():
    from mmengine.config import Config

    from inline_backbones.data.tool_inputs import ToolInputError

    cfg = Config(dict(test_pipeline=[dict(type='LoadImageFromFile'), dict(type='RandomFlip', prob=1.0)]))
    with pytest.raises(ToolInputError, match='RandomFlip step is not reproduced'):
        segmentor.resize_meta(cfg)


@pytest.mark.slow
def test_int8_file_is_quantised_and_runs(mini, tmp_path):
    from inline_backbones.deployment.quantize import quantize_int8

    int8 = tmp_path / 'mini.int8.onnx'
    calibration = [synthetic_image(128, 160, seed=s) for s in range(3)]
    runs = quantize_int8(str(mini['path']), str(int8), calibration, load(mini['path']))
    assert runs == 3
    import onnx

    ops = {n.op_type for n in onnx.load(int8).graph.node}
    assert {'QuantizeLinear', 'DequantizeLinear'} <= ops
    predictor = load(int8)
    assert predictor.meta['precision'] == 'int8' and predictor.meta['calibration_images'] == 3
    image = synthetic_image(250, 333, seed=13)
    fp32 = load(mini['path']).predict(image, logits=True)
    q = predictor.predict(image, logits=True)
    assert np.isfinite(q['logits']).all()
    assert json.dumps(predictor.meta['classes']) == json.dumps(load(mini['path']).meta['classes'])
    assert (q['labels'] == fp32['labels']).mean() > 0.5   # random weights; trained models: docs/deployment.md


@pytest.mark.slow
def test_deployed_benchmark_times_each_runtime_alone(mini, tmp_path):
    """tools/analysis_tools/benchmark_deployed.py's rows: eager (with the backbone's share) and the file, each in its
    own process, at one size; the table and the plot written."""
    from inline_backbones.benchmark import deployed

    (tmp_path / 'inline-swin-mini_upernet_shapes-256x256.onnx').write_bytes(mini['path'].read_bytes())
    rows = deployed.measure([str(ROOT / MINI)], ['96x160'], ['eager', 'onnxruntime:fp32'], str(tmp_path), rounds=1)
    assert [r['runtime'] for r in rows] == ['eager', 'onnxruntime:fp32'], rows
    assert all(r['latency_s'] > 0 and r['peak_mb'] > 0 for r in rows)
    assert 0 < rows[0]['backbone_share'] < 1
    table = deployed.write(rows, str(tmp_path), {})
    assert '| inline-swin-mini_upernet_shapes-256x256.py | 96x160 | onnxruntime:fp32 |' in table
    assert (tmp_path / 'latency.png').stat().st_size > 0


def test_file_inputs_follow_the_files_input_names():
    from inline_backbones.benchmark.deployed import file_inputs

    image, region = file_inputs(['image', 'image_shape'], 100, 70)
    assert image.shape == (1, 3, 100, 70) and region.tolist() == [[100, 70]]
    image, shape, scale = file_inputs(['image', 'img_shape', 'scale_factor'], 100, 70)
    assert image.shape == (1, 3, 128, 96) and shape.tolist() == [100, 70] and scale.tolist() == [1, 1]
