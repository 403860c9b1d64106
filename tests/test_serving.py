"""CUDAGraphBackbone (inline_backbones/serving.py): what it refuses, with what message. Its replay is checked
against the eager model on a GPU in tests/test_gpu_paths.py."""
import pytest
import torch

from inline_backbones import InLineSwinTransformer
from inline_backbones.serving import CUDAGraphBackbone


def test_refuses_a_cpu_input():
    with pytest.raises(ValueError, match='needs a CUDA example input'):
        CUDAGraphBackbone(InLineSwinTransformer('tiny').eval(), torch.zeros(1, 3, 64, 64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_refuses_training_mode_and_padding_aware_models():
    x = torch.zeros(1, 3, 64, 64, device='cuda')
    with pytest.raises(ValueError, match=r'call model.eval\(\)'):
        CUDAGraphBackbone(InLineSwinTransformer('tiny').cuda(), x)
    with pytest.raises(ValueError, match='padding_aware=False'):
        CUDAGraphBackbone(InLineSwinTransformer('tiny', padding_aware=True).cuda().eval(), x)
