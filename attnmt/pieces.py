"""SentencePiece pieces as a reader sees them: byte pieces grouped into the characters they spell.

With `data.vocab.byte_fallback`, a character outside the vocabulary is encoded as the pieces of
its UTF-8 bytes, `<0xE9>` `<0xBE>` `<0x98>` for 龘. A run of byte pieces that spells one whole
character is one group, labelled with that character; every other piece is a group of its own,
labelled with itself (so is a byte piece that is part of no whole character: a model may emit
one). Heatmaps, the service's piece lists and their attention show the groups; decoding drops
the broken bytes (`attnmt.data.tokenizer.decode`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")


@dataclass(frozen=True)
class Group:
    """Pieces `start` to `end` (exclusive) read as one `label`; `broken`: a byte piece that is
    part of no whole UTF-8 character."""

    label: str
    start: int
    end: int
    broken: bool = False


def utf8_length(lead: int) -> int:
    """How many bytes the UTF-8 character that starts with byte `lead` has (0: no such
    character starts with it)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def piece_groups(pieces: Sequence[str]) -> list[Group]:
    """The groups of `pieces`, in order (see the module)."""
    values = [BYTE_PIECE.fullmatch(piece) for piece in pieces]
    groups: list[Group] = []
    i = 0
    while i < len(pieces):
        if values[i] is None:
            groups.append(Group(pieces[i], i, i + 1))
            i += 1
            continue
        length = utf8_length(int(values[i].group(1), 16))
        end = i + length
        run = values[i:end]
        character = None
        if length and end <= len(pieces) and all(run):
            try:  # the strict decoder refuses bad continuations, overlong forms, surrogates
                character = bytes(int(m.group(1), 16) for m in run).decode("utf-8")
            except UnicodeDecodeError:
                character = None
        if character is None:
            groups.append(Group(pieces[i], i, i + 1, broken=True))
            i += 1
        else:
            groups.append(Group(character, i, end))
            i = end
    return groups


def labels(pieces: Sequence[str]) -> list[str]:
    """The label of each group of `pieces`: what a heatmap's axis or a piece list shows."""
    return [group.label for group in piece_groups(pieces)]


def group_weights(
    weights: np.ndarray, source_pieces: Sequence[str], target_pieces: Sequence[str]
) -> tuple[np.ndarray, list[str], list[str]]:
    """Attention over pieces (target x source) as attention over their groups, with the
    groups' labels: a source group's column is the sum of its pieces' columns (the weight
    the step gave the character), a target group's row the mean of its pieces' rows (the
    steps that wrote it), as `attnmt.infer.align` does for words. Without byte pieces,
    `weights` come back as they are."""
    sources, targets = piece_groups(source_pieces), piece_groups(target_pieces)
    if len(sources) == len(source_pieces) and len(targets) == len(target_pieces):
        return weights, list(source_pieces), list(target_pieces)
    columns = np.stack([weights[:, g.start : g.end].sum(1) for g in sources], axis=1)
    rows = [columns[g.start : g.end].mean(0) for g in targets]
    rows = np.stack(rows) if rows else columns[:0]
    return rows, [g.label for g in sources], [g.label for g in targets]


def group_links(
    links: Sequence[tuple[int, int]], source_pieces: Sequence[str], target_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """(source piece, target piece) links as links between the pieces' groups."""
    source_group = group_of_piece(source_pieces)
    target_group = group_of_piece(target_pieces)
    return sorted({(source_group[s], target_group[t]) for s, t in links})


def group_of_piece(pieces: Sequence[str]) -> list[int]:
    """The index of each piece's group."""
    return [
        k for k, group in enumerate(piece_groups(pieces)) for _ in range(group.start, group.end)
    ]
