"""What the command-line tools check before they build a model: the config (and whether it loads), the checkpoint
and the images. Each problem is a :class:`ToolInputError` whose message names it and the fix in one line; the tools
print it as their last line and exit with status 1 (:func:`inline_backbones.cli.exit_on_user_error`).

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


def read_config(path):
    """The mmengine ``Config`` of the config file ``path`` (:func:`check_config`; an ``mmdet::`` / ``mmseg::`` name
    is read from the installed package's configs, as ``_base_`` names are). A config that does not load
    because of what it says (a ``_base_`` that does not exist, a syntax error, a name it does not define, in it or in a
    config it inherits) is a :class:`ToolInputError` naming the file and the error."""
    from mmengine.config import Config

    from ..openmmlab.upstream_recipe import RecipeError, recipe_path

    check_config(path)
    if '::' in path:   # an upstream config by its scope name: its file in the installed package
        try:
            path = recipe_path(path)
        except RecipeError as err:
            raise ToolInputError(str(err)) from None
    try:
        return Config.fromfile(path)
    except (FileNotFoundError, SyntaxError, NameError) as err:
        what = f'{err.msg} (line {err.lineno})' if isinstance(err, SyntaxError) and err.lineno else str(err)
        raise ToolInputError(f'config {path!r} does not load: {type(err).__name__}: {what}') from err


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

