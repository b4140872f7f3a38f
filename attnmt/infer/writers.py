"""What attnmt-translate writes: translations streamed as lines or n-best rows, and the
attention of each sentence as an .npz file or heatmap PNGs; and attnmt-score's lines. With
split_sentences, a line is a paragraph: its sentences' translations joined, n-best rows and
attention per sentence."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np

from attnmt.data.corpus import chunks
from attnmt.data.units import Link
from attnmt.infer.align import format_links
from attnmt.infer.score import PairScore
from attnmt.infer.translate import Paragraph, SearchConfig, Translation, Translator
from attnmt.pieces import group_weights

BLOCK_LINES = 10_000  # input lines sorted by length and translated together


def write_translations(
    results: Sequence[Translation],
    out: TextIO,
    n_best: int,
    first: int = 0,
    links: Sequence[Sequence[Sequence[Link]]] | None = None,
) -> None:
    """One line per input; with n_best > 1, 'line ||| text ||| score' rows, best first, lines
    counted from `first` (0 for the first input line). With `links` (per input, per
    hypothesis), each line or row ends with ' ||| i-j ...' (Marian's convention)."""
    for k, result in enumerate(results):
        tails = [""] * max(len(result.hypotheses), 1)  # what ends each hypothesis's line
        if links:  # (an empty input line has no hypothesis: its line ends ' ||| ')
            tails = [f" ||| {format_links(found)}" for found in links[k]] or [" ||| "]
        if n_best == 1:
            out.write(result.text + tails[0] + "\n")
            continue
        for h, hypothesis in enumerate(result.hypotheses):
            row = f"{first + k} ||| {hypothesis.text} ||| {hypothesis.score:.4f}"
            out.write(row + tails[h] + "\n")


def write_paragraphs(
    results: Sequence[Paragraph],
    out: TextIO,
    n_best: int,
    first: int = 0,
    links: Sequence[Sequence[Sequence[Sequence[Link]]]] | None = None,
) -> None:
    """One line per input paragraph, its sentences' translations joined; with n_best > 1,
    'line ||| sentence ||| text ||| score' rows (sentences counted from 0 in their line), best
    first. With `links` (per paragraph, per sentence, per hypothesis), a line ends with
    ' ||| i-j ...' for each of its sentences (its own units), a row with its hypothesis's."""
    for k, paragraph in enumerate(results):
        if n_best == 1:
            tails = [f" ||| {format_links(each[0])}" for each in links[k]] if links else []
            if links and not tails:  # (no sentence: its line ends ' ||| ', as an empty line's)
                tails = [" ||| "]
            out.write(paragraph.text + "".join(tails) + "\n")
            continue
        for s, translation in enumerate(paragraph.translations):
            for h, hypothesis in enumerate(translation.hypotheses):
                row = f"{first + k} ||| {s} ||| {hypothesis.text} ||| {hypothesis.score:.4f}"
                tail = f" ||| {format_links(links[k][s][h])}" if links else ""
                out.write(row + tail + "\n")


def write_scores(scores: Sequence[PairScore], out: TextIO) -> None:
    """attnmt-score's lines: total, mean, count, then each piece's log-probability."""
    for pair in scores:
        pieces = " ".join(f"{p:.4f}" for p in pair.token_log_probs)
        out.write(f"{pair.log_prob:.4f}\t{pair.mean:.4f}\t{len(pair.token_log_probs)}\t{pieces}\n")


def translate_stream(
    translator: Translator,
    lines: Iterable[str],
    search: SearchConfig,
    out: TextIO,
    keep: bool = False,
    align: bool = False,
    threshold: float | None = None,
    split_sentences: bool = False,
    first: int = 0,
) -> list[Translation] | list[Paragraph]:
    """Translate `lines` a block of BLOCK_LINES at a time, writing each block's translations
    before reading the next, so an input of any size streams through; with `align`, each
    with its hard alignment (`Translator.links`); with `split_sentences`, each line as a
    paragraph. `first`: the number of the first line (from 0) in the n-best rows. Returns
    the translations (with their attention) only when `keep`."""
    kept: list = []
    done = first
    for block in chunks(lines, BLOCK_LINES):
        attention, first_line = keep or align, done + 1
        if split_sentences:
            paragraphs = translator.translate(
                block, search, attention=attention, first_line=first_line, split_sentences=True
            )
            links = (
                [paragraph_links(translator, p, threshold) for p in paragraphs] if align else None
            )
            write_paragraphs(paragraphs, out, search.n_best, done, links)
            results: list = paragraphs
        else:
            results = translator.translate(
                block, search, attention=attention, first_line=first_line
            )
            links = None
            if align:
                links = [
                    translator.links(t, r, threshold) for t, r in zip(block, results, strict=True)
                ]
            write_translations(results, out, search.n_best, done, links)
        done += len(block)
        if keep:
            kept.extend(results)
    return kept


def paragraph_links(
    translator: Translator, paragraph: Paragraph, threshold: float | None = None
) -> list[list[list[Link]]]:
    """The hard links of each hypothesis of each sentence of `paragraph` (`Translator.links`)."""
    return [
        translator.links(sentence, translation, threshold)
        for sentence, translation in zip(paragraph.sentences, paragraph.translations, strict=True)
    ]


def each_sentence(
    results: Sequence[Translation] | Sequence[Paragraph],
) -> list[tuple[str, Translation]]:
    """Each sentence's translation with its name in the attention outputs: the line's number
    (from 0), or with paragraphs the line's and the sentence's ('3_1')."""
    named = []
    for i, result in enumerate(results):
        if isinstance(result, Paragraph):
            named += [(f"{i}_{k}", t) for k, t in enumerate(result.translations)]
        else:
            named.append((str(i), result))
    return named


def save_attention(results: Sequence[Translation] | Sequence[Paragraph], path: Path) -> None:
    """An .npz with, for sentence i, `attention_i` (target x source, the best hypothesis's
    weights; EOS rows and columns included), `source_i` and `target_i` (the pieces; the byte
    pieces of a character as one, labelled with it: `attnmt.pieces.group_weights`); i is
    'line_sentence' for paragraphs (`each_sentence`)."""
    arrays = {}
    for i, result in each_sentence(results):
        if not result.hypotheses:
            continue
        best = result.hypotheses[0]
        weights, source, target = group_weights(
            best.attention, result.source_pieces, best.target_pieces
        )
        arrays[f"attention_{i}"] = weights
        arrays[f"source_{i}"] = np.array(source)
        arrays[f"target_{i}"] = np.array(target)
    np.savez_compressed(path, **arrays)


def plot_attention(results: Sequence[Translation] | Sequence[Paragraph], folder: Path) -> None:
    """One heatmap PNG per translated sentence: folder/attention_{i}.png (i as in
    `save_attention`)."""
    from attnmt.plot import attention_heatmap  # matplotlib adds 0.2 s to every start otherwise

    folder.mkdir(parents=True, exist_ok=True)
    for i, result in each_sentence(results):
        if result.hypotheses:
            best = result.hypotheses[0]
            attention_heatmap(
                best.attention,
                result.source_pieces,
                best.target_pieces,
                folder / f"attention_{i}.png",
                best.text,
            )
