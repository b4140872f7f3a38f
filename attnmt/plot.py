"""Pictures: the learning curve of a run, and attention heatmaps."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attnmt.files import replaced_whole  # noqa: E402
from attnmt.pieces import group_weights  # noqa: E402

log = logging.getLogger(__name__)

DPI = 100  # pixels per inch of every PNG


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl file."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def learning_curve(metrics_path: Path, png_path: Path) -> None:
    """The learning curve of a run's metrics.jsonl as a PNG (written atomically)."""
    figure = learning_curve_figure(read_metrics(metrics_path))
    with replaced_whole(png_path, "wb") as out:
        figure.savefig(out, dpi=DPI, format="png")
    plt.close(figure)


def learning_curve_figure(records: list[dict]) -> Figure:
    """Train and dev loss against steps (left axis) and dev BLEU (right axis)."""
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
    return figure


# Fonts with Chinese glyphs, best first; the Makefile's install puts Noto Sans CJK in place.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Source Han Sans SC",
    "SimHei",
    "Microsoft YaHei",
)


def cjk_font() -> str | None:
    """The first installed font of CJK_FONTS, or None (Chinese would then show as boxes)."""
    from matplotlib import font_manager

    def first_known() -> str | None:
        installed = {font.name for font in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in installed), None)

    if first_known() is None:  # installed after matplotlib cached its font list?
        for path in font_manager.findSystemFonts():
            if any(mark in Path(path).name for mark in ("CJK", "wqy", "SourceHan")):
                font_manager.fontManager.addfont(path)
    return first_known()


def attention_heatmap(
    weights: np.ndarray,
    source_pieces: list[str],
    target_pieces: list[str],
    png_path: Path,
    title: str = "",
) -> None:
    """The heatmap of `attention_figure` as a PNG."""
    figure = attention_figure(weights, source_pieces, target_pieces, title)
    figure.savefig(png_path, dpi=DPI)
    plt.close(figure)


def heatmap_inches(rows: int, columns: int) -> tuple[float, float]:
    """The size (width, height) of the heatmap of a rows x columns weight matrix, in inches:
    wide and tall enough for a piece per row and column."""
    return max(4, 0.45 * columns + 2), max(3, 0.4 * rows + 1.5)


def attention_figure(
    weights: np.ndarray, source_pieces: list[str], target_pieces: list[str], title: str = ""
) -> Figure:
    """A target-by-source heatmap of attention weights, pieces on the axes, with a colour bar;
    the byte pieces of a character (byte fallback) are one row or column labelled with it
    (`attnmt.pieces.group_weights`)."""
    weights, source_pieces, target_pieces = group_weights(weights, source_pieces, target_pieces)
    font = cjk_font()
    if font is None:
        log.warning(
            "no CJK font found (tried %s): Chinese will show as boxes; install "
            "fonts-noto-cjk (make install does)",
            ", ".join(CJK_FONTS),
        )
    height, width = weights.shape
    figure, axis = plt.subplots(figsize=heatmap_inches(height, width))
    image = axis.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    style = {"fontfamily": font} if font else {}
    upright = max(map(len, source_pieces), default=0) <= 3  # Chinese pieces read best upright
    axis.set_xticks(range(width), source_pieces, rotation=0 if upright else 90, **style)
    axis.set_yticks(range(height), target_pieces, **style)
    axis.set_xlabel("source")
    axis.set_ylabel("target")
    if title:
        axis.set_title(title, **style)
    figure.colorbar(image, ax=axis, label="attention weight")
    figure.tight_layout()
    return figure
