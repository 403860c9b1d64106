"""InLine, FLatten, plain linear (ReLU, exp) and softmax attention side by side, on the same images and at the same
backbone positions: negative weights and the output share they carry, injectivity and collapse toward uniform,
locality and the local terms, and the numerical rank of the attention matrix (alone and with the local term).

    python tools/analysis_tools/compare_attention.py IMAGE|FOLDER [...] [--arch tiny|small|base]
        [--inline-checkpoint CKPT] [--flatten-checkpoint CKPT] [--random-init trunk|fan-in] [--kernel-func K]
        [--sizes 224 448 ...] [--num-queries 256]
        [--num-pairs 256] [--seed 0] [--rank-max-tokens 1024] [--rank-channels 4] [--out-dir DIR]

InLine, linear and softmax rows come from InLine-Swin's layers (its released checkpoint, or random weights), the
FLatten rows from FLatten-Swin's (its released checkpoint, or random weights), both of the same size (``--arch``),
each image resized to each of ``--sizes``. FLatten-Swin is built with its FLatten blocks global, the positional
encoding resized to the map: at 224 px that is the released model (its windows, 56 and 28, are the whole maps).
Writes compare_stats.json/.csv, compare_tables.md and compare_{negative,injectivity,locality,rank}.png to
--out-dir, and prints the tables; see docs/analysis.md#comparing-the-attentions.
"""
import argparse
import os.path as osp
import sys
import time
from functools import partial

import torch

from inline_backbones.analysis.compare import CompareSettings
from inline_backbones.analysis.compare_run import compare_attention
from inline_backbones.analysis.inputs import build_backbone, fan_in_weights
from inline_backbones.benchmark.options import parse_size
from inline_backbones.cli import exit_on_user_error, progress, run_tool
from inline_backbones.data.tool_inputs import check_checkpoint
from inline_runtime.images import image_inputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('images', nargs='+')
    parser.add_argument('--arch', choices=['tiny', 'small', 'base'], default='tiny',
                        help='InLine-Swin and FLatten-Swin of this size (default: tiny)')
    parser.add_argument('--models', nargs='+', choices=['inline', 'flatten'], default=['inline', 'flatten'])
    parser.add_argument('--inline-checkpoint', help='released InLine-Swin checkpoint (default: random weights)')
    parser.add_argument('--flatten-checkpoint', help='released FLatten-Swin checkpoint (default: random weights)')
    parser.add_argument('--kernel-func', choices=['identity', 'relu', 'leakyrelu', 'exp'],
                        help="InLine's kernel on q, k (default: identity, the released models'); the same weights")
    parser.add_argument('--random-init', choices=['trunk', 'fan-in'], default='trunk',
                        help="random weights: the trunk's init (truncated normal, std 0.02; default) or N(0, 1/fan_in) "
                        "plus N(0, 0.05^2) on every parameter (the fixtures' recipe: scores of order one)")
    parser.add_argument('--sizes', nargs='+', type=parse_size, default=[(224, 224)], metavar='HxW',
                        help='input sizes, HxW or one side (default: 224)')
    defaults = CompareSettings()
    parser.add_argument('--num-queries', type=int, default=defaults.num_queries)
    parser.add_argument('--num-pairs', type=int, default=defaults.num_pairs)
    parser.add_argument('--seed', type=int, default=defaults.seed, help='query sample and random weights')
    parser.add_argument('--chunk', type=int, default=defaults.chunk, help='rows computed at a time')
    parser.add_argument('--rank-max-tokens', type=int, default=defaults.rank_max_tokens,
                        help='ranks (dense N x N SVDs) only where N <= this')
    parser.add_argument('--rank-channels', type=int, default=defaults.rank_channels,
                        help='channels per head whose A + local operator is ranked')
    parser.add_argument('--out-dir', default='outputs/attention_compare')
    args = parser.parse_args(argv)
    if args.num_queries < 2 or args.num_pairs < 0 or args.chunk < 1 or args.rank_channels < 1:
        parser.error('--num-queries must be >= 2, --num-pairs >= 0, --chunk >= 1, --rank-channels >= 1')

    checkpoints = dict(inline=args.inline_checkpoint, flatten=args.flatten_checkpoint)
    with exit_on_user_error('compare_attention'):
        for path in checkpoints.values():
            if path:
                check_checkpoint(path)
        args.images, skipped = image_inputs(args.images)
    if skipped:
        print(f'skipped {len(skipped)} file(s) that are not images: {", ".join(map(osp.basename, skipped))}')
    backbones, norms = {}, {}
    for model in args.models:
        if not checkpoints[model]:
            print(f'NOTE: no --{model}-checkpoint: the {model} model has random weights (seed {args.seed}); the '
                  'numbers describe an untrained layer', file=sys.stderr)
        torch.manual_seed(args.seed)
        arch = args.arch if model == 'inline' else f'flatten-{args.arch}'
        overrides = dict(flatten_global=True) if model == 'flatten' else dict(kernel_func=args.kernel_func)
        backbones[model], norms[model] = build_backbone(arch=arch, checkpoint=checkpoints[model], **overrides)
        if not checkpoints[model] and args.random_init == 'fan-in':
            fan_in_weights(backbones[model], args.seed)
    settings = CompareSettings(args.num_queries, args.num_pairs, args.seed, args.chunk, args.rank_max_tokens,
                               args.rank_channels)
    meta = dict(arch=args.arch, kernel_func=args.kernel_func or 'identity', random_init=args.random_init,
                models=' + '.join(f'{m}: {checkpoints[m] or "random weights"}' for m in args.models),
                sizes=[list(s) for s in args.sizes], threads=torch.get_num_threads(), torch=torch.__version__)
    start = time.perf_counter()
    data = compare_attention(backbones, args.images, args.sizes, settings, args.out_dir, norms, meta,
                             progress=partial(progress, 'compare_attention'))
    print(open(osp.join(args.out_dir, 'compare_tables.md')).read())
    print(f'{len(args.images)} image(s) x {len(args.sizes)} size(s) in {time.perf_counter() - start:.1f} s -> '
          f'{osp.join(args.out_dir, "compare_stats.json")} ({len(data["results"])} results)')


if __name__ == '__main__':
    run_tool(main, 'compare_attention')
