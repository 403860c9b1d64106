"""Analyses of InLine-Swin models.

* :mod:`.flops`: FLOP counting with mmengine's analysis (``flop_analyzer``; imported at use: the rest needs no
  OpenMMLab);
* attention analysis (``tools/analysis_tools/analyze_attention.py``): exact rows of ``A`` for sampled queries
  (:mod:`.rows`), their statistics (:mod:`.statistics`: negative weights, locality, injectivity),
  per layer and head (:mod:`.layer`) from hooked inputs (:mod:`.capture`), run over images
  (:mod:`.run`, :mod:`.inputs`) and written as JSON/CSV (:mod:`.report`) and pictures (:mod:`.plots`);
* the side-by-side comparison (``tools/analysis_tools/compare_attention.py``): InLine, FLatten (:mod:`.focused`),
  plain linear and softmax rows (:mod:`.softmax_rows`) at the same positions (:mod:`.compare`), their ranks
  (:mod:`.rank`), over images and sizes (:mod:`.compare_run`), as tables (:mod:`.compare_report`) and figures
  (:mod:`.compare_plots`).
"""
from ..frameworks import openmmlab_installed, require_openmmlab
from .layer import AnalysisSettings, analyze_layer
from .rows import AffineRows, inline_rows, linear_rows

_FLOPS = ('baddbmm_flop_jit', 'flop_analyzer', 'sdpa_flop_jit')


def __getattr__(name):
    """The FLOP counters of :mod:`.flops` (mmengine's analysis), imported at use."""
    if name in _FLOPS:
        require_openmmlab(f'inline_backbones.analysis.{name} (mmengine\'s FlopAnalyzer)')
        from . import flops

        return getattr(flops, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = ['AffineRows', 'AnalysisSettings', 'analyze_layer', 'inline_rows', 'linear_rows']
if openmmlab_installed():
    __all__ += list(_FLOPS)
