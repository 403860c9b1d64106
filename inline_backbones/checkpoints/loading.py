"""Safe, strict loading of checkpoints for every model family (released files, mmengine Runner checkpoints,
bare state dicts, URLs); nothing here knows a family's keys.

Loading is one pipeline, :func:`load_pretrained`: :func:`load_checkpoint_file` (safe unpickling, download) ->
:func:`extract_state_dict` (unwrap ``model`` / ``state_dict`` / ``module.``, select ``prefix``) -> the family's key
filter (:func:`filter_state_dict`) -> :func:`check_state_dict` (every missing, unexpected and mis-shaped key is an
error naming them). A family filter is a function ``filter_fn(state_dict, model) -> state_dict``, timm's
``checkpoint_filter_fn`` pattern; it lives beside the family's model
(``inline_backbones/models/families/<family>_checkpoint.py``, whose docstring lists the key formats it accepts) and is
found as the model's ``checkpoint_filter`` attribute. It converts the formats it knows into the model's keys, drops
what the model rebuilds or does not have on purpose, and says which of the model's keys the file need not hold by
returning a :class:`FilteredStateDict`.

Everything goes through ``torch.load(..., weights_only=True)``; nothing turns the protection off.

* Released ImageNet checkpoints are ``{'model': state_dict, 'optimizer', 'lr_scheduler', 'max_accuracy',
  'epoch', 'config'}`` with ``config`` a yacs ``CfgNode``. Unpickling it under ``weights_only`` would need
  yacs and an allow-list entry for its class; instead, only while such a file is read, the name
  ``yacs.config.CfgNode`` is allow-listed as :class:`ReleasedConfig`, which builds an ``OrderedDict``
  (a CfgNode is a dict of plain values), so yacs need not be installed and no code from the file runs.
* mmengine's Runner saves ``HistoryBuffer`` objects and numpy arrays/scalars in ``message_hub``; mmengine
  0.10.7 calls ``torch.load`` without ``weights_only``, which torch >= 2.6 treats as ``True``, so
  ``load_from``, ``--resume`` and testing fail.
  :func:`inline_backbones.openmmlab.checkpoints.allow_mmengine_checkpoints` allow-lists exactly those classes (the
  OpenMMLab edge calls it when the package is imported with a line installed, i.e. through ``custom_imports``).
* A checkpoint given as a URL (``http(s)://``, ``file://``), as mmengine's ``Pretrained`` accepts, is
  downloaded once into torch's hub cache (``$TORCH_HOME/hub/checkpoints/<name>-<URL hash>.pth``, where timm
  and torchvision keep theirs), kept only if it loads as a checkpoint, and then loaded like a local file.
* No error message suggests ``weights_only=False``: torch's advice to do so is stripped from its errors.
"""
import hashlib
import logging
import os
import os.path as osp
import re
import shutil
import urllib.error
import urllib.request
import uuid
from collections import OrderedDict

import torch

from .. import frameworks
from .archive import check_not_truncated

_logger = logging.getLogger(__name__)


class CheckpointMismatchError(RuntimeError):
    """A checkpoint whose keys or shapes do not fit the model (the message lists them)."""


class ReleasedConfig:
    """Stand-in for the yacs ``CfgNode`` of released checkpoints: unpickles as an ``OrderedDict``.

    torch's safe unpickler only fills plain dicts and OrderedDicts and sets attributes on OrderedDicts,
    so ``__new__`` returns one; the CfgNode's flags (``__immutable__`` ...) end up as its attributes.
    """

    def __new__(cls, *args, **kwargs):
        return OrderedDict()


URL_SCHEMES = ('http://', 'https://', 'file://')


class CheckpointDownloadError(RuntimeError):
    """A download that is not the checkpoint (truncated, an HTML page, wrong sha256 ...); it was not kept."""


class CheckpointUnreachableError(ConnectionError):
    """A checkpoint URL that cannot be downloaded (a wrong link, refused access, a failing server, a stall, no
    network): the message says which, and where a copy fetched by hand is picked up."""


class CheckpointLoadError(RuntimeError):
    """A checkpoint file that does not unpickle safely (damaged, unsafe, or not a checkpoint): the message names the
    file and why."""


# torch's weights_only errors open with advice to load with weights_only=False (i.e. to run any code the file
# holds) and end with advice to allow-list whatever global the file asks for: sentences that mention weights_only
# or its override, or open as that advice does, are dropped.
_UNSAFE_ADVICE = re.compile(r'weights_only|TORCH_FORCE', re.I)
_TORCH_BOILERPLATE = ('Weights only load failed', 'This file can still be loaded', 'Do it only', 'Please file an issue',
                      'WeightsUnpickler error:', 'Please use', 'Check the documentation')
