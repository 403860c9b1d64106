"""Generate the embedded "shapes" dataset (COCO instances + label maps), deterministically.

    python tools/misc/make_shapes_dataset.py [--root data/shapes] [--train 400] [--val 100] [--seed 0]
"""
import argparse
from functools import partial

from inline_backbones.cli import progress, run_tool
from inline_backbones.data.shapes import generate_shapes_dataset


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--root', default='data/shapes')
    parser.add_argument('--train', type=int, default=400, help='number of training images')
    parser.add_argument('--val', type=int, default=100, help='number of validation images')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    counts = generate_shapes_dataset(args.root, args.train, args.val, args.seed,
                                     progress=partial(progress, 'make_shapes_dataset'))
    for split, c in counts.items():
        print(f'[shapes] {split}: {c["images"]} images, {c["instances"]} instances -> {args.root}')


if __name__ == '__main__':
    run_tool(main, 'make_shapes_dataset')
