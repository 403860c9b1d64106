"""The benchmark behind ``tools/analysis_tools/benchmark.py``: backbones and whole models timed interleaved, on a CPU
or a GPU, and the report of the rows (docs/benchmarks.md).

* :mod:`.names`: the model-name grammar -> models (this package's bare, other libraries' prefixed: ``mmdet:``,
  ``mmseg:``, ``timm:``);
* :mod:`.timing`: how one call is timed (CUDA events on a GPU, the wall clock on a CPU), interleaved rounds, the
  kernel profile;
* :mod:`.memory`: the peak memory of one call (CUDA allocator; CPU: peak RSS in a fresh process);
* :mod:`.options`: the command line; :mod:`.runs`: options -> timed rows;
* :mod:`.report`: ratios, the Markdown report, the files, saved results (the older tools' too); :mod:`.plots`;
* :mod:`.cli`: the command.
"""
