"""Pictures: heatmaps render Chinese with a CJK font; learning curves draw from metrics."""

import json

import numpy as np

from attnmt.plot import (
    attention_figure,
    attention_heatmap,
    cjk_font,
    learning_curve,
    learning_curve_figure,
)
from tests.pictures import heatmap_pixels, pixels, shows_colour

SOURCE = ["我", "很", "好", "。"]
TARGET = ["▁I", "'m", "▁fine"]


def test_a_cjk_font_is_installed_for_heatmaps():
    # make install puts fonts-noto-cjk in place; without it Chinese shows as empty boxes.
    assert cjk_font() is not None


def test_the_heatmap_draws_the_weights_with_the_pieces_on_their_axes():
    weights = np.arange(12, dtype=float).reshape(3, 4) / 12  # 3 target x 4 source pieces
    figure = attention_figure(weights, SOURCE, TARGET, "I'm fine")
    axis = figure.axes[0]
    (image,) = axis.get_images()
    assert np.array_equal(image.get_array(), weights)  # rows: target, columns: source
    assert [t.get_text() for t in axis.get_xticklabels()] == SOURCE
    assert [t.get_text() for t in axis.get_yticklabels()] == TARGET
    assert (axis.get_xlabel(), axis.get_ylabel(), axis.get_title()) == (
        "source",
        "target",
        "I'm fine",
    )
    assert axis.get_xticklabels()[0].get_fontname() == cjk_font()  # Chinese as characters
    assert figure.axes[1].get_ylabel() == "attention weight"  # the colour bar


def test_the_heatmap_png_is_sized_for_its_grid(tmp_path):
    png = tmp_path / "a.png"
    attention_heatmap(np.full((3, 4), 0.25), SOURCE, TARGET, png, "I'm fine")
    assert pixels(png).shape[:2] == heatmap_pixels(3, 4)
    wide = tmp_path / "wide.png"
    attention_heatmap(np.full((3, 20), 0.05), SOURCE * 5, TARGET, wide)
    assert pixels(wide).shape[1] > pixels(png).shape[1]


def test_learning_curve_draws_train_and_dev_loss_and_bleu(tmp_path):
    records = [
        {"kind": "train", "step": 1, "loss": 5.0},
        {"kind": "train", "step": 2, "loss": 4.5},
        {"kind": "validation", "step": 2, "dev_loss": 4.0, "bleu": 1.0},
    ]
    figure = learning_curve_figure(records)
    loss_axis, bleu_axis = figure.axes
    lines = {line.get_label(): line for line in loss_axis.get_lines() + bleu_axis.get_lines()}
    assert list(lines["train loss"].get_xdata()) == [1, 2]
    assert list(lines["train loss"].get_ydata()) == [5.0, 4.5]
    assert list(lines["dev loss"].get_ydata()) == [4.0]
    assert list(lines["dev BLEU"].get_ydata()) == [1.0]
    assert (loss_axis.get_xlabel(), bleu_axis.get_ylabel()) == ("step", "dev BLEU")

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    learning_curve(metrics, tmp_path / "curve.png")
    png = tmp_path / "curve.png"
    assert pixels(png).shape[:2] == (450, 800)
    assert shows_colour(png, "tab:blue", alpha=0.7)  # train loss
    assert shows_colour(png, "tab:orange") and shows_colour(png, "tab:green")  # dev loss, BLEU


def test_the_heatmap_labels_a_character_s_byte_pieces_with_the_character():
    source = ["▁我", "<0xE9>", "<0xBE>", "<0x98>", "</s>"]  # 龘 in byte pieces
    weights = np.full((3, 5), 0.2)
    axis = attention_figure(weights, source, TARGET).axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["▁我", "龘", "</s>"]
    (image,) = axis.get_images()
    assert image.get_array().shape == (3, 3) and np.allclose(image.get_array()[:, 1], 0.6)
