"""One module per model family: its table (:class:`~inline_backbones.models.trunk.Family`), its mmdet/mmseg
backbone and its timm classifiers; beside it, the family's checkpoint key filter and its own layers."""
