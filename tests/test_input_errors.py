"""What a user who passes the wrong tensor sees: one line naming the problem and the fix, for
the backbones and the timm classifiers (one stage loop checks them all)."""
import pytest
import timm
import torch

from inline_backbones import InLinePVT, InLineSwinTransformer

MODELS = {
    'InLineSwinTransformer': lambda: InLineSwinTransformer('tiny'),
    'InLinePVT': lambda: InLinePVT('tiny'),
    'InLineSwinClassifier': lambda: timm.create_model('inline_swin_tiny'),
}


@pytest.mark.parametrize('name', sorted(MODELS))
def test_wrong_tensors_get_errors_that_say_what_to_do(name):
    model = MODELS[name]().eval()
    cases = [
        (torch.randn(3, 64, 64), ValueError, r'takes images as a \(B, C, H, W\) tensor, got a 3-D tensor of shape '
                                             r'\(3, 64, 64\): add the batch dimension with x.unsqueeze\(0\)'),
        (torch.randn(1, 1, 64, 64), ValueError, r'was built for 3-channel images \(in_channels=3\), got 1 channels in '
                                                r'a tensor of shape \(1, 1, 64, 64\) \(repeat a grey image to RGB with '
                                                r'x.expand\(-1, 3, -1, -1\), or build the model with in_channels=1: '
                                                r'the released weights are RGB\)$'),
        # no hint where it would not help
        (torch.randn(1, 3, 1, 64, 64), ValueError, r'takes images as a \(B, C, H, W\) tensor, got a 5-D tensor of '
                                                   r'shape \(1, 3, 1, 64, 64\)$'),
        (torch.randn(1, 2, 64, 64), ValueError, r'was built for 3-channel images \(in_channels=3\), got 2 channels in '
                                                r'a tensor of shape \(1, 2, 64, 64\)$'),
        (torch.zeros(1, 3, 64, 64, dtype=torch.uint8), TypeError, r'takes float images normalised .*mean '
                                                                  r'\(123.675, 116.28, 103.53\).*got torch.uint8: '
                                                                  r'convert with \(x.float\(\) - mean\) / std '
                                                                  r"\(mmdet/mmseg's data preprocessor does this in a "
                                                                  r'config\)$'),
        ([[0.0]], TypeError, r'takes images as a \(B, C, H, W\) float tensor, got list'),
    ]
    with torch.no_grad():
        for x, error, message in cases:
            with pytest.raises(error, match=f'^{name} {message}'):
                model(x)
        assert len(model(torch.randn(1, 3, 64, 64))) >= 1   # the right input runs


def test_a_one_channel_model_takes_one_channel():
    model = InLineSwinTransformer('tiny', in_channels=1).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 1, 64, 64))[0].shape == (1, 96, 16, 16)
        with pytest.raises(ValueError, match=r'built for 1-channel images \(in_channels=1\), got 3 channels in a '
                                             r'tensor of shape \(1, 3, 64, 64\)$'):
            model(torch.randn(1, 3, 64, 64))
