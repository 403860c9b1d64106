"""Run a trained detector or segmentor of this repo on images and write the visualisations.

    python tools/infer.py CONFIG CHECKPOINT IMAGE [IMAGE ...] [--out-dir outputs/infer] [--device cpu]

Detection configs (mmdet) go through mmdet's ``DetInferencer`` (boxes, masks, labels drawn on the
image, plus the predictions as JSON); segmentation configs (mmseg) through ``MMSegInferencer`` (a
coloured class overlay). The library is chosen from the config's ``default_scope``.
"""
import argparse

import torch
from _task_tools import task_of


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('images', nargs='+', help='image files or a folder')
    parser.add_argument('--out-dir', default='outputs/infer')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--score-thr', type=float, default=0.3, help='detection score threshold')
    args = parser.parse_args()
    inputs = args.images if len(args.images) > 1 else args.images[0]
    if task_of(args.config) == 'mmdet':
        from mmdet.apis import DetInferencer

        inferencer = DetInferencer(model=args.config, weights=args.checkpoint, device=args.device)
        inferencer(inputs, out_dir=args.out_dir, pred_score_thr=args.score_thr, no_save_pred=False)
    else:
        from mmseg.apis import MMSegInferencer

        inferencer = MMSegInferencer(model=args.config, weights=args.checkpoint, device=args.device)
        inferencer(inputs, out_dir=args.out_dir, opacity=0.6)
    print(f'[infer] visualisations written to {args.out_dir}/vis')


if __name__ == '__main__':
    main()
