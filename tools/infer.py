"""Run a trained detector or segmentor of this repo on images and write the visualisations.

    python tools/infer.py CONFIG CHECKPOINT IMAGE [IMAGE ...] [--out-dir outputs/infer] [--device cpu]
        [--scale config|native] [--slide CROP STRIDE] [--score-thr 0.3]

Detection configs (mmdet) go through mmdet's ``DetInferencer`` (boxes, masks, labels drawn on the image, plus the
predictions as JSON under ``preds/``); segmentation configs (mmseg) through ``MMSegInferencer`` (a coloured class
overlay, and the predicted label map under ``pred/``). Every output is named after its input image
(``vis/<name>``, ``preds/<stem>.json``, ``pred/<stem>.png``); outputs that are already there are replaced, and the
tool says which. The library is chosen from the config's ``default_scope``.

IMAGE may be files or folders; a folder's files that are not images are skipped and listed. The config, the
checkpoint (present and not cut off) and the images are checked before the model is built: a problem ends the
run with one line naming it and the fix.

Large images (docs/large_images.md): ``--scale config`` (default) resizes as the config's test pipeline does
(e.g. 1333x800 for COCO, 2048x512 for ADE20K); ``--scale native`` keeps each image's own size (the resize step
becomes a scale factor of 1, so boxes and masks are mapped back as usual), so global attention sees the whole
image at full resolution. ``--slide CROP STRIDE`` (segmentation) predicts square crops of CROP pixels every
STRIDE pixels and stitches them (mmseg's ``slide`` test mode; exact across crops in padding-aware mode) instead
of the whole image at once: less memory, attention limited to a crop. A segmentation input with a side below the
backbone's minimum (32 px: a thin image after the config's resize, or a small one at native scale) is padded to
it and the prediction cropped back (mmseg's test padding), where the config does not pad already. The time and
peak memory of the run are printed.
"""
import argparse
import os
import os.path as osp
import resource
import time

import torch

from inline_backbones.cli import exit_on_user_error, run_tool
from inline_backbones.data.tool_inputs import check_checkpoint, check_config
from inline_backbones.openmmlab.task_tools import read_config, task_of
from inline_runtime.images import image_inputs

NATIVE_RESIZE = dict(type='Resize', scale_factor=1.0, keep_ratio=True)


def crop_grid(size, crop, stride):
    """Crops along one side of ``size`` pixels in mmseg's slide mode."""
    return max(size - crop + stride - 1, 0) // stride + 1


def native_pipeline(pipeline):
    """The pipeline with its resizing steps replaced by one resize of scale factor 1: the image keeps its own size
    and the pipeline still records ``scale_factor`` (1, 1), which mmdet's heads read to map predictions back."""
    out, replaced = [], False
    for step in pipeline:
        if 'Resize' not in step['type']:
            out.append(step)
        elif not replaced:
            out.append(dict(NATIVE_RESIZE))
            replaced = True
    return out


def build_config(args, parser):
    cfg = read_config(args.config)
    task = task_of(cfg)
    if args.slide and task != 'mmseg':
        parser.error('--slide is for segmentation configs (mmseg\'s slide test mode); detectors see the whole image')
    if args.scale == 'native':
        cfg.test_dataloader.dataset.pipeline = native_pipeline(cfg.test_dataloader.dataset.pipeline)
        if 'test_pipeline' in cfg:
            cfg.test_pipeline = native_pipeline(cfg.test_pipeline)
    if args.slide:
        crop, stride = args.slide
        if not 0 < stride <= crop:
            parser.error(f'--slide {crop} {stride}: the stride must be between 1 and the crop size')
        cfg.model.test_cfg = dict(mode='slide', crop_size=(crop, crop), stride=(stride, stride))
    return cfg, task


def output_names(files, task):
    """Each input's output paths under the output folder, which must not collide between inputs."""
    def outputs(f):
        stem = osp.splitext(osp.basename(f))[0]
        pred = f'preds/{stem}.json' if task == 'mmdet' else f'pred/{stem}.png'
        return f'vis/{osp.basename(f)}', pred

    names = {f: outputs(f) for f in files}
    seen = {}
    for f, paths in names.items():
        for path in paths:
            if path in seen:
                raise SystemExit(f'[infer] error: {seen[path]!r} and {f!r} would both write {path}: give images '
                                 'with different names (or run them into different --out-dir folders)')
            seen[path] = f
    return names


