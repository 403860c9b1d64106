"""Triton kernels of the GPU path, by name. Imported on first use only (:func:`load_kernels`, called through
:func:`~..models.mixers.inline.paths.triton_kernels`), so that the package imports where Triton is not installed
and the interpreter switch (``TRITON_INTERPRET=1``) can be set before the kernels are compiled.

A new kernel: a function in a module of this folder, named in :data:`KERNELS`; the implementations call it as
``triton_kernels().<name>``.
"""
import importlib
import types

# module (in this folder) -> the kernels it provides
KERNELS = {
    'inline_triton': ('kv_statistics', 'finalize', 'depthwise3x3', 'depthwise3x3_weight_grad'),
    'layer_norm_triton': ('layer_norm',),
}


def load_kernels():
    """The kernels of :data:`KERNELS` as attributes of one namespace (ImportError without Triton)."""
    modules = {name: importlib.import_module(f'.{name}', __name__) for name in KERNELS}
    return types.SimpleNamespace(**{kernel: getattr(modules[module], kernel)
                                    for module, kernels in KERNELS.items() for kernel in kernels})
