"""Accuracy of whole exported files on a labelled dataset, per runtime and precision (same images, same metric).

    python tools/deployment/evaluate_exported.py FILE [FILE ...] --images DIR (--labels DIR | --coco ANN.json)
        [--runs onnxruntime:fp32 openvino:fp32 openvino:bf16]

Segmentation: mIoU and aAcc against the label PNGs of ``--labels`` (mmseg's ``IoUMetric``); detection: box (and
mask) AP over the COCO file ``--coco`` whose images are in ``--images`` (mmdet's ``CocoMetric``). Each FILE (e.g. an
fp32 file and its ``.int8.onnx`` copy) is run in each of ``--runs`` (``runtime:precision``; a precision this CPU
lacks is skipped with a note); one line per run, then the change against the first run.
See ``inline_backbones/deployment/evaluate.py``.
"""
import argparse

from inline_backbones.cli import run_tool
from inline_backbones.deployment.evaluate import detection_ap, segmentation_iou
from inline_runtime import RuntimeInputError, load
from inline_runtime.images import image_inputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('files', nargs='+', help='exported ONNX files')
    parser.add_argument('--images', required=True, help='the images (segmentation: a folder; detection: the '
                                                        "COCO file's image folder)")
    task = parser.add_mutually_exclusive_group(required=True)
    task.add_argument('--labels', help='segmentation: folder of label PNGs named as the images')
    task.add_argument('--coco', help='detection: COCO annotation file')
    parser.add_argument('--runs', nargs='+', default=['onnxruntime:fp32'], metavar='RUNTIME:PRECISION')
    args = parser.parse_args(argv)
    rows = []
    for path in args.files:
        for run in args.runs:
            runtime, _, precision = run.partition(':')
            try:
                predictor = load(path, runtime, precision or 'fp32')
            except RuntimeInputError as err:
                print(f'{path} {run}: skipped ({err})')
                continue
            if args.labels:
                metrics = segmentation_iou(predictor, image_inputs([args.images])[0], args.labels)
                metrics = {k: metrics[k] for k in ('mIoU', 'aAcc')}
            else:
                metrics = detection_ap(predictor, args.coco, args.images)
            rows.append((f'{path} {run}', metrics))
            print(f'{path} {run}: ' + ', '.join(f'{k} {v:.4f}' for k, v in metrics.items()), flush=True)
    if len(rows) > 1:
        first_name, first = rows[0]
        print(f'change against {first_name}:')
        for name, metrics in rows[1:]:
            print(f'  {name}: ' + ', '.join(f'{k} {metrics[k] - first[k]:+.4f}' for k in first if k in metrics))
    return 0


if __name__ == '__main__':
    run_tool(main, 'evaluate_exported')
