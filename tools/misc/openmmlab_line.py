"""Which OpenMMLab 2.0 line (the official releases or the maintained fork) provides mmengine, mmcv, mmdet, mmseg and
mim here, each module's distribution and version; an environment holding modules of both lines is an error naming
them and the fix (:mod:`inline_backbones.openmmlab.line`).

    python tools/misc/openmmlab_line.py [--expect official|onedl]

``--expect LINE``: also an error unless every module comes from that line (tools/setup/setup_env.sh's last check).
"""
import argparse

from inline_backbones.cli import run_tool
from inline_backbones.openmmlab.line import LINES, check_one_line, describe


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--expect', choices=sorted(LINES), help='fail unless every module comes from this line')
    args = parser.parse_args(argv)
    if args.expect:
        check_one_line(args.expect)
    print(describe())


if __name__ == '__main__':
    run_tool(main, 'openmmlab_line')
