from .shapes import CLASSES, PALETTE, generate_shapes_dataset

__all__ = ['CLASSES', 'PALETTE', 'generate_shapes_dataset']
