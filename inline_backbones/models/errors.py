"""The error a model raises when its arguments cannot build it."""


class ModelArgumentError(ValueError, TypeError):
    """An argument that cannot build the model (an unknown arch, option or layout letter, an incomplete arch dict, a
    stage index out of range, ...): the message names the argument and what it takes. A ValueError and a TypeError
    both, so that code catching either (the classes Python gives wrong values and wrong keywords) catches it."""


def check_heads(embed_dims, num_heads):
    """ModelArgumentError unless ``num_heads`` divides ``embed_dims`` (a token mixer's heads split its channels)."""
    if embed_dims % num_heads:
        raise ModelArgumentError(
            f'embed_dims {embed_dims} is not divisible by num_heads {num_heads}: every stage\'s width must be a '
            "multiple of its head count (a size of your own: arch=dict(embed_dims=..., num_heads=[...], ...))")
