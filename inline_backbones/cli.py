"""The command-line tools' shared entry: every tool's ``__main__`` is ``run_tool(main, TOOL)``
(:func:`run_tool`).

* A user's mistake (:func:`user_message`) ends the tool with one line on stderr, ``[TOOL] error: <message>``, and
  exit status 1 (followed by the message's own lines where it lists several things, as the class check's and the
  checkpoint key check's do); anything else is a bug and keeps its traceback.
* ``--debug`` anywhere on the command line (taken out before ``main`` sees it), or ``INLINE_DEBUG=1`` in the
  environment (which torchrun's processes inherit), shows the traceback of every error instead.
* The warnings that upstream imports give about themselves (:data:`UPSTREAM_NOISE`) are not shown.

A user's mistake is an exception of one of the classes of :data:`USER_ERRORS`, or mmengine's ``KeyError`` for a
``type`` that no registry holds (a mistyped class name in a config), each raised with a message that names the problem
and its fix:

* the package's own: :class:`~.tool_inputs.ToolInputError` (a missing or mistyped path, a file cut off, a file that
  is no image), :class:`~.upstream_recipe.RecipeError`, :class:`~.class_check.ClassMismatchError`,
  :class:`~.models.errors.ModelArgumentError` (a model's arch, options, layout or stage indices) and the checkpoint
  errors (:class:`~.checkpoint.CheckpointMismatchError`, :class:`~.checkpoint.CheckpointDownloadError`,
  :class:`~.checkpoint.CheckpointUnreachableError` such as no network, :class:`~.checkpoint.CheckpointLoadError`,
  :class:`~.checkpoints.archive.CheckpointTruncatedError`), :class:`~.openmmlab.line.MixedLinesError` (an environment
  holding modules of both OpenMMLab lines) and :class:`~.frameworks.OpenMMLabNotInstalled` (an OpenMMLab option or tool
  where no line is installed);
* ``FileNotFoundError``: a file that a command line or a config names (an annotation file, a checkpoint) does not
  exist. A config that does not load (a ``_base_`` that does not exist, a syntax error) is a ``ToolInputError`` of
  :func:`~.openmmlab.task_tools.read_config`.

mmengine's registry passes on what a class raises while it builds it from a config unchanged: the line is that
error's message.
"""
import argparse
import contextlib
import contextvars
import os
import re
import sys
import warnings

from inline_runtime.backends import RuntimeInputError

from .checkpoints.archive import CheckpointTruncatedError
from .checkpoints.loading import (
    CheckpointDownloadError,
    CheckpointLoadError,
    CheckpointMismatchError,
    CheckpointUnreachableError,
)
from .data.tool_inputs import ToolInputError
from .frameworks import OpenMMLabNotInstalled, require_openmmlab
from .models.errors import ModelArgumentError
from .openmmlab.errors import ClassMismatchError, RecipeError
from .openmmlab.line import MixedLinesError

# (message regex, category) of the warnings filtered out, each about upstream code and nothing a user gives:
# setuptools' deprecation of pkg_resources, which mmengine imports to find installed packages (an mmdet:: or mmseg::
# config) and mim at import; mmseg's deprecation of its own build_loss, which its heads call; mmengine's visualizer
# built by mmdet's / mmseg's inferencers, whose local backend has no folder (the inferencers write the drawings);
# the fork's mmdet (onedl-mmdetection) at import, about an optional package of a metric no config here uses.
UPSTREAM_NOISE = (
    (r'pkg_resources is deprecated as an API', UserWarning),
    (r'``build_loss`` would be deprecated soon', UserWarning),
    (r"Failed to add <class 'mmengine\.visualization\.vis_backend\.LocalVisBackend'>, please provide the `save_dir` "
     r'argument', UserWarning),
    (r'faster_coco_eval is not installed, metrics will not be computed', UserWarning),
)
# The exception classes whose every instance is a user's mistake (module docstring).
USER_ERRORS = (ToolInputError, RecipeError, ClassMismatchError, ModelArgumentError, CheckpointMismatchError,
               CheckpointDownloadError, CheckpointUnreachableError, CheckpointLoadError, CheckpointTruncatedError,
               MixedLinesError, RuntimeInputError, OpenMMLabNotInstalled, FileNotFoundError)
DEBUG_VARIABLE = 'INLINE_DEBUG'
_REGISTRY_MISS = re.compile(r'\S+ is not in the \S+ registry')      # mmengine's KeyError for an unknown type
_debug = contextvars.ContextVar('debug', default=False)


def user_message(err):
    """The message to show for ``err`` if it is a user's mistake, else None."""
    if isinstance(err, KeyError) and err.args and _REGISTRY_MISS.match(str(err.args[0])):
        return str(err.args[0])           # str() of a KeyError is its argument's repr, in quotes
    if isinstance(err, USER_ERRORS):
        return str(err)
    return None


def debugging():
    """Whether errors show their traceback: ``--debug`` given to :func:`run_tool`, or ``INLINE_DEBUG`` set (not
    0)."""
    return _debug.get() or os.environ.get(DEBUG_VARIABLE, '0') not in ('', '0')


@contextlib.contextmanager
def exit_on_user_error(tool):
    """Inside: a user's mistake ends the program with ``[tool] error: <message>`` on stderr and status 1 (a
    ``SystemExit`` carrying that line), unless :func:`debugging`; anything else is not caught."""
    try:
        yield
    except Exception as err:
        message = user_message(err)
        if message is None or debugging():
            raise
        raise SystemExit(f'[{tool}] error: {message}') from None


def run_tool(main, tool, argv=None):
    """Run ``main(argv)`` as the tool ``tool``'s command (module docstring): ``argv`` (default ``sys.argv[1:]``)
    without ``--debug``, the upstream warnings filtered, a user's mistake ending it in one line. Returns what
    ``main`` returns, an exit status where that is an int."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument('--debug', action='store_true')
    known, argv = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    token = _debug.set(known.debug)
    try:
        with warnings.catch_warnings():
            for message, category in UPSTREAM_NOISE:
                warnings.filterwarnings('ignore', message=message, category=category)
            with exit_on_user_error(tool):
                return main(argv)
    finally:
        _debug.reset(token)


def progress(tool, message):
    """One line of progress on stderr, ``[tool] message``, shown at once."""
    print(f'[{tool}] {message}', file=sys.stderr, flush=True)


class ConfigOptions(argparse.Action):
    """``--cfg-options KEY=VALUE ...``: an mmdet/mmseg config's overrides, parsed by mmengine's ``DictAction``, which
    is imported when the option is given: a tool that also takes timm names parses its other options without
    OpenMMLab (the option itself is an :class:`~.frameworks.OpenMMLabNotInstalled` error there)."""

    def __init__(self, option_strings, dest, nargs='+', **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        require_openmmlab(option_string)
        from .openmmlab.task_tools import dict_action

        dict_action(self.option_strings, self.dest, self.nargs)(parser, namespace, values, option_string)
