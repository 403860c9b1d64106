"""Write the InLine version of an mmdet/mmseg Swin or PVT v1 recipe: a child config that inherits the recipe and
swaps its backbone for the InLine one of the same size, with the released InLine checkpoint and padding-aware mode
(with the region preprocessor) where the recipe's data path allows. Prints what it changed and what it could not,
then checks that the written config's backbone builds.

    python tools/misc/inline_recipe.py mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py
    python tools/misc/inline_recipe.py \\
        mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py --out configs/my_upernet.py
    # no InLine-Swin-L is released: a layout, trained from scratch
    python tools/misc/inline_recipe.py mmdet::dino/dino-5scale_swin-l_8xb2-12e_coco.py --layout IIIS

Train the written config as any other: ``python tools/train.py configs/<name>.py``. What each change means:
docs/upstream_recipes.md (inline_backbones/openmmlab/upstream_recipe.py does the work).
"""
import argparse
import sys

from inline_backbones.cli import run_tool
from inline_backbones.openmmlab.upstream_recipe import check_written, default_out, plan, write


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('recipe', help="the upstream recipe: 'mmdet::swin/...py', 'mmseg::swin/...py' or a path")
    parser.add_argument('--out', help='the child config to write (default: configs/<recipe name with '
                                      'swin -> inline-swin, pvt -> inline-pvt>.py)')
    parser.add_argument('--layout', help="the InLine layout, one letter per stage (e.g. 'IIIS'): required for a "
                                         'size with no released InLine model, which then trains from scratch')
    parser.add_argument('--no-padding-aware', dest='padding_aware', action='store_false',
                        help="keep the recipe's preprocessor and padding-aware mode off (the paper's protocol)")
    args = parser.parse_args(argv)
    swap = plan(args.recipe, padding_aware=args.padding_aware, layout=args.layout)
    out = write(swap, args.out or default_out(args.recipe))
    check_written(out, swap)
    print(f'wrote {out}: {swap.family} in {swap.base}')
    print('changed:')
    for line in swap.changed:
        print(f'  {line}')
    if swap.cannot:
        print('could not:')
        for line in swap.cannot:
            print(f'  {line}')
    print(f'train it: python tools/train.py {out}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main, 'inline_recipe'))
