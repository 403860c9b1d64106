"""How much padding changes an image's backbone features, per backbone mode, and what the modes cost.

    python tools/analysis_tools/measure_padding.py [--image 800x1216] [--padded 800x1344 1216x1344]
        [--models inline-swin-t inline-swin-t-pa inline-swin-t-w56 inline-swin-t-pa-w56 mmdet:swin-t]
    python tools/analysis_tools/measure_padding.py --latency [--latency-image 800x1333] [--repeats 7]

Padding table: one random image (standard normal, i.e. already normalised) of ``--image`` pixels is run
alone (no padding) and zero-padded bottom/right to each ``--padded`` size, through randomly
initialised backbones (``init_weights``, seed 0); printed per stage: ``|f_padded - f_alone| / |f_alone|``
(Frobenius norms) on the image's own region (``ceil(size / stride)`` tokens). Padding-aware models get
the image's shape explicitly. Model names as in ``tools/analysis_tools/benchmark.py`` (this package's and mmdet's):
``-pa`` padding-aware, ``-wN`` InLine windows of N; ``mmdet:swin-t`` is mmdet's Swin-T (window 7).

``--latency``: batch 1, fp32, CPU threads as torch sets them, the models timed interleaved as the benchmark times
them (:func:`inline_backbones.benchmark.timing.interleaved`: one forward of each per round, ``--repeats`` rounds after
one warm-up round, the wall clock), median and ratio to the first model.
The input is the mmdet batch of one ``--latency-image`` image: padded to a multiple of 32 with zeros,
its shape given to the padding-aware models.
"""
import argparse
import functools
import math
import statistics

import torch

from inline_backbones.benchmark.names import build_backbone
from inline_backbones.benchmark.options import parse_size
from inline_backbones.benchmark.timing import interleaved
from inline_backbones.cli import progress, run_tool

STRIDES = (4, 8, 16, 32)


def build(name, image_hw):
    torch.manual_seed(0)
    model = build_backbone(name, image_hw)
    model.init_weights()
    model.eval()  # on its own line: mmdet's SwinTransformer.train() returns None
    return model


def run(model, x, image_hw):
    with torch.no_grad():
        if getattr(model, 'padding_aware', False):
            return model(x, image_shapes=[image_hw])
        return model(x)


def padded(x, size):
    return torch.nn.functional.pad(x, (0, size[1] - x.shape[-1], 0, size[0] - x.shape[-2]))


def padding_table(args):
    image_hw = parse_size(args.image)
    torch.manual_seed(1)
    x = torch.randn(1, 3, *image_hw)
    print(f'relative change of each stage output on the image region, {args.image} image padded to:')
    print('| model | ' + ' | '.join(args.padded) + ' |')
    print('|---|' + '---|' * len(args.padded))
    for name in args.models:
        model = build(name, image_hw)
        alone = run(model, x, image_hw)
        cells = []
        for size in map(parse_size, args.padded):
            outs = run(model, padded(x, size), image_hw)
            rel = []
            for a, b, s in zip(alone, outs, STRIDES, strict=True):
                h, w = math.ceil(image_hw[0] / s), math.ceil(image_hw[1] / s)
                ref = a[..., :h, :w]
                rel.append(((b[..., :h, :w] - ref).norm() / ref.norm()).item())
            cells.append(' '.join(f'{r:.3g}' for r in rel))
        print(f'| {name} | ' + ' | '.join(cells) + ' |', flush=True)


def latency(args):
    image_hw = parse_size(args.latency_image)
    x = padded(torch.randn(1, 3, *image_hw), [s + (-s) % 32 for s in image_hw])
    models = {name: build(name, image_hw) for name in args.models}
    calls = {name: functools.partial(run, model, x, image_hw) for name, model in models.items()}
    interleaved(calls, 0, 1, torch.device('cpu'))                  # the warm-up round
    times = {name: [] for name in calls}
    for i in range(args.repeats):                                  # then one timed round at a time, each reported
        for name, ms in interleaved(calls, 1, 0, torch.device('cpu'))[0].items():
            times[name] += ms
        progress('measure_padding', f'round {i + 1}/{args.repeats}: '
                 + ', '.join(f'{name} {ms[-1] / 1e3:.2f} s' for name, ms in times.items()))
    first = statistics.median(times[args.models[0]])
    print(f'batch 1, fp32, {torch.get_num_threads()} threads, {args.latency_image} image in a '
          f'{x.shape[-2]}x{x.shape[-1]} input, median of {args.repeats} interleaved rounds:')
    print('| model | median s | min-max s | ratio |')
    print('|---|---|---|---|')
    for name, t in times.items():
        med = statistics.median(t)
        print(f'| {name} | {med / 1e3:.3f} | {min(t) / 1e3:.3f}-{max(t) / 1e3:.3f} | {med / first:.3f} |')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--image', default='800x1216')
    parser.add_argument('--padded', nargs='+', default=['800x1344', '1216x1344'])
    parser.add_argument('--models', nargs='+', default=None)
    parser.add_argument('--latency', action='store_true', help='time the modes instead')
    parser.add_argument('--latency-image', default='800x1333')
    parser.add_argument('--repeats', type=int, default=7)
    args = parser.parse_args(argv)
    if args.latency:
        args.models = args.models or ['inline-swin-t', 'inline-swin-t-pa', 'inline-swin-t-w56', 'inline-swin-t-pa-w56']
        latency(args)
    else:
        args.models = args.models or ['inline-swin-t', 'inline-swin-t-pa', 'inline-swin-t-w56',
                                      'inline-swin-t-pa-w56', 'mmdet:swin-t']
        padding_table(args)


if __name__ == '__main__':
    run_tool(main, 'measure_padding')
