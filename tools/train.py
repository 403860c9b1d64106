"""``python tools/train.py CONFIG [...]``: mmdet's or mmseg's own train tool, picked from the config.

Same options as ``mim train mmdet|mmseg CONFIG``; for several GPUs or processes use torchrun, e.g.
``torchrun --nproc_per_node=8 tools/train.py CONFIG --launcher pytorch``
(docs/training.md#commands-mim-torchrun-slurm-batch-size-and-learning-rate).
"""
from inline_backbones.cli import run_tool
from inline_backbones.openmmlab.task_tools import run_task_tool


def main(argv=None):
    """Run mmdet's or mmseg's train tool on ``argv`` (``sys.argv[1:]`` by default)."""
    run_task_tool('train', argv)


if __name__ == '__main__':
    run_tool(main, 'train')
