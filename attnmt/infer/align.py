"""Word alignments from attention, and how well they match a gold set (AER).

The alignment units and the piece-to-unit map are `attnmt.data.units`'s (Chinese characters
and Latin runs, 13a words, counted on the text as given; a piece maps to every unit it
overlaps). From a target-by-source attention matrix over pieces
(EOS row and column left out), the matrix over units is:

    U[j, i] = mean over the target pieces p of unit j of ( sum over the source pieces q that
              overlap unit i of A[p, q] )

so a source piece covering several units passes its whole weight to each, and a target unit
takes the mean of the rows of the decoder steps that emit its pieces. Hard links: each target
unit j links to argmax_i U[j, i], and with `threshold`, also to every i with U[j, i] >=
threshold. Rows need not sum to 1 (local attention): only their order counts.

Links are written in the Pharaoh format (`attnmt.data.units`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sentencepiece import SentencePieceProcessor

from attnmt.data.tokenizer import decode
from attnmt.data.units import GoldPair, Link, piece_to_unit, unit_spans
from attnmt.errors import DataError

BOOTSTRAP_SAMPLES = 1000


def piece_spans(sp: SentencePieceProcessor, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The piece ids of `text` and the character span of each piece in it (the byte pieces of
    one character before its last: an empty span where it starts, so the character's unit)."""
    encoded = sp.encode(text, return_type="proto")
    byte_to_char = np.zeros(len(text.encode("utf-8")) + 1, dtype=np.int64)
    at = 0
    for index, char in enumerate(text):
        width = len(char.encode("utf-8"))
        byte_to_char[at : at + width] = index
        at += width
    byte_to_char[at] = len(text)
    pieces = encoded.pieces
    return [p.id for p in pieces], [
        (int(byte_to_char[p.begin]), int(byte_to_char[p.end])) for p in pieces
    ]


def decoded_spans(
    sp: SentencePieceProcessor, ids: Sequence[int]
) -> tuple[str, list[tuple[int, int]]]:
    """The text of piece `ids` (as `decode` writes it) and each piece's span in it: the byte
    pieces of one character (byte fallback) before its last have an empty span where it
    starts, which `piece_to_unit` gives that character's unit."""
    text = decode(sp, ids)
    ends = [len(decode(sp, ids[: k + 1])) for k in range(len(ids))]
    return text, list(zip([0, *ends][: len(ends)], ends, strict=True))  # no ids: no spans


def unit_attention(
    weights: np.ndarray, source_map: np.ndarray, target_map: np.ndarray
) -> np.ndarray:
    """U (target units, source units) from piece attention `weights` (target pieces x source
    pieces; extra rows and columns, such as EOS, are cut) and the piece-to-unit maps."""
    pieces = weights[: target_map.shape[0], : source_map.shape[0]]
    summed = pieces @ source_map  # (target pieces, source units)
    counts = target_map.sum(0)  # pieces per target unit
    return (target_map.T @ summed) / np.maximum(counts, 1)[:, None]


@dataclass
class Side:
    """One side of a sentence pair as alignment sees it: its text and which of its units
    each piece covers ((pieces, units) 0/1)."""

    text: str
    piece_units: np.ndarray

    @classmethod
    def encoded(cls, sp: SentencePieceProcessor, text: str, lang: str) -> tuple[list[int], Side]:
        """The piece ids of `text` and its side."""
        ids, spans = piece_spans(sp, text)
        return ids, cls(text, piece_to_unit(spans, unit_spans(text, lang)))

    @classmethod
    def decoded(cls, sp: SentencePieceProcessor, ids: Sequence[int], lang: str) -> Side:
        """The side of a model's output `ids` (without EOS), its text as decoded."""
        text, spans = decoded_spans(sp, ids)
        return cls(text, piece_to_unit(spans, unit_spans(text, lang)))


def links_from_attention(
    weights: np.ndarray, source: Side, target: Side, threshold: float | None = None
) -> list[Link]:
    """The hard links of one pair from its piece attention (target x source, EOS included)."""
    return hard_links(unit_attention(weights, source.piece_units, target.piece_units), threshold)


