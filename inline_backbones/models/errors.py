"""The error a model raises when its arguments cannot build it."""


class ModelArgumentError(ValueError, TypeError):
    """An argument that cannot build the model (an unknown arch, option or layout letter, an incomplete arch dict, a
    stage index out of range, ...): the message names the argument and what it takes. A ValueError and a TypeError
    both, so that code catching either (the classes Python gives wrong values and wrong keywords) catches it."""