def pad_small_inputs(model):
    """A segmentor whose data preprocessor does not pad at test time pads each image to the backbone's
    ``min_input_size`` on both sides (smaller sides only: mmseg's ``stack_batch`` pads up to ``size``, never down),
    and mmseg crops the prediction back by the recorded padding. Returns the size, or None."""
    size = getattr(model.backbone, 'min_input_size', None)
    if size is None or model.data_preprocessor.test_cfg:
        return None
    model.data_preprocessor.test_cfg = dict(size=(size, size))
    return size


def write_label_map(path, label_map):
    """A (H, W) label map as a PNG: 8-bit when every label fits, else 16-bit."""
    import cv2
    import numpy as np

    dtype = np.uint8 if int(label_map.max(initial=0)) < 256 else np.uint16
    if not cv2.imwrite(path, label_map.astype(dtype)):
        raise SystemExit(f'[infer] error: cannot write {path}')


def segment(cfg, args, files):
    """Each image through ``MMSegInferencer``: its overlay as ``vis/<name>`` (mmseg's naming) and its label map
    as ``pred/<stem>.png``."""
    from mmseg.apis import MMSegInferencer

    inferencer = MMSegInferencer(model=cfg, weights=args.checkpoint, device=args.device)
    size = pad_small_inputs(inferencer.model)
    if size is not None:
        print(f'[infer] images with a side below {size} px are padded to {size} (the prediction is cropped back)')
    os.makedirs(osp.join(args.out_dir, 'pred'), exist_ok=True)
    for f in files:
        sample = inferencer(f, return_datasamples=True)
        inferencer.visualize([f], [sample], img_out_dir=osp.join(args.out_dir, 'vis'), opacity=0.6)
        stem = osp.splitext(osp.basename(f))[0]
        write_label_map(osp.join(args.out_dir, 'pred', f'{stem}.png'), sample.pred_sem_seg.data[0].cpu().numpy())


def detect(cfg, args, files):
    from mmdet.apis import DetInferencer

    inferencer = DetInferencer(model=cfg, weights=args.checkpoint, device=args.device)
    inferencer(files, out_dir=args.out_dir, pred_score_thr=args.score_thr, no_save_pred=False)


def peak_memory(device):
    if device.startswith('cuda'):
        return f'{torch.cuda.max_memory_allocated() / 2 ** 20:.0f} MB GPU memory allocated'
    return f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB resident (the whole process)'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('images', nargs='+', help='image files or folders')
    parser.add_argument('--out-dir', default='outputs/infer')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--score-thr', type=float, default=0.3, help='detection score threshold')
    parser.add_argument('--scale', choices=['config', 'native'], default='config',
                        help="config: resize as the config's test pipeline; native: each image at its own size")
    parser.add_argument('--slide', type=int, nargs=2, metavar=('CROP', 'STRIDE'),
                        help='segmentation: sliding-window inference, square crops of CROP px every STRIDE px')
    args = parser.parse_args(argv)
    with exit_on_user_error('infer'):
        check_config(args.config)
        check_checkpoint(args.checkpoint)
        files, skipped = image_inputs(args.images)
    cfg, task = build_config(args, parser)
    names = output_names(files, task)
    if skipped:
        shown = ', '.join(osp.basename(f) for f in skipped[:10]) + (', ...' if len(skipped) > 10 else '')
        print(f'[infer] skipped {len(skipped)} file(s) that are not images: {shown}')
    replaced = [path for paths in names.values() for path in paths if osp.exists(osp.join(args.out_dir, path))]
    if replaced:
        shown = ', '.join(replaced[:10]) + (', ...' if len(replaced) > 10 else '')
        print(f'[infer] replacing {len(replaced)} existing output(s) in {args.out_dir}: {shown}')
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
    (detect if task == 'mmdet' else segment)(cfg, args, files)
    elapsed = time.perf_counter() - start
    print(f'[infer] {elapsed:.1f} s for {len(files)} image(s) (model set-up included), peak '
          f'{peak_memory(args.device)}')
    print(f'[infer] visualisations written to {args.out_dir}/vis')


if __name__ == '__main__':
    run_tool(main, 'infer')
