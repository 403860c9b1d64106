"""The token map a stage's blocks share: what every token mixer needs besides its tokens.

Every token mixer implements one contract, ``mixer(x, tokens) -> y``, with ``x`` the (B, N, C) tokens
in row-major order of the map (after ``tokens.prefix_tokens`` prefix tokens, such as a class token, where a family
has them) and ``tokens`` a :class:`TokenMap`: the map's ``(H, W)``, each image's
own region in padding-aware mode (or none), and, built on first use from :mod:`.masks` and cached,
the token mask, Swin's seam masks and the window partitions. A stage builds one map per forward and
hands it to all its blocks, so masks and partitions are built once per stage; a block recomputed under
activation checkpointing reads the same cached tensors.
"""
import torch

from .graph_mode import exporting
from .masks import fills_map, graph_shift, region_mask, seam_mask, shift_sizes, stripe_plan, window_plan


class TokenMap:
    """An ``H x W`` token map of a batch of ``batch_size`` images on ``device``.

    ``regions`` (padding-aware mode): a (B, 2) long tensor on the host, each image's own rows x cols of
    the map (its top-left corner); None: every token of every image counts. ``prefix_tokens``: how many tokens
    that are no cell of the map (a class token) come before the map's tokens (0: none; only mixers that say they
    take them read them, and the map's helpers, :func:`~..stages.to_nhwc` and :func:`~..stages.to_nchw`, leave
    them out).
    """

    def __init__(self, hw_shape, batch_size, device, regions=None, prefix_tokens=0):
        self.hw_shape = tuple(hw_shape)
        self.batch_size = batch_size
        self.device = device
        self.regions = regions
        self.prefix_tokens = prefix_tokens
        self._cache = {}

    @classmethod
    def of(cls, x, hw_shape, regions=None):
        """The map of the (B, N, C) tokens ``x`` (batch size and device from ``x``)."""
        return cls(hw_shape, x.shape[0], x.device, regions)

    @property
    def aware(self):
        """Padding-aware: each image's region is known (it may fill the map)."""
        return self.regions is not None

    def _cached(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def token_mask(self):
        """(B, N, 1) bool, True on each image's own tokens; None when every token counts."""
        return self._cached('token_mask', lambda: None if not self.aware or fills_map(self.regions, self.hw_shape)
                            else region_mask(self.regions, self.hw_shape, self.device))

    def mask_outside(self, x):
        """``x`` (B, N, C) with zeros outside each image's region."""
        mask = self.token_mask()
        return x if mask is None else x * mask

    def shift_size(self, window_size, shifted):
        """The shift of a (shifted) window block on this map: the rule of :func:`.masks.shift_sizes`, ``ws // 2``
        when ``min(H, W) > ws``, else 0. An int, except for a shifted block under export
        (:func:`.graph_mode.exporting`): there a 0-d long tensor computed in the graph from the map's sizes, so
        that one exported graph shifts exactly where the rule does at every size its dynamic shapes allow (a
        Python choice on a symbolic size would keep the example's side of ``min(H, W) > ws``)."""
        if not shifted:
            return 0
        if exporting():
            return graph_shift(self.hw_shape, window_size, self.device)
        return shift_sizes(*self.hw_shape, window_size)

    def seam_mask(self, window_size):
        """Swin's seam mask for this map padded to window multiples, rolled by the shift."""
        padded = tuple(s + (-s) % window_size for s in self.hw_shape)
        shift = self.shift_size(window_size, True)
        return self._cached(('seam', window_size),
                            lambda: seam_mask(padded, window_size, shift, device=self.device))

    def window_plan(self, window_size, shifted, clip=True):
        """The :class:`~.masks.WindowPlan` of this map (padding-aware partition when :attr:`aware`)."""
        return self._cached(('windows', window_size, shifted, clip), lambda: window_plan(
            self.hw_shape, self.batch_size, window_size, shifted, self.regions, clip=clip, device=self.device))

    def stripe_plan(self, split_size, axis):
        """The :class:`~.masks.WindowPlan` of CSWin's stripes of this map (:func:`~.masks.stripe_plan`: ``axis`` 0
        vertical, 1 horizontal; padding-aware partition when :attr:`aware`)."""
        return self._cached(('stripes', split_size, axis), lambda: stripe_plan(
            self.hw_shape, self.batch_size, split_size, axis, self.regions, device=self.device))

    def downsampled(self, hw_shape, stride):
        """The map after a stride-``stride`` embedding to ``hw_shape``: each region becomes
        ``ceil(region / stride)``, at most the new map."""
        regions = None
        if self.aware:
            regions = torch.div(self.regions + stride - 1, stride, rounding_mode='floor')
            regions = torch.stack((regions[:, 0].clamp(max=hw_shape[0]), regions[:, 1].clamp(max=hw_shape[1])), 1)
        return TokenMap(hw_shape, self.batch_size, self.device, regions)

    def convolved(self, hw_shape, kernel_size, stride, padding):
        """The map after a ``kernel_size`` convolution of ``stride`` and zero ``padding`` to ``hw_shape``: each region
        becomes the outputs whose window starts inside it, ``floor((r + 2 padding - kernel_size) / stride) + 1``
        (what the image alone gives), at least 1 and at most the new map. For ``kernel_size = stride`` and no
        padding of a map padded to a multiple this is :meth:`downsampled`; CSWin's 7x7 stride-4 stem with padding 2
        gives ``floor((r + 1) / 4)``, its 3x3 stride-2 merging with padding 1 ``ceil(r / 2)``."""
        regions = None
        if self.aware:
            regions = torch.div(self.regions + 2 * padding - kernel_size, stride, rounding_mode='floor') + 1
            regions = torch.stack((regions[:, 0].clamp(1, hw_shape[0]), regions[:, 1].clamp(1, hw_shape[1])), 1)
        return TokenMap(hw_shape, self.batch_size, self.device, regions)

    def __repr__(self):
        prefix = f', prefix_tokens={self.prefix_tokens}' if self.prefix_tokens else ''
        return f'TokenMap(hw_shape={self.hw_shape}, batch_size={self.batch_size}, aware={self.aware}{prefix})'
