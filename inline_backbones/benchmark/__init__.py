"""The benchmarks behind ``tools/analysis_tools/benchmark*.py``. Inference (``benchmark.py``): backbones and whole
models timed interleaved, on a CPU or a GPU, and the report of the rows (docs/benchmarks.md).

* :mod:`.names`: the model-name grammar -> models (this package's bare, other libraries' prefixed: ``mmdet:``,
  ``mmseg:``, ``timm:``);
* :mod:`.timing`: how one call is timed (CUDA events on a GPU, the wall clock on a CPU), interleaved rounds, the
  kernel profile;
* :mod:`.memory`: the peak memory of one call (CUDA allocator; CPU: peak RSS in a fresh process);
* :mod:`.options`: the command line; :mod:`.runs`: options -> timed rows;
* :mod:`.report`: ratios, the Markdown report, the files, saved results (the older tools' too); :mod:`.plots`;
* :mod:`.cli`: the command; :mod:`.environment`: the device and versions a record names.

Whole exported models against eager (``benchmark_deployed.py``): :mod:`.deployed`. Training (``benchmark_training.py``,
docs/training_cost.md): :mod:`.training`, a config's iterations through mmengine's Runner, with
:mod:`.training_config` (the measurement's config), :mod:`.training_data` (shapes data in the config's layout) and
:mod:`.training_recorder` (per-iteration times, losses, memory).
"""
