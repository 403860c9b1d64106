"""Top-1 / top-5 of an InLine-Swin or InLine-PVT classifier checkpoint on an ImageFolder-layout validation set.

    python tools/analysis_tools/eval_imagenet.py DATA_DIR --model inline_swin_tiny --checkpoint inline_swin_t.pth
    python tools/analysis_tools/eval_imagenet.py DATA_DIR --model inline_pvt_tiny --checkpoint inline_pvt_t.pth
        [--num-classes N] [--model-args JSON] [--crop-pct F] [--batch-size 64] [--workers 4]
        [--device auto|cpu|cuda] [--bf16] [--out result.json]

``DATA_DIR`` holds one folder of images per class (ImageNet val sorted into its 1000 synset folders,
``n01440764/`` ...). The model is built through timm (``timm.create_model(MODEL, pretrained=True,
pretrained_cfg_overlay=dict(file=CHECKPOINT))``, i.e. the package's safe, strict loader) and the images
go through timm's evaluation transform for the model's ``pretrained_cfg`` (``resolve_data_config`` +
``create_transform``; InLine-Swin: bicubic resize of the short side to 256, centre crop 224; InLine-PVT: bicubic
squash-resize to 256x256, centre crop 224; ImageNet mean/std).

Labels: when the model has 1000 classes and every folder is an ImageNet-1k synset, each folder gets
its synset's ImageNet index (so any subset of the classes is scored correctly); otherwise the folders,
sorted by name (torchvision's ``ImageFolder`` order), are classes 0..K-1 and K must equal the model's
``num_classes``. Prints and writes (``--out``) a JSON result.
"""
import argparse
import json
import sys
import time

import timm
import torch
from timm.data import ImageNetInfo, create_transform, resolve_data_config
from torchvision.datasets import ImageFolder
from tqdm import tqdm

import inline_backbones  # noqa: F401 - registers the inline_swin_* and inline_pvt_* models with timm
from inline_backbones.cli import run_tool


def build_model(name, checkpoint, num_classes=None, model_args=None):
    kwargs = dict(model_args or {})
    if num_classes is not None:
        kwargs['num_classes'] = num_classes
    return timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=str(checkpoint)), **kwargs)


def build_dataset(root, transform, num_classes):
    """torchvision ``ImageFolder`` with targets as model class indices (see the module docstring)."""
    dataset = ImageFolder(root, transform=transform)
    synsets = ImageNetInfo().label_names()
    if num_classes == len(synsets) and set(dataset.classes) <= set(synsets):
        index = {s: i for i, s in enumerate(synsets)}
        dataset.target_transform = [index[c] for c in dataset.classes].__getitem__  # picklable for workers
        label_mode = 'imagenet-synsets'
    elif len(dataset.classes) == num_classes:
        label_mode = 'sorted-folders'
    else:
        raise ValueError(f'{root} has {len(dataset.classes)} class folders and the model {num_classes} classes; '
                         f'folders must be ImageNet-1k synsets (for a 1000-class model) or exactly one per class')
    return dataset, label_mode


def resolve_device(name):
    if name == 'auto':
        return torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    if name.startswith('cuda') and not torch.cuda.is_available():
        raise RuntimeError(f'--device {name} asked for but CUDA is not available')
    return torch.device(name)


@torch.no_grad()
def evaluate(model, loader, device, bf16=False, progress=True):
    """(top-1, top-5, images): fractions of images whose label is the arg-max / among the 5 highest
    logits (top-k with k = min(5, classes))."""
    k = min(5, model.num_classes)
    correct1 = correct5 = seen = 0
    for images, targets in tqdm(loader, desc='eval', unit='batch', disable=not progress, file=sys.stderr):
        images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(images)
        top = logits.float().topk(k, dim=1).indices
        hits = top.eq(targets[:, None])
        correct1 += hits[:, 0].sum().item()
        correct5 += hits.any(dim=1).sum().item()
        seen += targets.numel()
    if not seen:
        raise ValueError('the dataset has no images')
    return correct1 / seen, correct5 / seen, seen


def run(args):
    device = resolve_device(args.device)
    model = build_model(args.model, args.checkpoint, args.num_classes, args.model_args).to(device).eval()
    data_config = resolve_data_config(args={} if args.crop_pct is None else dict(crop_pct=args.crop_pct), model=model)
    dataset, label_mode = build_dataset(args.data, create_transform(**data_config), model.num_classes)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                                         num_workers=args.workers, pin_memory=device.type == 'cuda')
    start = time.perf_counter()
    top1, top5, images = evaluate(model, loader, device, args.bf16, progress=not args.no_progress)
    return dict(model=args.model, checkpoint=str(args.checkpoint), data=str(args.data), images=images,
                classes_in_data=len(dataset.classes), label_mode=label_mode,
                top1=100 * top1, top5=100 * top5, top5_k=min(5, model.num_classes),
                data_config={k: list(v) if isinstance(v, tuple) else v for k, v in data_config.items()},
                device=str(device), dtype='bf16 autocast' if args.bf16 else 'fp32',
                batch_size=args.batch_size, seconds=round(time.perf_counter() - start, 2))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data', help='ImageFolder root: one folder of images per class')
    parser.add_argument('--model', default='inline_swin_tiny',
                        help='timm model name (inline_swin_tiny|small|base, inline_pvt_tiny|small|medium|large)')
    parser.add_argument('--checkpoint', required=True, help='released .pth (or a state-dict file)')
    parser.add_argument('--num-classes', type=int, help="classes of the checkpoint's head (default 1000)")
    parser.add_argument('--model-args', type=json.loads, default={},
                        help='JSON of extra model keyword arguments, e.g. \'{"kernel_func": "relu"}\'')
    parser.add_argument('--crop-pct', type=float,
                        help="centre-crop fraction instead of the model's (0.875: the authors' resize 256 / crop 224)")
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--workers', type=int, default=4)
    parser.add_argument('--device', default='auto', help='auto | cpu | cuda | cuda:N')
    parser.add_argument('--bf16', action='store_true', help='bfloat16 autocast (fp32 otherwise)')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    parser.add_argument('--out', help='also write the JSON result to this file')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text + '\n')
    return result


if __name__ == '__main__':
    run_tool(main, 'eval_imagenet')