_SAFE_ADVICE = ('only tensors, the released checkpoints\' yacs config and the state of mmengine Runner checkpoints '
                'are allowed, so this is not such a checkpoint (a damaged or different file, or not a checkpoint '
                'at all); get the file again from its source rather than loosening the loading')


def _safe_reason(err):
    """What torch's error says went wrong, without its advice to turn ``weights_only`` off or to allow-list
    globals the file asks for."""
    sentences = (s.strip() for s in re.split(r'\n|(?<=[.:])\s', str(err)))
    kept = [s for s in sentences if s and not _UNSAFE_ADVICE.search(s) and not s.startswith(_TORCH_BOILERPLATE)]
    return ' '.join(kept) or type(err).__name__


def cache_path(url):
    """Where :func:`download_checkpoint` keeps ``url``: ``<torch hub dir>/checkpoints/<name>-<hash>.pth``.

    ``<name>`` is the URL's last non-empty path component without its extension (the share id of a released
    link ``.../f/<id>/?dl=1``, ``model`` for ``.../model.pth``), ``<hash>`` the first 12 hex digits of the
    SHA-256 of the whole URL, so links that end alike (``.../a/model.pth``, ``.../b/model.pth``) never share
    a file.
    """
    from urllib.parse import unquote, urlparse

    parts = [p for p in unquote(urlparse(url).path).split('/') if p]
    name = re.sub(r'[^A-Za-z0-9_.-]+', '_', osp.splitext(parts[-1])[0]) if parts else ''
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return osp.join(torch.hub.get_dir(), 'checkpoints', f'{name or "checkpoint"}-{digest}.pth')


# Seconds a download may go without data (connecting, and between reads) before it stops with an error:
# a firewall that drops packets would otherwise hang the first training step without a word.
DOWNLOAD_TIMEOUT = float(os.environ.get('INLINE_DOWNLOAD_TIMEOUT', 60))
CONFIG_HINT = '--cfg-options model.backbone.init_cfg.checkpoint=PATH'


def _fetch(url, dest):
    """``url`` into the file ``dest``, with :data:`DOWNLOAD_TIMEOUT` on the connection and on every read."""
    request = urllib.request.Request(url, headers={'User-Agent': 'inline_backbones'})
    with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response, open(dest, 'wb') as f:
        shutil.copyfileobj(response, f, 1 << 20)


def _download_error(url, err, local, hint):
    """A :class:`CheckpointUnreachableError` saying what went wrong (a wrong link, refused access, a failing server, a
    stall, no network) and where a copy fetched by hand is picked up."""
    by_hand = f'fetch the file elsewhere and either put it at {local!r} or use its local path ({hint})'
    if isinstance(err, urllib.error.HTTPError):
        code = err.code
        what = ('the link is wrong or the file was removed: check the URL' if code in (404, 410) else
                'access is refused: the link may be private or expired' if code in (401, 403) else
                'the server failed: try again later' if code >= 500 else 'the server refused the request')
        return CheckpointUnreachableError(f'cannot download checkpoint {url!r}: the server answered HTTP {code} '
                                          f'{err.reason}; {what}, or {by_hand}')
    reason = getattr(err, 'reason', err)
    if isinstance(reason, TimeoutError) or isinstance(err, TimeoutError):
        return CheckpointUnreachableError(
            f'cannot download checkpoint {url!r}: no data for {DOWNLOAD_TIMEOUT:g} s (a firewall or proxy that drops '
            f'the connection?); nothing was cached. Retry, allow more time with INLINE_DOWNLOAD_TIMEOUT=SECONDS, or '
            f'{by_hand}')
    return CheckpointUnreachableError(f'cannot download checkpoint {url!r}: {reason}. Without network access, '
                                      f'{by_hand}')


