"""Beam search over many batches, each joining the sentences still running: a speed trick on
top of `attnmt.infer.search.BeamSearch`, which it leaves as it is.

A batch's last few sentences would step on alone, a few rows per step at the cost of many. So
once the running sentences hold fewer than `join_below` source tokens (their number times the
longest source among them, padding included), the next batch takes its first step (one row a
sentence to K) and joins them, the source positions of both padded to the longer and masked.
The output is what each batch would find alone, but for the attention of a joined hypothesis,
which has a column per position of that longer source, zero past its own. docs/benchmarks.md
has what it saves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch
from torch import Tensor
from torch.nn import functional as F

from attnmt.infer.ensemble import Ensemble
from attnmt.infer.hypothesis import Hypothesis
from attnmt.infer.search import Beams, BeamSearch, SourceBatch
from attnmt.model.seq2seq import Seq2Seq
from attnmt.model.state import join_rows
from attnmt.vocab import BOS_ID


@dataclass
class JoinedBeams(Beams):
    """Beams whose sentences may have started at different steps: one that joined a running
    search has its words and attention rows after `first` entries of padding (BOS, zero
    rows), which its hypotheses leave out."""

    first: Tensor  # (n,) where each one's words begin in `tokens`

    @classmethod
    def of(cls, beams: Beams) -> JoinedBeams:
        """`beams`, all of whose sentences started together."""
        return cls(**vars(beams), first=torch.zeros_like(beams.sentences))

    def words_so_far(self) -> Tensor:
        return self.tokens.size(2) - self.first

    def histories(
        self, rows: Tensor, attention: Tensor | None
    ) -> tuple[list[list[int]], list[Tensor] | list[None]]:
        words, kept = super().histories(rows, attention)
        firsts = self.first[rows // self.scores.size(1)].tolist()  # of each one's sentence
        words = [ids[first:] for ids, first in zip(words, firsts, strict=True)]
        if attention is not None:
            kept = [steps[first:] for steps, first in zip(kept, firsts, strict=True)]
        return words, kept

    def keep(self, going: Tensor, rows: Tensor) -> JoinedBeams:
        return replace(super().keep(going, rows), first=self.first[going])

    def join(self, other: JoinedBeams) -> JoinedBeams:
        """These sentences, then `other`'s (as many beams, no more words): other's words and
        attention rows padded at the front to as many as these, the source axes at the end
        to the longer source."""
        lead = self.tokens.size(2) - other.tokens.size(2)
        attention = other.attention
        if attention.size(2):  # kept: zero rows before its first word's
            attention = F.pad(attention, (0, 0, lead, 0))
        return JoinedBeams(
            torch.cat([self.sentences, other.sentences]),
            torch.cat([self.scores, other.scores]),
            torch.cat([self.tokens, F.pad(other.tokens, (lead, 0), value=BOS_ID)]),
            join_rows(self.attention, attention, 0, -1),
            join_rows(self.coverage, other.coverage, 0, -1),
            self.state.join(other.state),
            torch.cat([self.first, other.first + lead]),
        )


def beam_search_batches(
    model: Seq2Seq | Ensemble,
    batches: Iterable[SourceBatch],
    beam_size: int,
    alpha: float,
    keep_attention: bool,
    n_best: int = 1,
    beta: float = 0.0,
    join_below: int = 0,
) -> list[list[Hypothesis]]:
    """The best `n_best` (<= beam_size) hypotheses of every sentence of `batches`, in their
    order, best first (`BeamSearch`), the next batch joining the running sentences once they
    hold fewer than `join_below` source tokens (see the module docstring; 0: each batch
    searches alone)."""
    search = BeamSearch(model, beam_size, alpha, keep_attention, n_best, beta)
    waiting = deque(batches)
    beams: JoinedBeams | None = None
    while beams is not None or waiting:
        if beams is None:  # a batch starts afresh
            beams = JoinedBeams.of(search.start(waiting.popleft()))
        elif waiting and len(beams.sentences) * beams.attention.size(-1) < join_below:
            joining = search.step(JoinedBeams.of(search.start(waiting.popleft())))
            if joining is not None:
                beams = beams.join(joining)
        beams = search.step(beams)
    return search.finish()
