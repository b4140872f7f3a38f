"""Several corpora in one dataset (data.corpora): which corpus each training pair came from,
and what an epoch (and SentencePiece) takes of each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CORPUS_FILE = "train.corpus.npy"  # int8: the corpus of each training pair


@dataclass(frozen=True)
class CorpusMix:
    """The training pairs of several corpora (data.corpora) and what an epoch holds of each:
    every training pair of the evaluated corpus, and of each other corpus round(N w_k / w_e)
    pairs (N the evaluated corpus's pairs, w its weight, w_k the other's), drawn afresh each
    epoch: a whole pass over the corpus as many times as that fits, then a sample without
    repeats. A given (seed, epoch) draws the same pairs again."""

    corpus: np.ndarray  # (pairs,) the corpus of each training pair
    weights: tuple[float, ...]
    evaluated: int

    @classmethod
    def read(cls, folder: Path) -> CorpusMix | None:
        """The mix of a processed folder with several corpora; None for one corpus."""
        path = folder / CORPUS_FILE
        if not path.is_file():
            return None
        corpora = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["corpora"]
        evaluated = next(i for i, c in enumerate(corpora) if c["evaluate"])
        return cls(np.load(path), tuple(c["weight"] for c in corpora), evaluated)

    def tokenizer_lines(self, seed: int) -> np.ndarray:
        """(pairs,) bool: the pairs SentencePiece learns from, one epoch's draw (so each
        corpus shapes the vocabulary as much as it shapes training)."""
        use = np.zeros(len(self.corpus), dtype=bool)
        use[self.epoch_pairs(seed, 0)] = True
        return use

    def epoch_pairs(self, seed: int, epoch: int) -> np.ndarray:
        """The indices of the pairs epoch `epoch` trains on."""
        own = np.flatnonzero(self.corpus == self.evaluated)
        chosen = [own]
        for index, weight in enumerate(self.weights):
            pool = np.flatnonzero(self.corpus == index)
            if index == self.evaluated or not len(pool):
                continue
            wanted = round(len(own) * weight / self.weights[self.evaluated])
            passes, rest = divmod(wanted, len(pool))
            rng = np.random.default_rng([seed, epoch, index])
            chosen += [pool] * passes + [rng.choice(pool, rest, replace=False)]
        return np.concatenate(chosen)
