"""CUDAGraphBackbone (inline_backbones/deployment/cuda_graph.py): what it refuses, with what message. Its replay is
checked against the eager model on a GPU in tests/test_gpu_paths.py."""
import re

import pytest
import torch

from inline_backbones import InLineSwinTransformer
from inline_backbones.deployment.cuda_graph import CUDAGraphBackbone


def test_refusals_name_the_problem_and_the_fix():
    """The model's state first (on any device: a training-mode or padding-aware model is refused before the input
    is looked at), then the example's device; each message whole."""
    model = InLineSwinTransformer(arch=dict(embed_dims=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1]),
                                  attn_type='IIIS')
    x = torch.zeros(1, 3, 64, 64)
    with pytest.raises(ValueError, match=re.escape('CUDAGraphBackbone serves inference: call model.eval() before '
                                                   'capturing it') + '$'):
        CUDAGraphBackbone(model, x)
    model.eval().padding_aware = True
    with pytest.raises(ValueError, match=re.escape(
            "a padding-aware model builds its masks from each batch's image sizes, which a graph captured once cannot "
            'follow: capture the model with padding_aware=False (each image alone, or a batch of images of the '
            "example's size)") + '$'):
        CUDAGraphBackbone(model, x)
    model.padding_aware = False
    for served, example in ((model, x), (model, x.numpy()), (torch.nn.Identity().eval(), x)):   # any nn.Module
        with pytest.raises(ValueError, match=re.escape('CUDAGraphBackbone needs a CUDA example input (CUDA graphs run '
                                                       'on NVIDIA GPUs only); on a CPU call the model itself') + '$'):
            CUDAGraphBackbone(served, example)
