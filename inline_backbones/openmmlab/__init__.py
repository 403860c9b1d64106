"""OpenMMLab glue, over mmengine's, mmdet's and mmseg's public APIs: the edge that ``import inline_backbones``
installs where a line is installed (:mod:`.edge`: registration, mmengine's logger and initializers, checkpoints,
config scopes), the region data preprocessors, the class check, the segmentation loss, the pixel check, the task
tools, the `mmdet::` / `mmseg::` scopes and the line in use, and the config writers (upstream recipes, their optimizer
keys, fine-tuning configs, config source). The trunk imports none of it; without a line, none of it is imported."""
