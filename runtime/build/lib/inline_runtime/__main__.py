"""Run a whole exported model on images and write the outputs of ``tools/infer.py``, without torch or OpenMMLab.

    python -m inline_runtime MODEL IMAGE [IMAGE ...] [--out-dir outputs/runtime] [--runtime onnxruntime|openvino]
        [--precision fp32|bf16] [--threads N] [--score-thr 0.3] [--describe]

MODEL is an ONNX file written by ``tools/deployment/export_onnx.py --whole`` (or OpenVINO IR converted from one).
IMAGE may be files or folders (a folder's files that are not images are skipped and listed). Segmentation writes
``vis/<name>`` and ``pred/<stem>.png``; detection ``vis/<name>`` and ``preds/<stem>.json``
(:mod:`inline_runtime.outputs`). ``--describe`` prints what the file computes and what this package completes.
A problem with the inputs ends the run with one line naming it (status 1).
"""
import argparse
import sys
import time

from .backends import PRECISIONS, RUNTIMES, RuntimeInputError
from .images import image_inputs, read_image
from .model import load
from .outputs import write_outputs


def describe(meta):
    lines = [f'{meta["task"]}: {meta["model"]} from {meta["config"]}, {len(meta.get("classes") or [])} classes',
             f'inputs: {", ".join(meta.get("input_names", ["image"]))}; outputs: {", ".join(meta["outputs"])}',
             'in the file: ' + '; '.join(meta['in_file']),
             'completed by inline_runtime: ' + '; '.join(meta['helper'])]
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m inline_runtime', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('model')
    parser.add_argument('images', nargs='*', help='image files or folders')
    parser.add_argument('--out-dir', default='outputs/runtime')
    parser.add_argument('--runtime', choices=RUNTIMES, default='onnxruntime')
    parser.add_argument('--precision', choices=PRECISIONS, default='fp32')
    parser.add_argument('--threads', type=int, help='intra-op threads (default: the runtime\'s own)')
    parser.add_argument('--score-thr', type=float, default=0.3, help='detection: boxes drawn from this score')
    parser.add_argument('--describe', action='store_true', help='print what the file holds and exit')
    args = parser.parse_args(argv)
    try:
        predictor = load(args.model, args.runtime, args.precision, args.threads)
        if args.describe:
            print(describe(predictor.meta))
            return 0
        if not args.images:
            parser.error('give images (files or folders), or --describe')
        files, skipped = image_inputs(args.images)
    except (RuntimeInputError, ValueError) as err:
        print(f'[inline_runtime] error: {err}', file=sys.stderr)
        return 1
    if skipped:
        print(f'[inline_runtime] skipped {len(skipped)} file(s) that are not images')
    print(f'[inline_runtime] {len(files)} image(s), {args.runtime} {args.precision}', flush=True)
    start = time.perf_counter()
    for path in files:
        image = read_image(path)
        t = time.perf_counter()
        result = predictor.predict(image)
        vis, pred = write_outputs(args.out_dir, path, image, result, predictor.meta, args.score_thr)
        print(f'[inline_runtime] {path}: {image.shape[0]}x{image.shape[1]} in {time.perf_counter() - t:.2f} s -> '
              f'{vis}, {pred}', flush=True)
    print(f'[inline_runtime] {time.perf_counter() - start:.1f} s for {len(files)} image(s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
