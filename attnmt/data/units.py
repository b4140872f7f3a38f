"""Alignment units, the one granularity at which the model's attention, the gold alignment
set and the statistical aligner (eflomal) are compared and at which guided alignment is cached:

- Chinese: one unit per character; a run of ASCII letters or digits is one unit;
- other languages: the words of sacrebleu's 13a tokenization (punctuation split off).

Both are counted on the text as given (normalised as in training). A SentencePiece piece
covers some characters (or bytes: any offsets, the same for both) of that text; it maps to
every unit it overlaps, and a piece that covers only a space maps to the unit after it
(`piece_to_unit`).

Links are in the Pharaoh format of fast_align and eflomal: `i-j` per link, 0-based, i the
source unit, j the target unit; a gold set adds `ipj` for possible links (`read_links`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from attnmt.errors import DataError

Link = tuple[int, int]  # (source unit, target unit)
_CHINESE_UNIT = re.compile(r"[A-Za-z0-9]+|\S")
_TOKENIZE_13A = Tokenizer13a()


def unit_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """The alignment units of `text` as (start, end) character offsets, in order."""
    if lang == "zh":
        return [m.span() for m in _CHINESE_UNIT.finditer(text)]
    spans, at = [], 0
    for word in _TOKENIZE_13A(text).split():
        start = text.find(word, at)
        if start < 0:  # 13a rewrote it (an escaped entity): an empty span where we are
            spans.append((at, at))
            continue
        at = start + len(word)
        spans.append((start, at))
    return spans


def units(text: str, lang: str) -> list[str]:
    """The alignment units of `text` (Chinese characters and Latin runs, or 13a words)."""
    return [text[start:end] for start, end in unit_spans(text, lang)]


def piece_to_unit(
    pieces: Sequence[tuple[int, int]] | np.ndarray, spans: Sequence[tuple[int, int]] | np.ndarray
) -> np.ndarray:
    """(pieces, units) 0/1 matrix: which units each piece covers (half-open spans that
    overlap). A piece that overlaps no unit (a lone space) takes the next unit, if any."""
    pieces = np.asarray(pieces, dtype=np.int64).reshape(-1, 2)
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    matrix = (spans[None, :, 0] < pieces[:, None, 1]) & (pieces[:, None, 0] < spans[None, :, 1])
    lone = np.flatnonzero(~matrix.any(1))
    if len(lone) and len(spans):
        following = np.searchsorted(spans[:, 0], pieces[lone, 0], side="left")
        keep = following < len(spans)
        matrix[lone[keep], following[keep]] = True
    return matrix.astype(np.float32)


@dataclass
class GoldPair:
    """One pair's gold links: sure ones and possible ones (the possible include the sure)."""

    sure: set[Link]
    possible: set[Link]


def read_links(
    path: Path,
    source_counts: Sequence[int] | None = None,
    target_counts: Sequence[int] | None = None,
) -> list[GoldPair]:
    """A Pharaoh file, one line per pair ('i-j' sure, 'ipj' possible; an empty line: no
    links). With unit counts, an index past its sentence is refused, naming file and line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    counts = (source_counts, target_counts) if source_counts and target_counts else None
    if source_counts is not None and len(lines) != len(source_counts):
        raise DataError(f"{path}: {len(lines)} lines, but {len(source_counts)} sentence pairs")
    pairs = []
    for number, line in enumerate(lines, start=1):
        sure, possible = set(), set()
        for word in line.split():
            match = re.fullmatch(r"(\d+)([-p])(\d+)", word)
            if not match:
                raise DataError(f"{path}, line {number}: {word!r} is not i-j or ipj")
            link = (int(match[1]), int(match[3]))
            if counts and (link[0] >= counts[0][number - 1] or link[1] >= counts[1][number - 1]):
                raise DataError(
                    f"{path}, line {number}: {word} is past the sentence pair's "
                    f"{counts[0][number - 1]} source and {counts[1][number - 1]} target units"
                )
            possible.add(link)
            if match[2] == "-":
                sure.add(link)
        pairs.append(GoldPair(sure, possible))
    return pairs


def grow_diag_final_and(forward: Iterable[Link], backward: Iterable[Link]) -> list[Link]:
    """Symmetrise two directional alignments (both as source-target links) as Koehn et al.'s
    grow-diag-final-and: start from their intersection, add union links next to (or
    diagonal to) a link while either word is still unaligned, then union links whose both
    words are still unaligned."""
    forward, backward = set(forward), set(backward)
    union = forward | backward
    links = forward & backward
    sources, targets = {i for i, _ in links}, {j for _, j in links}
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]

    def add(link: Link) -> None:
        links.add(link)
        sources.add(link[0])
        targets.add(link[1])

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                new = (i + di, j + dj)
                if (
                    new in union
                    and new not in links
                    and (new[0] not in sources or new[1] not in targets)
                ):
                    add(new)
                    grown = True
    for directional in (forward, backward):  # final-and
        for i, j in sorted(directional):
            if i not in sources and j not in targets:
                add((i, j))
    return sorted(links)
