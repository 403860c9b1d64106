"""`make mutation` runs the fast tests on a copy whose functions mutmut has wrapped in trampolines; torch.fx traces
through a trampoline into code it cannot trace (timm's notrace registrations name the functions, not the wrappers),
so the fx tests skip there and run everywhere else; so does a torch.compile test whose expected error dynamo
reports differently through the trampolines."""
import pytest

from inline_backbones.models.mixers import fused_linear

UNDER_MUTMUT = any('mutmut' in name for name in vars(fused_linear))
fx_on_unwrapped_code = pytest.mark.skipif(UNDER_MUTMUT, reason='torch.fx cannot trace through mutmut trampolines')
compile_on_unwrapped_code = pytest.mark.skipif(UNDER_MUTMUT, reason='torch.compile traces mutmut trampolines')
