"""Pictures: the learning curve of a run, and attention heatmaps."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl file."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def learning_curve(metrics_path: Path, png_path: Path) -> None:
    """Train and dev loss against steps (left axis) and dev BLEU (right axis)."""
    records = read_metrics(metrics_path)
    train = [r for r in records if r["kind"] == "train"]
    dev = [r for r in records if r["kind"] == "validation"]
    figure, loss_axis = plt.subplots(figsize=(8, 4.5))
    loss_axis.plot(
        [r["step"] for r in train],
        [r["loss"] for r in train],
        label="train loss",
        color="tab:blue",
        alpha=0.7,
    )
    loss_axis.plot(
        [r["step"] for r in dev],
        [r["dev_loss"] for r in dev],
        "o-",
        label="dev loss",
        color="tab:orange",
    )
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("loss (nats per token)")
    bleu_axis = loss_axis.twinx()
    bleu_axis.plot(
        [r["step"] for r in dev],
        [r["bleu"] for r in dev],
        "s--",
        label="dev BLEU",
        color="tab:green",
    )
    bleu_axis.set_ylabel("dev BLEU")
    handles = loss_axis.get_legend_handles_labels()[0] + bleu_axis.get_legend_handles_labels()[0]
    loss_axis.legend(handles, [h.get_label() for h in handles], loc="center right")
    figure.tight_layout()
    tmp = png_path.with_suffix(".tmp.png")
    figure.savefig(tmp, dpi=100)
    plt.close(figure)
    tmp.replace(png_path)
