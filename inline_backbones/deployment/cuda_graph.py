"""Fixed-size GPU serving: one captured forward, replayed with CUDA graphs.

At batch 1 an eager forward is bound by the host (Python and kernel launches), not by the GPU: on an H200,
InLine-Swin-T at 1120x1120 launches about 600 kernels for a few milliseconds of GPU work. A CUDA graph
replays all of them with one launch. :class:`CUDAGraphBackbone` captures the eager model (so InLine layers
take their Triton GPU path, chosen by :func:`inline_backbones.models.mixers.inline.paths.choose`) for one input
shape, dtype and autocast setting; each call copies the input into the captured buffer and replays. This is the
package's equivalent of ``torch.compile(model, mode='reduce-overhead')`` without compilation (which traces the
generic path and compiles for tens of seconds); both work.

Usage::

    backbone = InLineSwinTransformer('tiny').cuda().eval()
    served = CUDAGraphBackbone(backbone, torch.randn(1, 3, 1120, 1120, device='cuda'), dtype=torch.bfloat16)
    maps = served(image)   # the same shape as the example; the returned tensors are reused by the next call
"""
import torch


class CUDAGraphBackbone:
    """Replays ``model``'s forward on inputs shaped like ``example`` (a CUDA tensor) with a CUDA graph.

    Args:
        model (nn.Module): In eval mode, on the GPU. Padding-aware models are refused: their masks follow
            each batch's image sizes, which a graph captured once cannot.
        example (Tensor): An input of the shape, dtype and device every call will have.
        dtype (torch.dtype, optional): Autocast dtype (``torch.bfloat16`` or ``torch.float16``); None: the
            model's own precision.
        warmup (int): Eager forwards on a side stream before the capture (kernel compilation, cuBLAS
            workspaces). Defaults to 3.
    """

    def __init__(self, model, example, dtype=None, warmup=3):
        if model.training:
            raise ValueError('CUDAGraphBackbone serves inference: call model.eval() before capturing it')
        if getattr(model, 'padding_aware', False):
            raise ValueError('a padding-aware model builds its masks from each batch\'s image sizes, which a graph '
                             'captured once cannot follow: capture the model with padding_aware=False (each image '
                             'alone, or a batch of images of the example\'s size)')
        if not isinstance(example, torch.Tensor) or example.device.type != 'cuda':
            raise ValueError('CUDAGraphBackbone needs a CUDA example input (CUDA graphs run on NVIDIA GPUs only); '
                             'on a CPU call the model itself')
        self.model, self.dtype = model, dtype
        self.static_input = example.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self._forward()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_output = self._forward()

    def _forward(self):
        with torch.no_grad(), torch.autocast('cuda', dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            return self.model(self.static_input)

    def __call__(self, x):
        """The model's output for ``x`` (same shape, dtype and device as the example). The returned tensors
        are the graph's own buffers: the next call overwrites them (clone what you keep)."""
        if x.shape != self.static_input.shape or x.dtype != self.static_input.dtype or x.device != \
                self.static_input.device:
            raise ValueError(f'this graph was captured for inputs of shape {tuple(self.static_input.shape)}, '
                             f'{self.static_input.dtype} on {self.static_input.device}; got {tuple(x.shape)}, '
                             f'{x.dtype} on {x.device}: capture another CUDAGraphBackbone for that shape')
        self.static_input.copy_(x)
        self.graph.replay()
        return self.static_output
