"""Params and FLOPs of the InLine-Swin, InLine-PVT, InLine-CSwin and InLine-DeiT ImageNet classifiers (timm models)
at their released input sizes (224x224; InLine-DeiT-S 288, -B 448), against the paper.

    python tools/analysis_tools/classifier_flops.py [--models inline_swin_tiny ... inline_deit_base]
        [--size 224] [--reference swin_tiny_patch4_window7_224 ...]

``--size`` counts every model at that size instead (the paper's figures are at the released sizes); InLine-DeiT takes
it through timm's ViT flags ``dynamic_img_size`` and ``dynamic_img_pad`` (its position embedding resampled to the
grid, the sides zero-padded to whole patches).

FLOPs are multiply-adds of one image counted by mmengine's ``FlopAnalyzer`` through
``inline_backbones.analysis.flop_analyzer`` (linear layers, convolutions, attention matmuls and InLine's
dynamic depthwise 3x3 counted, layer norms by mmengine's own handle; activations, residual adds and
softmax not counted, as in fvcore and mmdet's/mmseg's ``get_flops.py``). ``--reference`` adds timm
models (e.g. timm's Swin) counted the same way, for comparison.
"""
import argparse

import timm
import torch

import inline_backbones  # noqa: F401 - registers the inline_{swin,pvt,cswin,deit}_* models with timm
from inline_backbones.analysis.flops import flop_analyzer

# InLine paper / LeapLabTHU/InLine README: params, FLOPs at the released input size (224; DeiT-S 288, DeiT-B 448).
PAPER = {'inline_swin_tiny': (30e6, 4.5e9), 'inline_swin_small': (50e6, 8.7e9), 'inline_swin_base': (88e6, 15.4e9),
         'inline_pvt_tiny': (12.0e6, 2.0e9), 'inline_pvt_small': (21.6e6, 3.9e9), 'inline_pvt_medium': (37.6e6, 6.9e9),
         'inline_pvt_large': (50.2e6, 10.2e9), 'inline_cswin_tiny': (25e6, 4.3e9), 'inline_cswin_small': (43e6, 6.8e9),
         'inline_cswin_base': (96e6, 14.9e9), 'inline_deit_tiny': (6.5e6, 1.1e9), 'inline_deit_small': (16.7e6, 5.0e9),
         'inline_deit_base': (23.8e6, 17.2e9)}


def count(name, size=None):
    """(params, FLOPs, FLOPs by operator) of timm model ``name`` on one ``size`` x ``size`` image (None: the input
    size of its pretrained cfg, the released one; InLine-DeiT at ``size`` with its dynamic size and padding)."""
    flags = dict(dynamic_img_size=True, dynamic_img_pad=True) if size and name.startswith('inline_deit_') else {}
    model = timm.create_model(name, **flags).eval()
    size = size or model.pretrained_cfg['input_size'][-1]
    params = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        analyzer = flop_analyzer(model, (torch.randn(1, 3, size, size),))
        return params, analyzer.total(), dict(analyzer.by_operator())


def _vs_paper(ours, paper, unit, suffix):
    """Table cells: the paper's figure and our relative difference to it."""
    if paper is None:
        return ['-', '-']
    return [f'{paper / unit:g}{suffix}', f'{100 * (ours / paper - 1):+.1f}%']


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--models', nargs='+', default=list(PAPER))
    parser.add_argument('--size', type=int, default=None, help='one input size for every model (default: each '
                        "model's released size)")
    parser.add_argument('--reference', nargs='*', default=[], help='other timm models counted the same way')
    args = parser.parse_args(argv)
    at = args.size or 'the released size'
    print(f'| model | params | paper | diff | FLOPs at {at} | paper | diff |\n|---|---|---|---|---|---|---|')
    for name in args.models + args.reference:
        params, flops, by_op = count(name, args.size)
        paper_params, paper_flops = PAPER.get(name, (None, None))
        cells = [name, f'{params / 1e6:.2f}M', *_vs_paper(params, paper_params, 1e6, 'M'),
                 f'{flops / 1e9:.2f}G', *_vs_paper(flops, paper_flops, 1e9, 'G')]
        print('| ' + ' | '.join(cells) + ' |', flush=True)
        print('  by operator (G): ' + ', '.join(f'{k} {v / 1e9:.3f}' for k, v in sorted(by_op.items())), flush=True)


if __name__ == '__main__':
    from inline_backbones.cli import run_tool

    run_tool(main, 'classifier_flops')