def download_checkpoint(url, sha256=None, hint=CONFIG_HINT):
    """The local copy of checkpoint ``url`` in torch's hub cache (:func:`cache_path`), downloaded if absent.

    A download goes to a temporary file next to the cache entry and is moved into place only once it
    unpickles with ``weights_only=True`` into a checkpoint holding a model state dict (and, if ``sha256``
    is given, has that SHA-256); otherwise it is deleted and :class:`CheckpointDownloadError` gives its
    size and, if it looks like HTML, its first bytes. ``sha256`` is checked on download only: a file
    already in the cache (downloaded earlier or put there by hand) is used as it is.

    Under a distributed launch the first process of each node downloads while the others wait at a
    barrier, then they read the cached file. A wrong link (HTTP 404), refused access (401/403), a failing
    server (5xx), a stall longer than :data:`DOWNLOAD_TIMEOUT` and no network each raise a
    :class:`CheckpointUnreachableError` (a ``ConnectionError``) that says which, naming the URL and the cache path
    where a copy fetched by hand is picked up; ``hint`` says how to give a local path instead (a config option by
    default).
    """
    _check_digest(sha256, url)
    local = cache_path(url)
    if _local_rank() == 0 and not osp.isfile(local):
        os.makedirs(osp.dirname(local), exist_ok=True)
        partial = f'{local}.{uuid.uuid4().hex}.partial'
        try:
            try:
                _fetch(url, partial)
            except OSError as err:  # URLError, HTTPError, refused connections, timeouts are OSErrors
                raise _download_error(url, err, local, hint) from None
            _check_download(url, partial, local, sha256)
            os.replace(partial, local)
        finally:
            if osp.exists(partial):
                os.remove(partial)
    if _distributed():
        torch.distributed.barrier()
    if not osp.isfile(local):
        raise CheckpointUnreachableError(f'checkpoint {url!r} was not downloaded to {local!r} on this node')
    return local


def _distributed():
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _local_rank():
    """This process's rank on its node: 0 outside a distributed run; else what the launcher says (torchrun's
    ``LOCAL_RANK``, Open MPI's ``OMPI_COMM_WORLD_LOCAL_RANK``, Slurm's ``SLURM_LOCALID``), else the global rank (a
    single node)."""
    if not _distributed():
        return 0
    for variable in ('LOCAL_RANK', 'OMPI_COMM_WORLD_LOCAL_RANK', 'SLURM_LOCALID'):   # torchrun, Open MPI, Slurm
        if variable in os.environ:
            return int(os.environ[variable])
    return torch.distributed.get_rank()


def _check_digest(sha256, source):
    if sha256 is not None and not re.fullmatch(r'[0-9a-fA-F]{64}', str(sha256)):
        raise ValueError(f'sha256 {sha256!r} of checkpoint {source!r} is not a SHA-256 digest (64 hex digits)')


def _sha256_of(path):
    sha = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            sha.update(chunk)
    return sha.hexdigest()


def _download_problem(path, sha256):
    """Why the file at ``path`` is not the expected checkpoint (wrong ``sha256``, does not unpickle safely, holds
    no model state dict), or None."""
    if sha256 is not None:
        digest = _sha256_of(path)
        if digest != sha256.lower():
            return f'its sha256 is {digest}, the config expects {sha256.lower()}'
    try:
        if not extract_state_dict(_torch_load(path)):
            return 'it holds an empty state dict'
    except (RuntimeError, TypeError, KeyError) as err:
        return str(err)
    return None


def _check_download(url, path, local, sha256):
    """Raise :class:`CheckpointDownloadError` (size, first bytes of HTML) if :func:`_download_problem` finds one."""
    problem = _download_problem(path, sha256)
    if problem is None:
        return
    with open(path, 'rb') as f:
        head = f.read(512)
    html = head.lstrip().lower().startswith(b'<!doctype') or b'<html' in head.lower()
    shown = f', looks like HTML: {head[:200].decode("utf-8", "replace")!r}' if html else ''
    raise CheckpointDownloadError(
        f'the download of checkpoint {url!r} ({osp.getsize(path)} bytes{shown}) is not the checkpoint: {problem}. '
        f'It was deleted, nothing was cached. Check the link (a cloud share link needs its ?dl=1 to give the '
        f'file rather than a web page) or fetch the file by hand and put it at {local!r}')


def _torch_load(path, map_location='cpu'):
    """``torch.load(path, weights_only=True)`` with the released checkpoints' yacs config allowed; errors name
    the file and never suggest turning the protection off (torch's own error is not chained: it does). A file cut
    off part-way is a :class:`~inline_backbones.checkpoints.archive.CheckpointTruncatedError` saying so (its size,
    the entry that runs past its end), checked before unpickling."""
    check_not_truncated(path)
    with torch.serialization.safe_globals([(ReleasedConfig, 'yacs.config.CfgNode')]):
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except Exception as err:  # noqa: BLE001 - re-raised with the file named
            if 'mmengine.' in str(err) and not frameworks.openmmlab_installed():
                frameworks.require_openmmlab(f'checkpoint {path!r} (an mmengine Runner checkpoint: its message_hub '
                                             "holds mmengine's objects; or save its state_dict alone)")
            raise CheckpointLoadError(f'cannot load checkpoint {path!r} safely (weights_only=True): '
                                      f'{type(err).__name__}: {_safe_reason(err)} ({_SAFE_ADVICE})') from None


