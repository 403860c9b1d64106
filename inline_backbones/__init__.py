"""InLine attention backbones for OpenMMLab 2.0."""
