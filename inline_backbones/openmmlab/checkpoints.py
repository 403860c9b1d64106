"""mmengine's checkpoints through the package's safe loader: what mmengine's Runner pickles allow-listed for torch's
``weights_only`` unpickler, and mmengine's local checkpoint reads routed through the same load. The OpenMMLab edge
(:func:`.edge.install`) applies both when ``inline_backbones`` is imported with a line installed."""
import os.path as osp
import pickle

import numpy as np
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner import CheckpointLoader

from ..checkpoints.loading import _torch_load


def _history_buffer_statistic(owner, name):
    """Stands in for ``builtins.getattr`` in checkpoints: mmengine pickles ``HistoryBuffer``'s registered
    statistics methods as ``getattr(HistoryBuffer, 'min')`` etc. Nothing else may be looked up."""
    # An instance registers the default statistics (min, max, current, mean) in the class-level table.
    if owner is HistoryBuffer and name in HistoryBuffer()._statistics_methods:
        return getattr(owner, name)
    raise pickle.UnpicklingError(f'checkpoint asks for getattr({owner!r}, {name!r}); only HistoryBuffer '
                                 f'statistics methods are allowed')


def allow_mmengine_checkpoints():
    """Allow-list exactly the non-tensor objects that mmengine's Runner puts into checkpoints (the OpenMMLab edge does
    it when ``inline_backbones`` is imported with a line installed)."""
    torch.serialization.add_safe_globals([
        HistoryBuffer,
        (_history_buffer_statistic, 'builtins.getattr'),
        np.ndarray,
        np.dtype,
        np._core.multiarray._reconstruct,
        np._core.multiarray.scalar,
        # Unpickling a dtype BUILDs an instance of its class (numpy.dtypes.Float64DType, ...).
        *{type(np.dtype(t)) for t in ('bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16',
                                       'uint32', 'uint64', 'float16', 'float32', 'float64')},
    ])


def route_mmengine_local_loads():
    """mmengine reads local checkpoints (``load_from``, ``--resume``, ``mim test``, ``load_checkpoint``) with a
    bare ``torch.load``, whose error on a damaged or unsafe file advises turning ``weights_only`` off. Register
    the package's loader as mmengine's local-file scheme (:class:`mmengine.runner.CheckpointLoader`), so those
    reads are the same safe load with the package's errors: the file named, no unsafe advice."""
    def load_from_local(filename, map_location):
        filename = osp.expanduser(filename)
        if not osp.isfile(filename):
            raise FileNotFoundError(f'checkpoint file not found: {filename!r}')
        return _torch_load(filename, map_location)

    CheckpointLoader.register_scheme(prefixes='', force=True)(load_from_local)
