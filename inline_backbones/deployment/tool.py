"""``tools/deployment/export_onnx.py CONFIG --whole``: export a trained segmentor or detector whole, check it
against mmseg's / mmdet's inference, optionally quantise it to int8.

    python tools/deployment/export_onnx.py CONFIG --whole --checkpoint FILE [--out FILE]
        [--min-side 32] [--max-side 4096] [--logits] [--runtime onnxruntime|openvino] [--precision fp32|bf16]
        [--check-images IMAGE_OR_FOLDER ...] [--check-sizes HxW ...] [--int8-calibration IMAGE_OR_FOLDER ...]
        [--int8-images 32] [--cfg-options KEY=VALUE ...]

Steps, each announced: build the model from the config with the checkpoint's weights (strictly); print what goes
into the file and what the runtime helper (``inline_runtime``) completes; export with H and W dynamic within
``[--min-side, --max-side]``; run the file with ``inline_runtime`` in ``--runtime`` at ``--precision`` and
mmseg/mmdet on the check images (``--check-images``, else generated images of ``--check-sizes``, by default
512x512 and 1000x1500), one line per image; a file that disagrees is deleted and the tool exits with status 1.
fp32 must agree (segmentation: label maps on >= 99.9% of the pixels, logits within 1e-3 relative; detection:
the same detections); bf16 is reported, not required to agree. ``--int8-calibration``: also write ``<out>.int8.onnx``
(:mod:`.quantize`) calibrated on those images (at most ``--int8-images``), and report its agreement on the check
images (accuracy on a labelled set: ``tools/deployment/evaluate_exported.py``).
"""
import argparse
import os
import os.path as osp
import time

import numpy as np
from mmengine.config import DictAction

from inline_runtime.backends import PRECISIONS, RUNTIMES
from inline_runtime.images import image_inputs

from ..cli import progress
from ..data.tool_inputs import ToolInputError, check_checkpoint, check_config
from .whole import WholeExportMismatch, check_whole, export_whole, load_task_model

TOOL = 'export_onnx'


def synthetic_image(h, w, seed=0):
    """A (h, w) BGR test image: gradients, a periodic texture, discs and noise (content at every scale)."""
    import cv2

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    image = np.stack([x * 255 / w, y * 255 / h, ((x + y) % 97) * 2.6], -1) + rng.normal(0, 12, (h, w, 3))
    image = np.clip(image, 0, 255).astype(np.uint8)
    for _ in range(6):
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        cv2.circle(image, centre, int(rng.integers(min(h, w) // 16 + 1, min(h, w) // 4 + 2)),
                   tuple(int(c) for c in rng.integers(0, 256, 3)), -1)
    return image


def parse_size(text):
    try:
        h, w = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r}: give a size as HxW, e.g. 1000x1500') from None
    return h, w


def check_images(args):
    """(name, BGR image) pairs to check the file on."""
    from inline_runtime.images import read_image

    if args.check_images:
        files, _ = image_inputs(args.check_images)
        return [(osp.basename(f), read_image(f)) for f in files]
    return [(f'generated {h}x{w}', synthetic_image(h, w, i)) for i, (h, w) in enumerate(args.check_sizes)]


def build_parser():
    parser = argparse.ArgumentParser(prog='export_onnx.py CONFIG --whole', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='an mmseg or mmdet config of this repository')
    parser.add_argument('--whole', action='store_true', required=True)
    parser.add_argument('--checkpoint', help='the trained model (random weights without it: a smoke test)')
    parser.add_argument('--out', help='ONNX file (default: <config name>_whole.onnx)')
    parser.add_argument('--min-side', type=int, default=32,
                        help='smallest height/width the file takes (smaller images are padded to it)')
    parser.add_argument('--max-side', type=int, default=4096, help='largest height/width the file takes')
    parser.add_argument('--logits', action='store_true', help='segmentation: also output the logits')
    parser.add_argument('--runtime', choices=RUNTIMES, default='onnxruntime', help='runtime of the check')
    parser.add_argument('--precision', choices=PRECISIONS, default='fp32', help='precision of the check')
    parser.add_argument('--check-images', nargs='+', metavar='IMAGE', help='images or folders to check on')
    parser.add_argument('--check-sizes', nargs='+', type=parse_size, default=[(512, 512), (1000, 1500)],
                        metavar='HxW', help='sizes of generated check images (without --check-images)')
    parser.add_argument('--int8-calibration', nargs='+', metavar='IMAGE',
                        help='images or folders to calibrate an int8 copy of the file on')
    parser.add_argument('--int8-images', type=int, default=32,
                        help='calibrate on at most this many of those images (in name order)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='config overrides, key=value')
    return parser


def main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 32 <= args.min_side <= args.max_side:
        parser.error(f'--min-side {args.min_side} --max-side {args.max_side}: need 32 <= min <= max')
    check_config(args.config)
    if args.checkpoint:
        check_checkpoint(args.checkpoint)
    out = args.out or f'{osp.splitext(osp.basename(args.config))[0]}_whole.onnx'
    images = check_images(args)
    calibration = None
    if args.int8_calibration:
        calibration = image_inputs(args.int8_calibration)[0][:args.int8_images]

    start = time.perf_counter()
    progress(TOOL, f'building {args.config}' + (f' with {args.checkpoint}' if args.checkpoint else
                                                 ' (random weights: no --checkpoint)'))
    cfg, task, model, checkpoint_meta = load_task_model(args.config, args.checkpoint, args.cfg_options)
    progress(TOOL, f'exporting the whole {task} model to {out}, H and W dynamic within {args.min_side}..'
                   f'{args.max_side} (about a minute for a Tiny backbone on 2 cores)')
    options = dict(with_logits=args.logits) if task == 'mmseg' else {}
    meta = export_whole(cfg, task, model, checkpoint_meta, out, args.min_side, args.max_side, **options)
    if meta['dynamic_range'][0] != args.min_side:
        print(f'the file takes {meta["dynamic_range"][0]}..{args.max_side} px a side')
    print(f'in the file: {"; ".join(meta["in_file"])}')
    print(f'completed by inline_runtime: {"; ".join(meta["helper"])}')
    print(f'exported in {time.perf_counter() - start:.0f} s: {out} ({os.path.getsize(out) / 2 ** 20:.1f} MB), '
          f'outputs {", ".join(meta["outputs"])}', flush=True)

    progress(TOOL, f'checking {out} in {args.runtime} {args.precision} against {task} on {len(images)} image(s)')
    strict = args.precision == 'fp32'
    try:
        check_whole(out, cfg, task, model, images, args.runtime, args.precision, report=print, delete=strict)
    except WholeExportMismatch as err:
        raise ToolInputError(str(err)) from None
    if calibration:
        from inline_runtime import load
        from inline_runtime.images import read_image

        from .quantize import quantize_int8

        int8 = f'{osp.splitext(out)[0]}.int8.onnx'
        progress(TOOL, f'quantising to int8 ({int8}), calibrated on {len(calibration)} image(s)')
        quantize_int8(out, int8, [read_image(f) for f in calibration], load(out))
        print(f'int8 file: {int8} ({os.path.getsize(int8) / 2 ** 20:.1f} MB); agreement with {task} (reported, '
              'not required):')
        check_whole(int8, cfg, task, model, images, args.runtime, 'fp32', report=print, delete=False)
    print(f'OK: {out}' + (' (fp32 agrees with ' + task + ')' if strict else ''))
    return 0
