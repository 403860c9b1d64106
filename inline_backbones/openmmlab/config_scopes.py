"""``mmdet::`` / ``mmseg::`` config names resolved by whichever OpenMMLab line is installed.

mmengine resolves ``_base_ = 'mmseg::swin/...py'`` by a table from scope to distribution name
(``mmengine.config.utils.MODULE2PACKAGE``: ``mmseg -> mmsegmentation``) and refuses the name unless that
distribution, or a module of that name, is installed. The maintained fork installs ``mmseg`` as the distribution
``onedl-mmsegmentation`` and keeps the official table (onedl-mmengine 0.10.12), so every ``mmseg::`` name fails
there with "mmsegmentation is not installed" although mmseg is (``mmdet::`` passes: a module ``mmdet`` exists).

:func:`resolve` points each scope whose distribution is missing at the installed line's distribution that
provides the module (``mmseg -> onedl-mmsegmentation``), and changes nothing where the table already resolves
(the official line). Importing ``inline_backbones`` calls it, so the project's tools resolve both lines; a config
run by another program (``mim train mmseg`` runs mmseg's own ``tools/train.py``, which parses the config before
anything of this package is imported) gets it from its first base, ``mmseg_configs/_base_/openmmlab_scopes.py``.
"""
from importlib import metadata
from importlib.util import find_spec

from .line import LINES

SCOPES = ('mmdet', 'mmseg')


def _installed(name: str) -> bool:
    """mmengine's own test (``mmengine.utils.is_installed``: a distribution, else a module of that name), without
    the official line's version of it, which reloads ``pkg_resources`` (slow) on every call: this runs at import."""
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        spec = find_spec(name) if name.isidentifier() else None
        return spec is not None and spec.origin is not None


def resolve() -> dict[str, str]:
    """Map each of :data:`SCOPES` that mmengine cannot resolve to the installed line's distribution of it.

    Returns the changes, ``{scope: distribution}`` (empty where nothing needed changing).
    """
    from mmengine.config.utils import MODULE2PACKAGE

    changed = {}
    for scope in SCOPES:
        if scope not in MODULE2PACKAGE or _installed(MODULE2PACKAGE[scope]):
            continue
        for line in LINES.values():
            if _installed(line[scope]):
                MODULE2PACKAGE[scope] = changed[scope] = line[scope]
                break
    return changed
