"""demo/run_embedded.py reads the per-class results of the demo's evaluations from the logs mmdet and mmseg
write (tables built here with the same libraries they use), so that a class the model did not learn fails the
demo even when the mean looks fine (the 77.9 mIoU run with the triangle at IoU 0)."""
from prettytable import PrettyTable
from terminaltables import AsciiTable
from tool_modules import load_tool

run_embedded = load_tool('demo/run_embedded.py')

CLASSES = ('disc', 'box', 'triangle', 'hexagon')


def det_log(bbox, segm):
    """The end of an mmdet CocoMetric(classwise=True) evaluation: a bbox table, then a segm table."""
    header = ['category', 'mAP', 'mAP_50', 'mAP_75', 'mAP_s', 'mAP_m', 'mAP_l']
    lines = []
    for kind, aps in (('bbox', bbox), ('segm', segm)):
        rows = [header] + [[name, f'{ap}', '0.9', '0.8', 'nan', '0.5', '0.6'] for name, ap in zip(CLASSES, aps,
                                                                                                  strict=True)]
        lines += [f'Evaluating {kind}...', 'INFO - ' + '\n' + AsciiTable(rows).table, f'{kind}_mAP: 0.5']
    return 'Epoch(val) [1]\n' + '\n'.join(lines) + '\ncoco/bbox_mAP: 0.669  coco/segm_mAP: 0.797\n'


def seg_log(ious):
    table = PrettyTable()
    table.add_column('Class', ('background',) + CLASSES)
    table.add_column('IoU', [f'{v:.2f}' for v in ious])
    table.add_column('Acc', ['99.0'] * len(ious))
    return 'per class results:\n\n' + table.get_string() + '\nmIoU: 77.9000\n'


def test_per_class_rows_from_both_logs():
    rows = run_embedded.per_class_results(det_log([0.6, 0.7, 0.5, 0.65], [0.7, 0.8, 0.6, 0.75]),
                                          seg_log([96.7, 98.0, 97.7, 0.0, 97.2]))
    assert [(m, n) for m, n, _, _ in rows[:4]] == [('bbox AP', c) for c in CLASSES]
    assert rows[4][:3] == ('segm AP', 'disc', 0.7) and rows[-2][:3] == ('IoU (%)', 'triangle', 0.0)
    missed = [f'{m} of {n}' for m, n, v, t in rows if not v >= t]
    assert missed == ['IoU (%) of triangle']                 # the lost class fails, the mean alone would not


def test_an_unlearned_detection_class_and_nan_fail():
    rows = run_embedded.per_class_results(det_log([0.6, 0.7, 0.02, 0.65], [0.7, 0.8, 0.6, 'nan']),
                                          seg_log([96.7, 98.0, 97.7, 96.0, 97.2]))
    assert [f'{m} of {n}' for m, n, v, t in rows if not v >= t] == ['bbox AP of triangle', 'segm AP of hexagon']
