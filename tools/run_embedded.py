"""The main job on the embedded default: generate the shapes dataset, train the small InLine-Swin
Mask R-CNN and UperNet on it from scratch, evaluate them (mmdet's CocoMetric, mmseg's IoUMetric), and
draw their predictions on a validation image.

    python tools/run_embedded.py [--work-dir work_dirs/embedded] [--out-dir outputs/embedded]

Each step is the command a user would type (tools/train.py, tools/infer.py), run as a subprocess; the
summary at the end gives the validation metrics and wall-clock times. Exits non-zero when a metric
misses its target (bbox/segm mAP >= 0.30, mIoU >= 60).
"""
import argparse
import os.path as osp
import re
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DET_CONFIG = osp.join(ROOT, 'mmdet_configs', 'mask-rcnn_inline-swin-mini_fpn_shapes.py')
SEG_CONFIG = osp.join(ROOT, 'mmseg_configs', 'inline-swin-mini_upernet_shapes-256x256.py')
VAL_IMAGE = osp.join('data', 'shapes', 'images', 'val', '00001.jpg')


def step(title, args):
    """Run ``python args...`` from the repository root, echoing its output; returns (output, seconds)."""
    print(f'\n[embedded] {title}: python {" ".join(args)}', flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if 'Warning' not in line and 'warnings.warn' not in line:
            print(line, end='', flush=True)
    if proc.wait():
        raise SystemExit(f'[embedded] {title} failed (exit {proc.returncode})')
    return ''.join(lines), time.perf_counter() - start


def last_checkpoint(work_dir):
    with open(osp.join(ROOT, work_dir, 'last_checkpoint')) as f:  # written by mmengine's CheckpointHook
        return f.read().strip()


def last_metric(log, key):
    found = re.findall(rf'{re.escape(key)}: ([0-9.]+)', log)
    if not found:
        raise SystemExit(f'[embedded] no {key} in the training log')
    return float(found[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', default='work_dirs/embedded')
    parser.add_argument('--out-dir', default='outputs/embedded')
    args = parser.parse_args()
    det_dir, seg_dir = osp.join(args.work_dir, 'det'), osp.join(args.work_dir, 'seg')

    step('generate the shapes dataset', ['tools/make_shapes_dataset.py', '--root', 'data/shapes'])
    det_log, det_time = step('train + evaluate Mask R-CNN', ['tools/train.py', DET_CONFIG, '--work-dir', det_dir])
    step('draw detections', ['tools/infer.py', DET_CONFIG, last_checkpoint(det_dir), VAL_IMAGE,
                             '--out-dir', osp.join(args.out_dir, 'det')])
    seg_log, seg_time = step('train + evaluate UperNet', ['tools/train.py', SEG_CONFIG, '--work-dir', seg_dir])
    step('draw segmentation', ['tools/infer.py', SEG_CONFIG, last_checkpoint(seg_dir), VAL_IMAGE,
                               '--out-dir', osp.join(args.out_dir, 'seg')])

    results = [
        ('Mask R-CNN bbox mAP', last_metric(det_log, 'coco/bbox_mAP'), 0.30, det_time),
        ('Mask R-CNN segm mAP', last_metric(det_log, 'coco/segm_mAP'), 0.30, det_time),
        ('UperNet mIoU (%)', last_metric(seg_log, 'mIoU'), 60.0, seg_time),
    ]
    print('\n[embedded] results on the shapes val split (100 images)')
    print(f'{"metric":<22}{"value":>8}{"target":>8}   train+eval time')
    for name, value, target, seconds in results:
        print(f'{name:<22}{value:>8.3f}{target:>8.2f}   {seconds / 60:.1f} min')
    print(f'[embedded] predictions drawn in {args.out_dir}/det/vis and {args.out_dir}/seg/vis')
    missed = [name for name, value, target, _ in results if value < target]
    if missed:
        raise SystemExit(f'[embedded] below target: {", ".join(missed)}')


if __name__ == '__main__':
    main()
