"""Splitting pairs into train/dev/test without leakage.

Many Tatoeba sentences have several translations. If "I see." -> "我明白了。" were in train and
"I see." -> "我懂了。" in test, the test score would measure memory, not translation. So pairs
that share an English or a Chinese sentence are joined into one group (the connected components
of the graph whose nodes are sentences and whose edges are pairs), and a whole group goes to one
split.

Sentences are compared by their 64-bit keys (`corpus.sentence_key`), held in numpy arrays, so
grouping millions of pairs costs a few bytes per pair, not the sentences.
"""

from __future__ import annotations

import random
from array import array

import numpy as np

from attnmt.errors import DataError

SPLITS = ("train", "dev", "test")
TRAIN, DEV, TEST = 0, 1, 2  # the split codes of `assign_splits`, indices into SPLITS


def group_pairs(*keys: np.ndarray) -> np.ndarray:
    """For each pair, its group: the index of the first pair of the group.

    keys: one (N,) array per side, the key of that side's sentence for each pair. Pairs sharing
    a key on any side share a group. Label propagation: every pair takes the smallest label
    among the pairs that share one of its sentences, then follows its label's label (which
    halves chains), until nothing changes.
    """
    count = len(keys[0])
    label = np.arange(count)
    if not count:
        return label
    sharing = []  # per side: the pairs sorted by key, and where each key's run starts
    for side in keys:
        order = np.argsort(side, kind="stable")
        ordered = side[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        sharing.append((order, starts, np.diff(np.r_[starts, count])))
    while True:
        previous = label.copy()
        for order, starts, sizes in sharing:
            smallest = np.minimum.reduceat(label[order], starts)
            label[order] = np.minimum(label[order], np.repeat(smallest, sizes))
        label = label[label]
        if np.array_equal(label, previous):
            return label


def assign_splits(groups: np.ndarray, dev_size: int, test_size: int, seed: int) -> np.ndarray:
    """The split code (TRAIN, DEV, TEST) of each pair, whole groups at a time.

    Groups are visited in an order shuffled by `seed` (by Python's `random`, which depends only
    on the number of groups); each goes to test, else dev, if it fits in what that split still
    wants, else to train; so the sizes are met exactly whenever small groups remain.
    """
    if dev_size + test_size >= len(groups):
        raise DataError(
            f"data.dev_size={dev_size} + data.test_size={test_size} leaves no training pairs "
            f"out of {len(groups)} clean pairs"
        )
    firsts, group_of, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    visit = array("q", range(len(firsts)))  # 8 bytes a group, where a list takes 36
    random.Random(seed).shuffle(visit)
    wanted = {TEST: test_size, DEV: dev_size}
    code_of_group = np.full(len(firsts), TRAIN, dtype=np.int8)
    for group in visit:
        if not any(wanted.values()):
            break
        size = int(sizes[group])
        target = next((code for code in (TEST, DEV) if size <= wanted[code]), TRAIN)
        if target != TRAIN:
            wanted[target] -= size
            code_of_group[group] = target
    return code_of_group[group_of]
