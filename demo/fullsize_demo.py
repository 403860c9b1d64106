"""Build InLine-Swin-T Mask R-CNN (mmdet) and UperNet (mmseg) from this repo's configs and run each
on a generated 800x1333 image with the libraries' own inference APIs.

No weights can be downloaded here, so the backbones are randomly initialised (``init_cfg=None``): the
point is that the full models build, run at detection/segmentation resolution and return well-formed
results. Writes the input and both visualisations to ``--out-dir``.

    python demo/fullsize_demo.py [--out-dir outputs/fullsize_demo] [--device cpu]
"""
import argparse
import os
import os.path as osp
import time

import cv2
import mmcv
import numpy as np
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DET_CONFIG = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py')
SEG_CONFIG = osp.join(ROOT, 'mmseg_configs', 'inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py')


def generated_image(height=800, width=1333, seed=0):
    """A deterministic BGR image: smooth noise background with a few filled shapes."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(height // 16 + 1, width // 16 + 1, 3))
    img = cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
    img = np.clip(127 + 40 * img, 0, 255).astype(np.uint8)
    for _ in range(8):
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        cx, cy = int(rng.integers(100, width - 100)), int(rng.integers(100, height - 100))
        r = int(rng.integers(30, 120))
        if rng.random() < 0.5:
            cv2.circle(img, (cx, cy), r, color, -1)
        else:
            cv2.rectangle(img, (cx - r, cy - r // 2), (cx + r, cy + r // 2), color, -1)
    return img


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def run_detector(img, device, out_dir):
    from mmdet.apis import inference_detector, init_detector
    from mmdet.registry import VISUALIZERS
    from mmengine.config import Config

    cfg = Config.fromfile(DET_CONFIG)
    cfg.model.backbone.init_cfg = None
    model = init_detector(cfg, checkpoint=None, device=device)
    model.init_weights()
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    result, seconds = timed(inference_detector, model, img)
    pred = result.pred_instances
    print(f'[demo] Mask R-CNN InLine-Swin-T: {n_params:.1f}M params, input {img.shape[1]}x{img.shape[0]} '
          f'-> batch {tuple(result.batch_input_shape)}, {len(pred)} detections, masks {tuple(pred.masks.shape)}, '
          f'{seconds:.2f} s')
    vis = VISUALIZERS.build(dict(type='DetLocalVisualizer', name='demo_det'))
    vis.dataset_meta = model.dataset_meta
    vis.add_datasample('det', mmcv.bgr2rgb(img), result, draw_gt=False, pred_score_thr=0.05,
                       out_file=osp.join(out_dir, 'mask_rcnn_inline_swin_t.png'))


def run_segmentor(img, device, out_dir):
    from mmengine.config import Config
    from mmseg.apis import inference_model, init_model, show_result_pyplot
    from mmseg.datasets import ADE20KDataset

    cfg = Config.fromfile(SEG_CONFIG)
    cfg.model.backbone.init_cfg = None
    for step in cfg.test_pipeline:  # ADE20K tests at 512 short side; run this demo at full 800x1333
        if step['type'] == 'Resize':
            step['scale'] = (1333, 800)
    model = init_model(cfg, checkpoint=None, device=device)
    model.init_weights()
    model.dataset_meta = ADE20KDataset.METAINFO
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    result, seconds = timed(inference_model, model, img)
    seg = result.pred_sem_seg.data
    net_h, net_w = result.metainfo['img_shape']
    print(f'[demo] UperNet InLine-Swin-T: {n_params:.1f}M params, input {img.shape[1]}x{img.shape[0]} '
          f'(network {net_w}x{net_h}) -> label map {tuple(seg.shape[-2:])}, '
          f'{int(seg.unique().numel())} classes present, {seconds:.2f} s')
    show_result_pyplot(model, img, result, show=False, opacity=0.5,
                       out_file=osp.join(out_dir, 'upernet_inline_swin_t.png'))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out-dir', default=osp.join(ROOT, "outputs", "fullsize_demo"))
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    img = generated_image()
    cv2.imwrite(osp.join(args.out_dir, 'input.png'), img)
    with torch.no_grad():
        run_detector(img, args.device, args.out_dir)
        run_segmentor(img, args.device, args.out_dir)
    print(f'[demo] images written to {args.out_dir}')


if __name__ == '__main__':
    main()
