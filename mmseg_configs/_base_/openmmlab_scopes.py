# The first base of the configs here that inherit an `mmseg::` config, so that the name resolves on both OpenMMLab
# lines also where nothing of this package is imported before the config is read (`mim train mmseg ...` runs
# mmseg's own tools/train.py): on the maintained fork mmengine looks `mmseg::` up as the distribution
# `mmsegmentation`, which the fork names `onedl-mmsegmentation` (inline_backbones/openmmlab/config_scopes.py says more).
# It defines no config key; the call form keeps mmengine reading this file as a plain (not lazy-import) config.
__import__('inline_backbones.openmmlab.config_scopes').openmmlab.config_scopes.resolve()
