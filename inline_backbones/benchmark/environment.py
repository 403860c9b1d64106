"""What a measurement ran on, for every benchmark's record: the device's name (the GPU's, or the CPU's model), the
CPU's instruction-set flags, and the versions of Python, torch, CUDA, cuDNN and the OpenMMLab and timm packages."""
import importlib
import platform
import re

import torch


def _cpuinfo():
    """The text of ``/proc/cpuinfo`` ('' where there is none: not Linux)."""
    try:
        with open('/proc/cpuinfo') as f:
            return f.read()
    except OSError:
        return ''


def cpu_flags():
    """The CPU's instruction-set flags (``/proc/cpuinfo``; empty where there is none)."""
    return set((re.findall(r'^flags\s*:\s*(.*)$', _cpuinfo(), re.M) or [''])[0].split())


def device_name(device):
    """The GPU's name on CUDA, else the CPU's model name (``/proc/cpuinfo``, or what ``platform`` knows)."""
    if device.type == 'cuda':
        return torch.cuda.get_device_name(device)
    return (re.findall(r'^model name\s*:\s*(.*)$', _cpuinfo(), re.M)
            or [platform.processor() or platform.machine() or 'cpu'])[0]


def versions():
    """Python, torch, CUDA and cuDNN, mmengine, mmcv, mmdet, mmseg and timm (None: not installed), what mmcv's ops
    are compiled for (``cuda X``, ``cpu``, ``none``: no compiled ops) and the OpenMMLab line
    (:func:`~inline_backbones.openmmlab.line.check_one_line`)."""
    from ..openmmlab.line import check_one_line

    out = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'timm'):
        try:
            out[name] = importlib.import_module(name).__version__
        except ImportError:
            out[name] = None
    try:
        from mmcv.ops import get_compiling_cuda_version
        cuda_ops = get_compiling_cuda_version()
        out['mmcv_ops'] = 'cpu' if cuda_ops in ('not available', None) else f'cuda {cuda_ops}'
    except (ImportError, OSError):
        out['mmcv_ops'] = 'none'
    out['openmmlab_line'] = check_one_line()
    return out
