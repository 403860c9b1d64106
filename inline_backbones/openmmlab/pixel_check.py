"""A batch that leaves the data preprocessor still in 0-255 pixel values: the released models were trained on
``(pixel - mean) / std`` with ImageNet's mean and std, where every value lies within about +-2.7
(``(0 - 123.675) / 58.395 = -2.12``, ``(255 - 103.53) / 57.375 = 2.64``). The backbone's forward cannot look
at the values without waiting for the device; a data preprocessor, which works on the host's batch anyway, can.
"""
import logging

from ..models.stages import IMAGENET_MEAN, IMAGENET_STD

# Normalised ImageNet pixels stay within +-2.7; a batch whose largest magnitude passes this was not normalised
# (0-255 values, or a std of 1). Values in [0, 1] without normalisation cannot be told apart this way.
RAW_PIXEL_LIMIT = 10.0


def raw_pixel_message(inputs, where):
    """The warning for a normalised batch ``inputs`` whose largest magnitude exceeds :data:`RAW_PIXEL_LIMIT`,
    else None."""
    peak = float(inputs.detach().abs().amax()) if inputs.numel() else 0.0
    if peak <= RAW_PIXEL_LIMIT:
        return None
    return (f'{where}: the batch reaches {peak:.0f} after normalisation, as 0-255 pixels do (normalised ImageNet '
            f'pixels stay within about +-2.7). The released models take (pixel - mean) / std with mean '
            f'{IMAGENET_MEAN} and std {IMAGENET_STD}: set mean=, std= (and bgr_to_rgb=True for images read by '
            'OpenCV) in the config\'s data_preprocessor')


class RawPixelCheck:
    """Mixin for a data preprocessor: the first batch it returns is checked (:func:`raw_pixel_message`) and a
    warning goes to the current mmengine logger (a Runner's log) once; later batches are not checked."""

    _raw_pixels_checked = False

    def check_raw_pixels(self, inputs):
        if self._raw_pixels_checked:
            return
        self._raw_pixels_checked = True
        message = raw_pixel_message(inputs, type(self).__name__)
        if message is not None:
            from mmengine.logging import print_log

            print_log(message, logger='current', level=logging.WARNING)
