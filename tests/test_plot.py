"""Pictures: heatmaps render Chinese with a CJK font; learning curves draw from metrics."""

import json

import numpy as np

from attnmt.plot import attention_heatmap, cjk_font, learning_curve


def test_a_cjk_font_is_installed_for_heatmaps():
    # make install puts fonts-noto-cjk in place; without it Chinese shows as empty boxes.
    assert cjk_font() is not None


def test_heatmap_of_a_chinese_sentence(tmp_path):
    png = tmp_path / "a.png"
    weights = np.full((3, 4), 0.25)
    attention_heatmap(weights, ["我", "很", "好", "。"], ["▁I", "'m", "▁fine"], png, "I'm fine")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_learning_curve_from_metrics(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    records = [
        {"kind": "train", "step": 1, "loss": 5.0},
        {"kind": "validation", "step": 1, "dev_loss": 4.0, "bleu": 1.0},
    ]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    learning_curve(metrics, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0
