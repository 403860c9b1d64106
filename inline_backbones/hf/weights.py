"""The released ImageNet-1k weights into the InLine backbones of a transformers model."""
import timm

from ..checkpoints.loading import load_pretrained
from ..models.classifier import Classifier
from ..models.errors import ModelArgumentError


def inline_backbones_in(model):
    """``{module path: classifier}`` of every timm model of this package inside ``model`` (a transformers model or
    any module): transformers keeps timm's ``features_only`` wrapper, whose ``model`` is our classifier, pruned to the
    stages it returns."""
    return {path: module for path, module in model.named_modules() if isinstance(module, Classifier)}


def load_released_backbone(model, source=None):
    """Load released ImageNet-1k weights into every InLine backbone of ``model``; returns ``{module path: source}``.

    For each backbone the full classifier of its timm name (and input channels) is built and loaded by the package's
    loader (:func:`~inline_backbones.checkpoints.loading.load_pretrained`: a ``weights_only`` read, the family's key
    filter, strict: a file that does not fit raises
    :class:`~inline_backbones.checkpoints.loading.CheckpointMismatchError` listing the keys), then every parameter and
    buffer of the backbone is copied from it, strictly: the backbone holds a subset of the classifier's keys, without
    what timm's ``features_only`` pruned (the head, the final norm, stages after the last one returned).

    Args:
        model (torch.nn.Module): A transformers model (or any module) holding InLine backbones.
        source (str, optional): A released file (or an mmengine / bare state dict file), local or a URL (downloaded
            once into torch's hub cache and checked, as every download of the package). None: the released link of
            each backbone's name (its timm pretrained cfg's ``url``).
    """
    backbones = inline_backbones_in(model)
    if not backbones:
        names = ', '.join(sorted(timm.list_models(['inline_*', 'flatten_*'])))
        raise ModelArgumentError(
            f'{type(model).__name__} holds no InLine backbone: build it with TimmBackboneConfig(backbone=NAME, '
            f'out_indices=[...]) after `import inline_backbones`, NAME one of {names}')
    loaded = {}
    for path, backbone in backbones.items():
        name = (getattr(backbone, 'pretrained_cfg', None) or {}).get('architecture')
        if name is None:
            raise ModelArgumentError(
                f'the InLine backbone at {path!r} was not built by timm (it has no pretrained cfg naming its model): '
                "build it by name, timm.create_model(NAME, ...) or TimmBackboneConfig(backbone=NAME, ...)")
        file = source if source is not None else backbone.pretrained_cfg['url']
        released = timm.create_model(name, in_chans=backbone.in_channels)
        load_pretrained(released, file)
        own = backbone.state_dict()
        backbone.load_state_dict({k: v for k, v in released.state_dict().items() if k in own}, strict=True)
        loaded[path] = file
    return loaded
