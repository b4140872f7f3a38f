"""Splitting pairs into train/dev/test without leakage.

Many Tatoeba sentences have several translations. If "I see." -> "我明白了。" were in train and
"I see." -> "我懂了。" in test, the test score would measure memory, not translation. So pairs
that share an English or a Chinese sentence are joined into one group (the connected components
of the graph whose nodes are sentences and whose edges are pairs), and a whole group goes to one
split.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attnmt.data.corpus import Pair
from attnmt.errors import DataError

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Splits:
    """The three splits, each a list of pairs in a deterministic order."""

    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]

    def items(self) -> list[tuple[str, list[Pair]]]:
        return [("train", self.train), ("dev", self.dev), ("test", self.test)]


def _find(parent: list[int], node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return node


def group_pairs(pairs: list[Pair]) -> list[list[int]]:
    """Indices of `pairs` grouped so that pairs sharing a sentence share a group."""
    parent = list(range(len(pairs)))
    first_with: dict[tuple[str, str], int] = {}
    for index, pair in enumerate(pairs):
        for key in (("en", pair.en), ("zh", pair.zh)):
            other = first_with.setdefault(key, index)
            parent[_find(parent, index)] = _find(parent, other)
    groups: dict[int, list[int]] = {}
    for index in range(len(pairs)):
        groups.setdefault(_find(parent, index), []).append(index)
    return sorted(groups.values(), key=lambda group: group[0])


def split_pairs(pairs: list[Pair], dev_size: int, test_size: int, seed: int) -> Splits:
    """Assign whole groups to test, then dev, until each holds its size; the rest is train.

    Groups are visited in an order shuffled by `seed`; a group that would overfill test or dev
    goes on to the next split, so the sizes are met exactly whenever small groups remain.
    """
    if dev_size + test_size >= len(pairs):
        raise DataError(
            f"data.dev_size={dev_size} + data.test_size={test_size} leaves no training pairs "
            f"out of {len(pairs)} clean pairs"
        )
    groups = group_pairs(pairs)
    random.Random(seed).shuffle(groups)
    wanted = {"test": test_size, "dev": dev_size}
    chosen: dict[str, list[int]] = {"train": [], "dev": [], "test": []}
    for group in groups:
        target = next(
            (name for name in ("test", "dev") if len(chosen[name]) + len(group) <= wanted[name]),
            "train",
        )
        chosen[target].extend(group)
    return Splits(**{name: [pairs[i] for i in sorted(ids)] for name, ids in chosen.items()})
