"""Triton kernels of the GPU inference path. Imported on first use only (by :mod:`..models.mixers.inline_paths`),
so that the package imports where Triton is not installed and the interpreter switch
(``TRITON_INTERPRET=1``) can be set before the kernels are compiled."""
