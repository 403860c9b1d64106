"""One exported file in one runtime on the CPU: onnxruntime or OpenVINO, fp32 or (OpenVINO) bf16.

An int8 file (post-training quantised at export, QDQ form) runs in both runtimes as it is; ``precision`` is the
precision of the float parts. bf16 is OpenVINO's ``INFERENCE_PRECISION_HINT``, offered where the CPU reports
``BF16`` among its optimisation capabilities (AMX or avx512_bf16); OpenVINO's own default on such CPUs is already
bf16, so fp32 is asked for explicitly. onnxruntime's CPU provider has no bf16 execution: asking for it is an error.
Idle threads do not spin (both runtimes), so a runtime timed beside another takes no CPU between its runs.
"""
import os

import numpy as np

from .metadata import openvino_metadata, read_metadata

RUNTIMES = ('onnxruntime', 'openvino')
PRECISIONS = ('fp32', 'bf16')


class RuntimeInputError(ValueError):
    """A user's mistake (a missing file, a runtime or precision this machine cannot give, a wrong image)."""


def cpu_has_bf16():
    """Whether OpenVINO's CPU plugin runs bf16 here (AMX or avx512_bf16)."""
    import openvino as ov

    return 'BF16' in ov.Core().get_property('CPU', 'OPTIMIZATION_CAPABILITIES')


class Backend:
    """``backend(*arrays)``: the file's outputs (numpy arrays, in the file's order) for its inputs in order.

    Args:
        path: an ONNX file written by the whole-model export, or OpenVINO IR (``.xml``) converted from one.
        runtime: ``'onnxruntime'`` or ``'openvino'``.
        precision: ``'fp32'`` or ``'bf16'`` (OpenVINO on a CPU with bf16).
        threads: intra-op threads (default: the runtime's own choice, one per core).
    """

    def __init__(self, path, runtime='onnxruntime', precision='fp32', threads=None):
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise RuntimeInputError(f'{path}: no such file (export one: tools/deployment/export_onnx.py --whole)')
        if runtime not in RUNTIMES:
            raise RuntimeInputError(f'runtime must be one of {RUNTIMES}, got {runtime!r}')
        if precision not in PRECISIONS:
            raise RuntimeInputError(f'precision must be one of {PRECISIONS}, got {precision!r} (int8 is a file '
                                    'quantised at export: --int8-calibration)')
        self.path, self.runtime, self.precision = path, runtime, precision
        if runtime == 'onnxruntime':
            if precision != 'fp32':
                raise RuntimeInputError("onnxruntime's CPU provider runs fp32 (and int8 files) only: use "
                                        "--runtime openvino for bf16")
            self._load_onnxruntime(threads)
        else:
            self._load_openvino(threads)

    def _load_onnxruntime(self, threads):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        for key in ('session.intra_op.allow_spinning', 'session.inter_op.allow_spinning'):
            options.add_session_config_entry(key, '0')
        self.session = ort.InferenceSession(self.path, options, providers=['CPUExecutionProvider'])
        self.meta = read_metadata(self.path)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def _load_openvino(self, threads):
        import openvino as ov

        if self.precision == 'bf16' and not cpu_has_bf16():
            raise RuntimeInputError('this CPU has no bf16 (OpenVINO reports no BF16 capability: it needs AMX or '
                                    'avx512_bf16): use --precision fp32')
        core = ov.Core()
        model = core.read_model(self.path)
        self.meta = openvino_metadata(model, self.path)
        if self.precision == 'bf16' and self.meta.get('precision') == 'int8':
            raise RuntimeInputError('an int8 file runs in OpenVINO with fp32 for its float parts: OpenVINO 2026.4 '
                                    'finds no CPU kernel for its quantised layers under the bf16 hint (measured): use '
                                    '--precision fp32')
        config = {'INFERENCE_PRECISION_HINT': 'bf16' if self.precision == 'bf16' else 'f32'}
        if threads:
            config['INFERENCE_NUM_THREADS'] = threads
        self.compiled = core.compile_model(model, 'CPU', config)
        self.request = self.compiled.create_infer_request()
        self.input_names = [i.get_any_name() for i in self.compiled.inputs]
        self.output_names = [o.get_any_name() for o in self.compiled.outputs]

    def __call__(self, *arrays):
        if len(arrays) != len(self.input_names):
            raise ValueError(f'{self.path} takes {len(self.input_names)} inputs {self.input_names}, got {len(arrays)}')
        if self.runtime == 'onnxruntime':
            return self.session.run(None, dict(zip(self.input_names, arrays, strict=True)))
        results = self.request.infer(list(arrays))
        return [np.array(results[output]) for output in self.compiled.outputs]