def load_checkpoint_file(path, sha256=None):
    """Load a checkpoint file or URL safely (``weights_only=True``); clear errors for a missing/bad file.

    A URL is downloaded first (:func:`download_checkpoint`, which checks ``sha256`` if given).
    """
    return _torch_load(local_checkpoint(path, sha256))


def local_checkpoint(path, sha256=None):
    """The local file of checkpoint ``path`` (a URL downloaded first, see :func:`load_checkpoint_file`), checked to
    exist and, where ``sha256`` is given, to have that digest."""
    path = str(path)
    is_url = path.startswith(URL_SCHEMES)
    if is_url:
        path = download_checkpoint(path, sha256)
    path = osp.expanduser(path)
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint file not found: {path!r} (give the path of a downloaded checkpoint, '
                                'or its URL: docs/models.md lists the released files and their links)')
    if sha256 is not None and not is_url:   # a local file is checked too (a download was checked on arrival)
        _check_digest(sha256, path)
        digest = _sha256_of(path)
        if digest != sha256.lower():
            raise ValueError(f'checkpoint {path!r} has sha256 {digest}, the config expects {sha256.lower()}: a '
                             'different or damaged file')
    return path


def extract_state_dict(checkpoint, prefix=None):
    """The model state dict of a released (``model``), mmengine (``state_dict``) or bare checkpoint.

    ``prefix`` (e.g. ``'backbone.'`` for a detector or segmentor checkpoint) selects and strips keys.
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f'checkpoint is a {type(checkpoint).__name__}, expected a dict')
    for key in ('model', 'state_dict'):
        if key in checkpoint and isinstance(checkpoint[key], dict):
            checkpoint = checkpoint[key]
            break
    state_dict = {k[len('module.'):] if k.startswith('module.') else k: v for k, v in checkpoint.items()}
    if prefix:
        state_dict = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
        if not state_dict:
            raise KeyError(f'no key of the checkpoint starts with prefix {prefix!r}')
    non_tensor = [k for k, v in state_dict.items() if not isinstance(v, torch.Tensor)]
    if non_tensor:
        raise TypeError(f'checkpoint entries are not tensors: {non_tensor[:10]}; is this a model state dict?')
    return state_dict


class FilteredStateDict(dict):
    """A family filter's result: the state dict in the model's own keys, plus what the strict check needs
    to know from the family.

    Args:
        state_dict (dict): ``{key: tensor}`` in the model's keys.
        optional_prefixes (tuple[str]): prefixes of the model's keys that the file need not hold (they keep
            the model's own initialisation, e.g. a backbone's output norms or a classifier's new head).
        hint (str, optional): what to check when the file does not fit (shown in the mismatch error).
    """

    def __init__(self, state_dict, optional_prefixes=(), hint=None):
        super().__init__(state_dict)
        self.optional_prefixes = tuple(optional_prefixes)
        self.hint = hint


def fit_head(state_dict, model_state):
    """The file's classifier ``head.*`` as the model takes it: dropped when the model has no head (a backbone,
    or a classifier with ``num_classes=0``), dropped and declared optional when its class count differs from
    the model's (the model keeps its new head). Returns the state dict and the optional key prefixes."""
    head = state_dict.get('head.weight')
    if head is None:
        return state_dict, ()
    without_head = {k: v for k, v in state_dict.items() if not k.startswith('head.')}
    if 'head.weight' not in model_state:
        return without_head, ()
    if head.dim() == 2 and head.shape[0] != model_state['head.weight'].shape[0]:
        _logger.info('checkpoint head has %d classes, the model %d: the head is not loaded',
                     head.shape[0], model_state['head.weight'].shape[0])
        return without_head, ('head.',)
    return state_dict, ()


def keys_line(title, keys, limit=20):
    """``'  title (N): k1, k2, ...'``, at most ``limit`` keys (then ``' ...'``): one line of a mismatch message."""
    return f'  {title} ({len(keys)}): ' + ', '.join(keys[:limit]) + (' ...' if len(keys) > limit else '')


PREFIX_HINT = "; a detector's or segmentor's checkpoint needs prefix='backbone.' (init_cfg prefix)"


def prefix_hint(keys):
    """:data:`PREFIX_HINT` where ``keys`` are a detector's or segmentor's (``backbone.*``), else ``''``."""
    return PREFIX_HINT if any(k.startswith('backbone.') for k in keys) else ''


