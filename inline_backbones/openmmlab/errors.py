"""The OpenMMLab glue's user errors, importable without OpenMMLab (the tools' shared entry lists them)."""


class ClassMismatchError(ValueError):
    """The classes of a run disagree (the message lists each list, what it has extra and what it misses, and the
    fix)."""


class RecipeError(ValueError):
    """A recipe the tool cannot give an InLine backbone: the message says what and why."""
