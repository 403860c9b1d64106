"""Run a trained detector or segmentor of this repo on images and write the visualisations.

    python tools/infer.py CONFIG CHECKPOINT IMAGE [IMAGE ...] [--out-dir outputs/infer] [--device cpu]
        [--scale config|native] [--slide CROP STRIDE] [--score-thr 0.3]

Detection configs (mmdet) go through mmdet's ``DetInferencer`` (boxes, masks, labels drawn on the
image, plus the predictions as JSON); segmentation configs (mmseg) through ``MMSegInferencer`` (a
coloured class overlay, and the predicted label map under ``pred/``). The library is chosen from the
config's ``default_scope``.

Large images (docs/large_images.md): ``--scale config`` (default) resizes as the config's test pipeline does
(e.g. 1333x800 for COCO, 2048x512 for ADE20K); ``--scale native`` keeps each image's own size, so global
attention sees the whole image at full resolution. ``--slide CROP STRIDE`` (segmentation) predicts square
crops of CROP pixels every STRIDE pixels and stitches them (mmseg's ``slide`` test mode; exact across crops in
padding-aware mode) instead of the whole image at once: less memory, attention limited to a crop. The time
and peak memory of the run are printed.
"""
import argparse
import os
import os.path as osp
import resource
import time

import torch
from _task_tools import task_of


def crop_grid(size, crop, stride):
    """Crops along one side of ``size`` pixels in mmseg's slide mode."""
    return max(size - crop + stride - 1, 0) // stride + 1


def image_files(inputs):
    if len(inputs) == 1 and osp.isdir(inputs[0]):
        return sorted(osp.join(inputs[0], f) for f in os.listdir(inputs[0]) if not f.startswith('.'))
    return list(inputs)


def without_resize(pipeline):
    """The pipeline without its resizing steps (the image keeps its own size)."""
    return [step for step in pipeline if 'Resize' not in step['type']]


def build_config(args, parser):
    from mmengine.config import Config

    cfg = Config.fromfile(args.config)
    task = task_of(cfg)
    if args.slide and task != 'mmseg':
        parser.error('--slide is for segmentation configs (mmseg\'s slide test mode); detectors see the whole image')
    if args.scale == 'native':
        cfg.test_dataloader.dataset.pipeline = without_resize(cfg.test_dataloader.dataset.pipeline)
        if 'test_pipeline' in cfg:
            cfg.test_pipeline = without_resize(cfg.test_pipeline)
    if args.slide:
        crop, stride = args.slide
        if not 0 < stride <= crop:
            parser.error(f'--slide {crop} {stride}: the stride must be between 1 and the crop size')
        cfg.model.test_cfg = dict(mode='slide', crop_size=(crop, crop), stride=(stride, stride))
    return cfg, task


def peak_memory(device):
    if device.startswith('cuda'):
        return f'{torch.cuda.max_memory_allocated() / 2 ** 20:.0f} MB GPU memory allocated'
    return f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB resident (the whole process)'


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('images', nargs='+', help='image files or a folder')
    parser.add_argument('--out-dir', default='outputs/infer')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--score-thr', type=float, default=0.3, help='detection score threshold')
    parser.add_argument('--scale', choices=['config', 'native'], default='config',
                        help="config: resize as the config's test pipeline; native: each image at its own size")
    parser.add_argument('--slide', type=int, nargs=2, metavar=('CROP', 'STRIDE'),
                        help='segmentation: sliding-window inference, square crops of CROP px every STRIDE px')
    args = parser.parse_args()
    cfg, task = build_config(args, parser)
    files = image_files(args.images)
    inputs = files if len(files) > 1 else files[0]
    mode = 'whole image' if not args.slide else f'slide, crops of {args.slide[0]} px every {args.slide[1]} px'
    print(f'[infer] {len(files)} image(s), scale: {args.scale}, {mode}', flush=True)
    if args.slide and args.scale == 'native':
        import cv2

        for f in files:
            h, w = cv2.imread(f).shape[:2]
            grid = crop_grid(h, *args.slide), crop_grid(w, *args.slide)
            print(f'[infer] {osp.basename(f)}: {h}x{w} -> {grid[0]} x {grid[1]} crops', flush=True)
    if args.device.startswith('cuda'):
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    if task == 'mmdet':
        from mmdet.apis import DetInferencer

        inferencer = DetInferencer(model=cfg, weights=args.checkpoint, device=args.device)
        inferencer(inputs, out_dir=args.out_dir, pred_score_thr=args.score_thr, no_save_pred=False)
    else:
        from mmseg.apis import MMSegInferencer

        inferencer = MMSegInferencer(model=cfg, weights=args.checkpoint, device=args.device)
        inferencer(inputs, out_dir=args.out_dir, opacity=0.6)
    elapsed = time.perf_counter() - start
    print(f'[infer] {elapsed:.1f} s for {len(files)} image(s) (model set-up included), peak '
          f'{peak_memory(args.device)}')
    print(f'[infer] visualisations written to {args.out_dir}/vis')


if __name__ == '__main__':
    main()