def released_or_ours(keys, released, ours, family, formats):
    """Check that a file's ``keys`` are in one format: the authors' released one (``released``: those of its keys in
    it) or ours (``ours``); otherwise :class:`CheckpointMismatchError` listing them, naming ``family`` and the two
    formats' key patterns (``formats``)."""
    if released and ours:
        raise CheckpointMismatchError(f'its keys mix the released {family} format and ours:\n' + keys_line(
            'released-format keys', released) + '\n' + keys_line('our keys', ours))
    if not released and not ours:
        raise CheckpointMismatchError(f'its keys are in no {family} checkpoint format ({formats}){prefix_hint(keys)}:\n'
                                      + keys_line('unexpected in checkpoint', keys))


def check_state_dict(model, state_dict, source, optional_prefixes=(), hint=None):
    """Raise :class:`CheckpointMismatchError` naming every key of ``model`` missing from ``state_dict``
    (except those starting with ``optional_prefixes``), every unexpected key and every shape mismatch.
    ``hint`` (e.g. which settings to check) is shown after the model's name."""
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict and not k.startswith(tuple(optional_prefixes))]
    unexpected = [k for k in state_dict if k not in own]
    mismatched = [f'{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(own[k].shape)}'
                  for k in state_dict if k in own and state_dict[k].shape != own[k].shape]
    if missing or unexpected or mismatched:
        lines = [f'checkpoint {str(source)!r} does not fit {type(model).__name__}'
                 + (f' ({hint})' if hint else '') + ':']
        for title, keys in (('missing in checkpoint', missing), ('unexpected in checkpoint', unexpected),
                            ('shape mismatch', mismatched)):
            if keys:
                lines.append(keys_line(title, keys))
        raise CheckpointMismatchError('\n'.join(lines))


def _identity_filter(state_dict, model):
    return state_dict


def filter_state_dict(model, state_dict, source='state dict', filter_fn=None):
    """``state_dict`` (already extracted) through the family filter, checked strictly against ``model``.

    ``filter_fn(state_dict, model)`` defaults to the model's ``checkpoint_filter`` (if it has one), else the
    identity. Its result may be a :class:`FilteredStateDict` (optional key prefixes, hint); a
    :class:`CheckpointMismatchError` it raises (e.g. keys in no format it knows) gets ``source`` and the
    model named. Returns the plain state dict to load (``load_state_dict(..., strict=False)``: what may be
    missing was decided by the filter and checked here).
    """
    if filter_fn is None:
        filter_fn = getattr(model, 'checkpoint_filter', None) or _identity_filter
    try:
        filtered = filter_fn(dict(state_dict), model)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(
            f'checkpoint {str(source)!r} does not fit {type(model).__name__}: {err}') from None
    check_state_dict(model, filtered, source, getattr(filtered, 'optional_prefixes', ()),
                     getattr(filtered, 'hint', None))
    return dict(filtered)


def load_pretrained(model, path, prefix=None, sha256=None, filter_fn=None, logger=_logger):
    """Load ``path`` into ``model`` strictly: the file is read safely (:func:`load_checkpoint_file`; a URL is
    downloaded once and checked against ``sha256`` if given), its state dict extracted (``prefix``, e.g.
    ``'backbone.'``, selects and strips keys), passed through the family filter ``filter_fn`` (default: the
    model's ``checkpoint_filter``, else none) and checked: every parameter of the model that the filter does
    not declare optional must come from the file, with the right shape, and the file must hold nothing else.
    ``logger`` (``info``; a Runner's ``MMLogger`` writes it into the training log) gets one line naming the file,
    its URL if downloaded, and the first 12 hex digits of its SHA-256.

    Raises :class:`CheckpointMismatchError` naming the offending keys; returns the keys loaded.
    """
    local = local_checkpoint(path, sha256)
    state_dict = extract_state_dict(_torch_load(local), prefix)
    state_dict = filter_state_dict(model, state_dict, path, filter_fn)
    model.load_state_dict(state_dict, strict=False)
    downloaded = str(path).startswith(URL_SCHEMES)
    origin = f' (downloaded from {str(path)!r})' if downloaded else ''
    # a local file given with sha256 was just checked against it; a cached download is used as it is: hash it
    digest = sha256.lower() if sha256 is not None and not downloaded else _sha256_of(local)
    logger.info(f'{type(model).__name__}: {len(state_dict)} tensors loaded from {local!r}{origin}, sha256 '
                f'{digest[:12]}' + (f', keys under {prefix!r}' if prefix else ''))
    return sorted(state_dict)

