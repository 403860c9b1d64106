"""What the command-line tools check before they build a model: the config file and the checkpoint (the config's
loading is :func:`inline_backbones.openmmlab.task_tools.read_config`). Each problem is a :class:`ToolInputError`
whose message names it and the fix in one line; the tools print it as their last line and exit with status 1
(:func:`inline_backbones.cli.exit_on_user_error`).

The images the tools take are found by :func:`inline_runtime.images.image_inputs` (by their content, as OpenCV
recognises them); its :class:`~inline_runtime.images.RuntimeInputError` is a user's error to the tools too.
"""
import os.path as osp

from inline_runtime.images import closest as _closest

from ..checkpoints.archive import CheckpointTruncatedError, check_not_truncated
from ..checkpoints.loading import URL_SCHEMES


class ToolInputError(ValueError):
    """A command-line input that cannot work (a missing or mistyped path, a file cut off, a file that is no image)."""


def check_config(path):
    """``path`` is a config file (``mmdet::``/``mmseg::`` names are left to mmengine)."""
    if '::' in path or osp.isfile(path):
        return path
    raise ToolInputError(f'config not found: {path!r}{_closest(path)}')


def check_checkpoint(path):
    """``path`` is a URL (downloaded and checked later) or a whole local checkpoint file."""
    if path.startswith(URL_SCHEMES):
        return path
    if not osp.isfile(path):
        raise ToolInputError(f'checkpoint not found: {path!r}{_closest(path)}')
    try:
        check_not_truncated(path)
    except CheckpointTruncatedError as err:
        raise ToolInputError(str(err)) from None
    return path

