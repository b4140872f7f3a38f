"""What a search finds for one sentence: a `Hypothesis`, shared by the search and its speed
tricks (`attnmt.infer.fast`) without either importing the other."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class Hypothesis:
    """One output sentence: its ids (no BOS/EOS), score, attention (T, S) if kept, and whether
    it ended with EOS (then T is len(ids) + 1) rather than at its length limit."""

    ids: list[int]
    score: float
    attention: Tensor | None = None
    ended: bool = True
