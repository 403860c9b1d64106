"""What a framework edge lends the models, and what the package says when a framework is missing.

The trunk, the families and the checkpoint loader know no framework. Two things in them depend on who runs
them, and an edge that is installed (today the OpenMMLab one, :func:`inline_backbones.openmmlab.edge.install`)
lends them through :func:`lend`:

* ``logger()``: where a backbone's messages go (the file a checkpoint came from, an adapted first conv). By default
  the ``inline_backbones`` Python logger; under OpenMMLab, mmengine's current logger (a Runner's log).
* ``initialize(module, init_cfg)``: an ``init_cfg`` other than ``Pretrained`` (``Kaiming``, ``TruncNormal`` ...), which
  are mmengine's initializers. Without an edge it is an :class:`OpenMMLabNotInstalled` error.

:func:`require_openmmlab` is the one check an OpenMMLab class, tool or function runs at use (never at
``import inline_backbones``): installed means mmengine is importable (``importlib.util.find_spec``, which imports
nothing).
"""
import importlib.util
import logging

# The modules of an OpenMMLab line (both lines install these names).
OPENMMLAB_MODULES = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mim')
EXTRAS_HINT = ("pip install -e '.[official]' (mmengine, mmcv, mmdet, mmsegmentation) or -e '.[onedl]' (the "
               "maintained fork, onedl-*) in a clone of the repository; `make setup` (STACK=official|onedl) builds "
               "mmcv's ops too (docs/installation.md)")


class OpenMMLabNotInstalled(ModuleNotFoundError):
    """An OpenMMLab class, tool or option used where no OpenMMLab line is installed."""


def openmmlab_installed():
    """Whether an OpenMMLab line's mmengine can be imported (checked without importing it)."""
    return importlib.util.find_spec('mmengine') is not None


def require_openmmlab(what):
    """Raise :class:`OpenMMLabNotInstalled` naming ``what`` and the two extras, unless a line is installed."""
    if not openmmlab_installed():
        raise OpenMMLabNotInstalled(f'{what} needs an OpenMMLab line, and none is installed: {EXTRAS_HINT}',
                                    name='mmengine')


def _python_logger():
    return logging.getLogger('inline_backbones')


def _no_initializer(module, init_cfg):
    require_openmmlab(f"init_cfg {init_cfg!r} of {type(module).__name__} (mmengine's initializers)")
    raise RuntimeError(f'init_cfg {init_cfg!r}: OpenMMLab is installed, but `import inline_backbones` did not '
                       'install its edge; import inline_backbones.openmmlab.edge and call install()')


_lent = {'logger': _python_logger, 'initialize': _no_initializer}


def lend(*, logger, initialize):
    """Install an edge's logger source and initializer (see the module docstring)."""
    _lent.update(logger=logger, initialize=initialize)


def logger():
    """The logger a backbone's messages go to."""
    return _lent['logger']()


def initialize(module, init_cfg):
    """Apply an ``init_cfg`` that is not ``Pretrained`` to ``module``."""
    return _lent['initialize'](module, init_cfg)
