"""tools/analysis_tools/training_cost.py on synthetic records: iterations read from the configs, measured / twin /
derived rows, GPU-hours and 8-GPU wall time, the reference columns, and the refusal of scaled-down CPU records."""
import json
import os.path as osp

import pytest
from tool_modules import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
training_cost = load_tool('tools/analysis_tools/training_cost.py')

MASK_T1 = 'mmdet_configs/mask-rcnn_inline-swin-t_fpn_ms-crop-1x_coco.py'
MASK_S1 = 'mmdet_configs/mask-rcnn_inline-swin-s_fpn_ms-crop-1x_coco.py'
UPER_T = 'mmseg_configs/inline-swin-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py'


def _record(tmp_path, name, config, s_iter=None, amp='fp16', padding_aware=True, kind=None, step=None, scale_down=1.0):
    rec = dict(config=config, amp=amp, padding_aware=padding_aware, measured_at='2026-12-05 10:00:00',
               device_name='NVIDIA H200', peak_memory_mb=12000.0, scale_down=scale_down,
               versions=dict(torch='2.11.0+cu130', cuda='13.0', mmcv='2.1.0', mmcv_ops='cuda 13.0',
                             mmengine='0.10.7', mmdet='3.3.0', mmseg='1.2.2'))
    if kind:
        rec.update(kind=kind, median_step_s=step)
    else:
        rec['median_s_per_iter'] = s_iter
    path = tmp_path / f'{name}.json'
    path.write_text(json.dumps(rec))
    return str(path)


def test_schedules_come_from_the_configs():
    cfg = training_cost.load_config(MASK_T1)
    assert training_cost.schedule(cfg) == (12 * 7330, 16, '12 epochs x 7330')      # ceil(117266 / 16) = 7330
    assert training_cost.schedule(training_cost.load_config(UPER_T)) == (160000, 16, '160000 iterations')


@pytest.mark.slow
def test_measured_twin_derived_and_reference_rows(tmp_path):
    paths = [
        _record(tmp_path, 't1', MASK_T1, 0.5),
        _record(tmp_path, 't1_off', MASK_T1, 0.4, padding_aware=False),            # not the config's mode
        _record(tmp_path, 't1_bf16', MASK_T1, 0.3, amp='bf16'),                   # not the chosen precision
        _record(tmp_path, 'bb_t', MASK_T1, kind='backbone', step=0.1),
        _record(tmp_path, 'bb_s', MASK_S1, kind='backbone', step=0.25),
        _record(tmp_path, 'swin', training_cost.SWIN_MASK_REF, 0.45, padding_aware=None),
        _record(tmp_path, 'uper', UPER_T, 0.2),
    ]
    rows = {(r['config']): r for r in training_cost.build_table(
        paths, 'fp16', 'config', only=r'mask-rcnn_inline-swin-[ts]_.*ms-crop-[13]x|tiny.*upernet')}
    t1 = rows[MASK_T1]
    assert t1['source'] == 'measured' and t1['s_per_iter'] == 0.5 and t1['iterations'] == 87960
    assert t1['gpu_hours'] == pytest.approx(87960 * 8 * 0.5 / 3600)
    assert t1['wall_hours_8'] == pytest.approx(87960 * 0.5 / 3600)
    assert t1['ref_s_per_iter'] == 0.45 and t1['ref_gpu_hours'] == pytest.approx(87960 * 8 * 0.45 / 3600)
    t3 = rows[MASK_T1.replace('1x', '3x')]
    assert t3['source'] == 'measured (1x twin)' and t3['iterations'] == 3 * 87960 and t3['s_per_iter'] == 0.5
    s1 = rows[MASK_S1]
    assert s1['source'] == 'derived (T + backbone S - T)' and s1['s_per_iter'] == pytest.approx(0.5 + 0.15)
    assert s1['ref_s_per_iter'] is None                                       # Swin-T beside T rows only
    s3 = rows[MASK_S1.replace('1x', '3x')]
    assert s3['source'] == 'derived (T + backbone S - T)'
    uper = rows[UPER_T]
    assert uper['iterations'] == 160000 and uper['gpu_hours'] == pytest.approx(160000 * 8 * 0.2 / 3600)
    assert uper['ref_s_per_iter'] is None                                     # no Swin-T UperNet record given

    off = {r['config']: r for r in training_cost.build_table(paths, 'fp16', 'off', only='swin-t_.*1x')}
    assert off[MASK_T1]['s_per_iter'] == 0.4 and off[MASK_T1]['padding_aware'] is False

    text = training_cost.markdown(list(rows.values()), paths, 'fp16')
    assert 'device: NVIDIA H200; torch 2.11.0+cu130, CUDA 13.0, mmcv 2.1.0 (ops: cuda 13.0)' in text
    assert '| Mask R-CNN + InLine-Swin | T | 1x | 87,960 (12 epochs x 7330) | 0.500 | measured | 98 | 12.2 h |' in text
    assert '| Swin-T: 0.450 | 88 |' in text


def test_scaled_down_records_are_refused(tmp_path):
    path = _record(tmp_path, 'cpu', MASK_T1, 10.0, scale_down=8.0)
    with pytest.raises(SystemExit, match='--scale-down 8.0'):
        training_cost.build_table([path], only='swin-t_.*1x')


def test_main_writes_markdown_and_json(tmp_path):
    path = _record(tmp_path, 'uper', UPER_T, 0.2)
    rows = training_cost.main([path, '--only', 'tiny.*upernet', '--out', str(tmp_path / 't.md'),
                               '--json', str(tmp_path / 't.json')])
    assert json.loads((tmp_path / 't.json').read_text()) == rows
    assert '| UperNet + InLine-Swin | T | 160k | 160,000 (160000 iterations) | 0.200 | measured | 71 | 8.9 h |' in \
        (tmp_path / 't.md').read_text()