def hard_links(unit_weights: np.ndarray, threshold: float | None = None) -> list[Link]:
    """Each target unit's link to its heaviest source unit, and with `threshold` to every
    source unit at least that heavy; units with no weight at all stay unlinked."""
    links = set()
    for j, row in enumerate(unit_weights):
        if not row.size or row.max() <= 0:
            continue
        links.add((int(row.argmax()), j))
        if threshold is not None:
            links.update((int(i), j) for i in np.flatnonzero(row >= threshold))
    return sorted(links)


def piece_links(links: Iterable[Link], source: Side, target: Side) -> list[Link]:
    """Unit links as (source piece, target piece) links: every pair of pieces that cover the
    two units of a link, what a heatmap over pieces marks (EOS is in no unit, so never)."""
    found = set()
    for i, j in links:
        source_pieces = np.flatnonzero(source.piece_units[:, i])
        target_pieces = np.flatnonzero(target.piece_units[:, j])
        found.update((int(q), int(p)) for q in source_pieces for p in target_pieces)
    return sorted(found)


def format_links(links: Iterable[Link], possible: Iterable[Link] = ()) -> str:
    """Pharaoh: 'i-j' for each link, 'ipj' for each possible one."""
    words = [f"{i}-{j}" for i, j in sorted(links)] + [f"{i}p{j}" for i, j in sorted(possible)]
    return " ".join(words)


def flip(links: Iterable[Link]) -> list[Link]:
    """The links of the other direction (i-j becomes j-i)."""
    return sorted((j, i) for i, j in links)


def read_pairs(source: Path, target: Path) -> tuple[list[str], list[str]]:
    """Two files of one sentence a line, of equal length, with no empty line."""
    sides = []
    for path in (source, target):
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise DataError(f"{path}: no such file") from None
        except UnicodeDecodeError as error:
            raise DataError(f"{path}: not UTF-8 ({error.reason})") from None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                raise DataError(f"{path}, line {number}: an empty line; one sentence a line")
        sides.append(lines)
    if len(sides[0]) != len(sides[1]):
        raise DataError(
            f"{source} has {len(sides[0])} lines but {target} has {len(sides[1])}: "
            "the pairs files must be line by line"
        )
    return sides[0], sides[1]


@dataclass(frozen=True)
class AER:
    """Alignment error rate over a set, with a bootstrap 95% interval over its pairs."""

    aer: float
    low: float
    high: float
    precision: float  # |A ∩ P| / |A|
    recall: float  # |A ∩ S| / |S|


def aer(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldPair], seed: int = 0) -> AER:
    """AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|), counts summed over all pairs (Och and Ney
    2003); the interval from BOOTSTRAP_SAMPLES resamplings of the pairs."""
    if len(predicted) != len(gold):
        raise DataError(f"{len(predicted)} predicted alignments for {len(gold)} gold pairs")
    counts = np.array(
        [
            (len(a & g.sure), len(a & g.possible), len(a), len(g.sure))
            for a, g in ((set(p), g) for p, g in zip(predicted, gold, strict=True))
        ],
        dtype=np.float64,
    ).reshape(-1, 4)

    def rate(rows: np.ndarray) -> float:
        sure, possible, found, gold_sure = rows.sum(0)
        return 1.0 - (sure + possible) / max(found + gold_sure, 1.0)

    draws = np.random.default_rng(seed).integers(0, len(counts), (BOOTSTRAP_SAMPLES, len(counts)))
    rates = np.array([rate(counts[d]) for d in draws]) if len(counts) else np.zeros(1)
    sure, possible, found, gold_sure = counts.sum(0)
    return AER(
        rate(counts),
        float(np.percentile(rates, 2.5)),
        float(np.percentile(rates, 97.5)),
        possible / max(found, 1.0),
        sure / max(gold_sure, 1.0),
    )
