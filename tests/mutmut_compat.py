"""`make mutation` runs the fast tests on a copy whose functions mutmut has wrapped in trampolines; torch.fx traces
through a trampoline into code it cannot trace (timm's notrace registrations name the functions, not the wrappers),
so the fx tests skip there and run everywhere else; so does a torch.compile test whose expected error dynamo
reports differently through the trampolines."""
import sys

import pytest

import inline_backbones  # noqa: F401  (every module mutmut may mutate but the preprocessors, loaded to look at)

# mutmut's copy: a module of the package holds its trampolines' helpers (whichever files only_mutate names)
UNDER_MUTMUT = any('mutmut' in name for module_name, module in list(sys.modules.items())
                   if module_name.startswith('inline_backbones') for name in vars(module))
fx_on_unwrapped_code = pytest.mark.skipif(UNDER_MUTMUT, reason='torch.fx cannot trace through mutmut trampolines')
compile_on_unwrapped_code = pytest.mark.skipif(UNDER_MUTMUT, reason='torch.compile traces mutmut trampolines')
