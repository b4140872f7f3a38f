"""Search over many batches, each joining the sentences still running: a speed trick on top of
`attnmt.infer.search`'s `GreedySearch` and `BeamSearch`, which it leaves as they are.

A batch's last few sentences would step on alone, a few rows per step at the cost of many. So
once the running sentences hold fewer than `join_below` source tokens (their number times the
longest source among them, padding included), the next batch joins them (`run_batches`, the
one rule for both searches), the source positions of both padded to the longer and masked:
greedy's before its first step (`join_greedy`), beam search's after it (one row a sentence to
K: `JoinedBeams`). The output is what each batch would find alone, but for the attention of a
joined sentence, which has a column per position of that longer source, zero past its own, and
for the last bits of scores and attention where a product's kernel depends on how many rows it
has (`attnmt.infer.fast.pick_log_probs`). docs/benchmarks.md has what it saves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import torch
from torch import Tensor
from torch.nn import functional as F

from attnmt.infer.ensemble import Ensemble
from attnmt.infer.hypothesis import Hypothesis
from attnmt.infer.search import Beams, BeamSearch, GreedyRows, GreedySearch, SourceBatch
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


class Running(Protocol):
    """What `run_batches` reads of a search's running rows."""

    sentences: Tensor  # (n,) the sentences still running
    attention: Tensor  # (..., S): S, the source positions they attend over


R = TypeVar("R", bound=Running)


def run_batches(
    batches: Iterable[SourceBatch],
    start: Callable[[SourceBatch], R],
    step: Callable[[R], R | None],
    join: Callable[[R, SourceBatch], R],
    join_below: int,
) -> None:
    """Search every sentence of `batches`, in their order: `start` makes a batch's rows,
    `step` takes one step of all the running rows (None once they are done), and
    `join(running, batch)` adds the next batch to them once they hold fewer than
    `join_below` source tokens (0: each batch searches alone)."""
    waiting = deque(batches)
    running: R | None = None
    while running is not None or waiting:
        if running is None:  # a batch starts afresh
            running = start(waiting.popleft())
        elif waiting and len(running.sentences) * running.attention.size(-1) < join_below:
            running = join(running, waiting.popleft())
        running = step(running)


def join_greedy(running: GreedyRows, joining: GreedyRows) -> GreedyRows:
    """The rows of `running`, then those of `joining` (before its first step): the step axes
    padded at the end to the longer output, the source axes to the longer source."""
    longest = max(running.tokens.size(1), joining.tokens.size(1))

    def steps_padded(attention: Tensor) -> Tensor:  # (n, T, S) -> (n, longest, S) when kept
        if not attention.size(1):
            return attention
        return F.pad(attention, (0, 0, 0, longest - attention.size(1)))

    return GreedyRows(
        torch.cat([running.sentences, joining.sentences]),
        torch.cat([running.limits, joining.limits]),
        torch.cat([running.previous, joining.previous]),
        torch.cat([running.steps, joining.steps]),
        join_rows(running.tokens, joining.tokens, 0, 1),
        torch.cat([running.scores, joining.scores]),
        join_rows(steps_padded(running.attention), steps_padded(joining.attention), 0, -1),
        running.state.join(joining.state),
    )


def greedy_batches(
    model: Seq2Seq | Ensemble,
    batches: Iterable[SourceBatch],
    keep_attention: bool,
    join_below: int = 0,
) -> list[Hypothesis]:
    """The greedy hypothesis of every sentence of `batches`, in their order (`GreedySearch`),
    the next batch joining the running sentences once they hold fewer than `join_below`
    source tokens (see the module docstring; 0: each batch searches alone)."""
    search = GreedySearch(model, keep_attention)

    def join(running: GreedyRows, batch: SourceBatch) -> GreedyRows:
        return join_greedy(running, search.start(batch))

    run_batches(batches, search.start, search.step, join, join_below)
    return search.finish()


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

    def start(batch: SourceBatch) -> JoinedBeams:
        return JoinedBeams.of(search.start(batch))

    def join(beams: JoinedBeams, batch: SourceBatch) -> JoinedBeams:
        joining = search.step(start(batch))  # its first step alone: one row a sentence to K
        return beams if joining is None else beams.join(joining)

    run_batches(batches, start, search.step, join, join_below)
    return search.finish()
