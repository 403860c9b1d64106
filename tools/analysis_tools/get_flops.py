"""Params and FLOPs of this repo's detectors / segmentors (or a bare backbone) with mmengine's analysis.

    python tools/analysis_tools/get_flops.py CONFIG [CONFIG ...] [--shape H W] [--markdown]

FLOPs are multiply-adds counted by mmengine's ``FlopAnalyzer`` on one image of ``--shape`` (default
800x1280 for mmdet configs, 512x2048 for mmseg configs; the model's ``tensor`` forward: backbone, neck
and heads, for detectors on the RPN proposals), with the attention matmuls and InLine's dynamic
depthwise convolution counted (see ``inline_backbones/analysis/flops.py``). Elementwise ops are not counted,
as in mmdet's and mmseg's ``get_flops.py``.
"""
import argparse
import os.path as osp
from functools import partial

import torch

from inline_backbones.analysis.flops import flop_analyzer
from inline_backbones.cli import run_tool
from inline_backbones.openmmlab.task_tools import build_task_model

DEFAULT_SHAPE = {'mmdet': (800, 1280), 'mmseg': (512, 2048)}


def count(config, shape=None):
    """(params, FLOPs) of the config's model on one image of ``shape`` (H, W)."""
    task, model, Sample = build_task_model(config)
    H, W = shape or DEFAULT_SHAPE[task]
    meta = dict(img_shape=(H, W), ori_shape=(H, W), pad_shape=(H, W), batch_input_shape=(H, W),
                scale_factor=(1.0, 1.0))
    model.forward = partial(model.forward, data_samples=[Sample(metainfo=meta)], mode='tensor')
    params = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        flops = flop_analyzer(model, (torch.randn(1, 3, H, W),)).total()
    return params, flops, (H, W)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('configs', nargs='+')
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'))
    parser.add_argument('--markdown', action='store_true', help='print a markdown table')
    args = parser.parse_args(argv)
    rows = []
    for config in args.configs:
        params, flops, (H, W) = count(config, args.shape)
        rows.append((osp.basename(config), f'{params / 1e6:.1f}M', f'{flops / 1e9:.0f}G', f'{H}x{W}'))
        print(f'{rows[-1][0]}: params {rows[-1][1]}, FLOPs {rows[-1][2]} at {rows[-1][3]}', flush=True)
    if args.markdown:
        print('\n| config | params | FLOPs | input (HxW) |\n|---|---|---|---|')
        for row in rows:
            print('| ' + ' | '.join(row) + ' |')


if __name__ == '__main__':
    run_tool(main, 'get_flops')
