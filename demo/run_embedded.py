"""The main job on the embedded default: generate the shapes dataset, train the small InLine-Swin
Mask R-CNN and UperNet on it from scratch, evaluate them (mmdet's CocoMetric, mmseg's IoUMetric), and
draw their predictions on a validation image.

    python demo/run_embedded.py [--work-dir work_dirs/embedded] [--out-dir outputs/embedded]

Each step is the command a user would type (tools/train.py, tools/infer.py), run as a subprocess; the
summary at the end gives the validation metrics, per class, and wall-clock times. The configs fix the seed
(mmengine's ``randomness``; ``--seed N`` changes it). Exits non-zero when a metric misses its target: bbox/segm
mAP >= 0.30 and mIoU >= 60 overall, and every class learned (AP >= 0.15 per class for boxes and masks, IoU >= 50
per class), so a lost class fails the demo.
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


PER_CLASS_AP, PER_CLASS_IOU = 0.15, 50.0


def class_tables(log, first_header):
    """Every table in ``log`` whose header row starts with ``first_header`` (mmdet's classwise COCO tables:
    ``category``; mmseg's per-class table: ``Class``), each as {class name: value of its second column}."""
    tables, current = [], None
    for line in log.splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')] if line.strip().startswith('|') else None
        if cells and cells[0] == first_header:
            current = {}
            tables.append(current)
        elif cells and current is not None and len(cells) >= 2:
            try:
                current[cells[0]] = float(cells[1])
            except ValueError:          # nan or a second header line
                current[cells[0]] = float('nan')
        elif not line.strip().startswith(('+', '|')):
            current = None
    return tables


def per_class_results(det_log, seg_log):
    """[(metric, class, value, target)] from the last evaluation of each model: bbox and segm AP per class
    (mmdet prints the bbox table, then the segm one) and IoU per class."""
    det, seg = class_tables(det_log, 'category'), class_tables(seg_log, 'Class')
    if len(det) < 2 or not seg:
        raise SystemExit('[embedded] no per-class tables in the evaluation logs (classwise COCO / IoUMetric)')
    rows = [(f'{kind} AP', name, value, PER_CLASS_AP) for kind, table in (('bbox', det[-2]), ('segm', det[-1]))
            for name, value in table.items()]
    return rows + [('IoU (%)', name, value, PER_CLASS_IOU) for name, value in seg[-1].items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work-dir', default='work_dirs/embedded')
    parser.add_argument('--out-dir', default='outputs/embedded')
    parser.add_argument('--seed', type=int, help="the configs' seed (randomness.seed) for both trainings")
    args = parser.parse_args()
    seed = [] if args.seed is None else ['--cfg-options', f'randomness.seed={args.seed}']
    det_dir, seg_dir = osp.join(args.work_dir, 'det'), osp.join(args.work_dir, 'seg')

    step('generate the shapes dataset', ['tools/misc/make_shapes_dataset.py', '--root', 'data/shapes'])
    det_log, det_time = step('train + evaluate Mask R-CNN',
                             ['tools/train.py', DET_CONFIG, '--work-dir', det_dir, *seed])
    step('draw detections', ['tools/infer.py', DET_CONFIG, last_checkpoint(det_dir), VAL_IMAGE,
                             '--out-dir', osp.join(args.out_dir, 'det')])
    seg_log, seg_time = step('train + evaluate UperNet', ['tools/train.py', SEG_CONFIG, '--work-dir', seg_dir, *seed])
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
    classes = per_class_results(det_log, seg_log)
    print(f'\n{"per class":<22}{"class":<12}{"value":>8}{"target":>8}')
    for metric, name, value, target in classes:
        print(f'{metric:<22}{name:<12}{value:>8.3f}{target:>8.2f}')
    print(f'[embedded] predictions drawn in {args.out_dir}/det/vis and {args.out_dir}/seg/vis')
    missed = [name for name, value, target, _ in results if value < target]
    missed += [f'{metric} of {name}' for metric, name, value, target in classes if not value >= target]
    if missed:
        raise SystemExit(f'[embedded] below target: {", ".join(missed)}')


if __name__ == '__main__':
    main()
