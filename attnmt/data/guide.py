"""Guided alignment's data (Chen et al. 2016): a statistical aligner's links for every training
pair, and from them, for each batch, where each target piece's attention should go.

The links are cached once per processed folder, at the units of `attnmt.data.units`, in
`train.align` beside the split: eflomal (Östling and Tiedemann 2016) aligns the training split
in both directions and the two are symmetrised with grow-diag-final-and; one Pharaoh line per
training pair, i a source unit and j a target unit of the folder's direction. The dataset step
of the first training run that asks for them (`trainer.guided_alignment` > 0) builds them,
right after preparing the folder and under its build lock (rank 0 first; other ranks read the
same file); a folder rebuilt for another data config starts without them, so they follow the
data. eflomal is an optional dependency: pip install 'attnmt[align]' (it builds with the C
compiler; `make install` installs it).

Units never change with the segmentation, so the same links serve a fixed segmentation and one
sampled anew every epoch: each batch maps them to its own pieces. For target piece p, covering
the target units J_p, the source units linked to them are I_p = {i : (i, j) linked, j in J_p};
p's guide row spreads 1 over the source pieces that cover I_p, each in proportion to the number
of links that reach it:

    R = T L S^T,   G[p] = R[p] / sum_q R[p, q]

with T (target pieces x target units) and S (source pieces x source units) the 0/1 maps of
`piece_to_unit` and L (target units x source units) the links. A piece with no link, the EOS
row, the EOS column and padding are zero: they are not guided.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm
import torch

from attnmt.data.corpus import read_own_lines
from attnmt.data.folder import building
from attnmt.data.units import (
    Link,
    grow_diag_final_and,
    piece_to_unit,
    read_links,
    unit_spans,
    units,
)
from attnmt.errors import DataError
from attnmt.files import replaced_whole

log = logging.getLogger(__name__)

ALIGNMENT_FILE = "train.align"
EMPTY_UNIT = "∅"


def eflomal_links(
    sources: list[list[str]], targets: list[list[str]]
) -> tuple[list[list[Link]], list[list[Link]]]:
    """eflomal's forward and backward links (both as source-target) of sentence pairs given as
    lists of units."""
    try:
        from eflomal import Aligner
    except ImportError:
        raise DataError(
            "eflomal is not installed: pip install 'attnmt[align]' (or eflomal; it builds with "
            "the C compiler)"
        ) from None
    with tempfile.TemporaryDirectory() as scratch:
        forward, backward = Path(scratch) / "forward", Path(scratch) / "backward"
        Aligner().align(
            [" ".join(s) for s in sources],
            [" ".join(t) for t in targets],
            links_filename_fwd=str(forward),
            links_filename_rev=str(backward),
            quiet=True,
        )
        return [sorted(p.sure) for p in read_links(forward)], [
            sorted(p.sure) for p in read_links(backward)
        ]


def build_alignments(folder: Path, src_lang: str, tgt_lang: str) -> Path:
    """The folder's `train.align`, built first if it is not there (see the module)."""
    path = folder / ALIGNMENT_FILE
    if path.is_file():
        return path
    with building(folder, "eflomal alignment of the training split"):
        if path.is_file():
            return path  # built by the process this one waited for
        texts = [list(read_own_lines(folder / f"train.{lang}")) for lang in (src_lang, tgt_lang)]
        log.info("aligning the %s training pairs with eflomal (once per dataset)", len(texts[0]))
        sides = [
            [aligner_tokens(t, lang) for t in lines]
            for lines, lang in zip(texts, (src_lang, tgt_lang), strict=True)
        ]
        forward, backward = eflomal_links(sides[0], sides[1])
        lines = [
            " ".join(f"{i}-{j}" for i, j in grow_diag_final_and(f, b))
            for f, b in zip(forward, backward, strict=True)
        ]
        with replaced_whole(path) as out:
            out.write("".join(f"{line}\n" for line in lines))
    return path


def aligner_tokens(text: str, lang: str) -> list[str]:
    """The units of `text` as an aligner's tokens, one per unit: an empty unit (a word 13a
    rewrote) becomes a placeholder, so that the aligner's indices stay the units'."""
    return [unit or EMPTY_UNIT for unit in units(text, lang)]


def byte_spans(text: str, lang: str) -> np.ndarray:
    """The units of `text` as (start, end) UTF-8 byte offsets, as SentencePiece counts."""
    offsets = np.cumsum([0, *(len(c.encode("utf-8")) for c in text)])
    return offsets[np.asarray(unit_spans(text, lang), dtype=np.int64).reshape(-1, 2)]


class AlignmentGuide:
    """The guide rows of the training pairs (see the module): their unit links, the units of
    their text and the byte spans of the pieces of their current segmentation (`encode`)."""

    def __init__(self, folder: Path, src_lang: str, tgt_lang: str) -> None:
        self.folder, self.langs = folder, (src_lang, tgt_lang)
        self.texts = [list(read_own_lines(folder / f"train.{lang}")) for lang in self.langs]
        self.units = [
            [byte_spans(text, lang) for text in lines]
            for lines, lang in zip(self.texts, self.langs, strict=True)
        ]
        counts = [[len(u) for u in side] for side in self.units]
        path = folder / ALIGNMENT_FILE
        self.links = [
            np.array(sorted(p.sure), dtype=np.int64).reshape(-1, 2)
            for p in read_links(path, counts[0], counts[1])
        ]
        self.pieces: list[list[np.ndarray]] = [[], []]

    def encode(
        self, models: dict[str, spm.SentencePieceProcessor], **options: Any
    ) -> list[list[list[int]]]:
        """Segment both sides with `models` (SentencePiece's encode options, e.g. sampling),
        keep each piece's byte span, and return the ids of each side."""
        sides = []
        for side, lang in enumerate(self.langs):
            encoded = models[lang].encode(self.texts[side], return_type="proto", **options)
            self.pieces[side] = [
                np.array([(p.begin, p.end) for p in e.pieces], dtype=np.int64).reshape(-1, 2)
                for e in encoded
            ]
            sides.append([[p.id for p in e.pieces] for e in encoded])
        return sides

    def rows(self, index: int) -> np.ndarray:
        """Pair `index`'s guide (target pieces x source pieces), rows summing to 1 or 0."""
        source = piece_to_unit(self.pieces[0][index], self.units[0][index])
        target = piece_to_unit(self.pieces[1][index], self.units[1][index])
        links = np.zeros((target.shape[1], source.shape[1]), dtype=np.float32)
        found = self.links[index]
        links[found[:, 1], found[:, 0]] = 1.0
        reach = target @ links @ source.T
        total = reach.sum(1, keepdims=True)
        return np.divide(reach, total, out=np.zeros_like(reach), where=total > 0)

    def batch(self, indices: np.ndarray, target_steps: int, source_steps: int) -> torch.Tensor:
        """(B, T, S) guide of the pairs `indices` in a batch's shape (EOS and padding zero)."""
        out = np.zeros((len(indices), target_steps, source_steps), dtype=np.float32)
        for row, index in enumerate(indices):
            guide = self.rows(int(index))
            out[row, : guide.shape[0], : guide.shape[1]] = guide
        return torch.from_numpy(out)
