"""Attention analysis of an InLine-Swin backbone on images (InLine-Swin only: InLine-PVT is not supported):
negative weights, injectivity (against plain linear attention from the same q, k), locality and the 3x3
residual's share, per InLine layer and head. Without ``--checkpoint`` the weights are random (a notice says so).

    python tools/analysis_tools/analyze_attention.py IMAGE|FOLDER [...] (--config CFG | --arch tiny) [--checkpoint CKPT
        [--prefix backbone.]] [--size H W] [--num-queries 256] [--num-pairs 256] [--seed 0] [--out-dir DIR]

Rows of the attention matrix are computed exactly for ``--num-queries`` sampled queries per head (in
chunks, never N x N); pairs are each sampled query with its nearest sampled neighbour plus
``--num-pairs`` random ones. The images are resized as the config's test pipeline does (``--size``
overrides; with ``--arch`` the image keeps its size unless ``--size`` is given). Writes
attention_stats.json/.csv, summary.png, pairs.png and query maps; see docs/analysis.md#the-tool.
"""
import argparse
import os.path as osp
import sys
import time

from inline_backbones.analysis.inputs import build_backbone
from inline_backbones.analysis.layer import AnalysisSettings
from inline_backbones.analysis.run import analyze_attention
from inline_backbones.cli import exit_on_user_error, run_tool
from inline_backbones.data.tool_inputs import check_checkpoint, check_config
from inline_runtime.images import image_inputs


def parse_point(text):
    try:
        x, y = (int(v) for v in text.split(','))
    except ValueError:
        raise argparse.ArgumentTypeError(f'a point is "x,y" in pixels of the resized image, got {text!r}') from None
    return x, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('images', nargs='+')
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument('--config', help='mmdet/mmseg config whose model.backbone is analysed')
    model.add_argument('--arch', choices=['tiny', 'small', 'base'])
    parser.add_argument('--checkpoint', help='released ImageNet checkpoint, or a detector/segmentor one with --prefix')
    parser.add_argument('--prefix', help="key prefix in the checkpoint, e.g. 'backbone.'")
    parser.add_argument('--attn-type', help='override the layout, e.g. IIIS')
    parser.add_argument('--kernel-func', help='override the InLine kernel (identity, relu, leakyrelu, exp)')
    parser.add_argument('--size', type=int, nargs=2, metavar=('H', 'W'), help='resize every image to H x W')
    parser.add_argument('--num-queries', type=int, default=AnalysisSettings.num_queries)
    parser.add_argument('--num-pairs', type=int, default=AnalysisSettings.num_pairs)
    parser.add_argument('--seed', type=int, default=AnalysisSettings.seed)
    parser.add_argument('--linear-kernel', default=AnalysisSettings.linear_kernel, choices=['relu', 'exp'])
    parser.add_argument('--chunk', type=int, default=AnalysisSettings.chunk, help='rows computed at a time')
    parser.add_argument('--points', type=parse_point, nargs='+', help='query points x,y (default: picked on objects)')
    parser.add_argument('--num-points', type=int, default=3)
    parser.add_argument('--map-layers', nargs='+', help='layers to draw (default: the last InLine layer per stage)')
    parser.add_argument('--out-dir', default='outputs/attention_analysis')
    args = parser.parse_args(argv)
    if args.num_queries < 2 or args.num_pairs < 0 or args.chunk < 1:
        parser.error('--num-queries must be >= 2, --num-pairs >= 0, --chunk >= 1')

    with exit_on_user_error('analyze_attention'):
        if args.config:
            check_config(args.config)
        if args.checkpoint:
            check_checkpoint(args.checkpoint)
        args.images, skipped = image_inputs(args.images)
    if skipped:
        print(f'skipped {len(skipped)} file(s) that are not images: {", ".join(map(osp.basename, skipped))}')
    if not args.checkpoint:
        print('NOTE: no --checkpoint: analysing randomly initialised weights (the numbers describe an untrained '
              'layer; give a released or trained checkpoint for a trained one)', file=sys.stderr)
    backbone, norm = build_backbone(args.config, args.arch, args.checkpoint, args.prefix,
                                    attn_type=args.attn_type, kernel_func=args.kernel_func)
    resize = resize_args = None      # the config's test Resize: a function of the image, and its arguments
    if args.config and not args.size:
        from inline_backbones.openmmlab.analysis_config import config_resize, config_resize_args

        resize, resize_args = config_resize(args.config), config_resize_args(args.config)
    settings = AnalysisSettings(args.num_queries, args.num_pairs, args.seed, args.linear_kernel, args.chunk)
    meta = dict(model=args.config or args.arch, checkpoint=args.checkpoint or 'random weights',
                attn_type=backbone.attn_type, size=args.size, resize=resize_args)
    start = time.perf_counter()
    data = analyze_attention(backbone, args.images, settings, args.out_dir, norm, args.size, resize, args.points,
                             args.num_points, args.map_layers, meta)
    elapsed = time.perf_counter() - start
    print(f'\n{len(args.images)} image(s), {settings.num_queries} sampled queries, seed {settings.seed}, '
          f'in {elapsed:.1f} s -> {osp.join(args.out_dir, "attention_stats.json")}')
    for row in data['summary']:
        print(f"{row['layer']:<24} A<0 {row['negative.negative_share']:6.1%}  min N*A "
              f"{row['negative.min_scaled_weight']:7.2f}  3x3 mass/uniform InLine "
              f"{row['locality_inline.ratio_3x3']:6.2f} linear {row['locality_linear.ratio_3x3']:6.2f}  "
              f"confused InLine {row.get('injectivity_inline.confused_share', float('nan')):.3f} "
              f"linear {row.get('injectivity_linear.confused_share', float('nan')):.3f}  "
              f"|res|/|attn| {row.get('residual_to_attention_norm', float('nan')):.2f}")


if __name__ == '__main__':
    run_tool(main, 'analyze_attention')
