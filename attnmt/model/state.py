"""The decoder's state between steps, which search reorders, grows and shrinks.

Shapes: R hypothesis rows, B sentences, S source length, H decoder hidden width, L decoder
layers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor
from torch.nn import functional as F


@dataclass
class DecoderState:
    """Everything a decoding step needs besides the previous word; batch-first except hidden.

    The hidden state has a row per hypothesis (R), the keys one per sentence (B): beam search's
    hypotheses of a sentence are consecutive rows and share its keys (R = B * K; R = B
    otherwise).
    """

    hidden: Tensor  # (L, R, H)
    cell: Tensor | None  # (L, R, H), LSTM only
    keys: Tensor  # (B, S, H)
    prepared_keys: Tensor  # (B, S, *), the scorer's query-independent part, once per sentence
    mask: Tensor  # (B, S)
    feed: Tensor | None  # (R, H), Luong input feeding: the previous attentional vector
    # (R, S), for a scorer that reads it: the sum of each hypothesis's past attention weights.
    coverage: Tensor | None = None

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> DecoderState:
        """The states of hypothesis `rows` (R'), in that order, and, when given, of `sentences`
        (B'): reorders, grows or shrinks. Each sentence's rows must stay consecutive; without
        `sentences` the sentences stay as they are (beam search moving and multiplying
        hypotheses within each sentence).
        """

        def pick(x: Tensor | None, index: Tensor, dim: int = 0) -> Tensor | None:
            return None if x is None else x.index_select(dim, index)

        keys, prepared_keys, mask = self.keys, self.prepared_keys, self.mask
        if sentences is not None:
            keys, prepared_keys = pick(keys, sentences), pick(prepared_keys, sentences)
            mask = pick(mask, sentences)
        return replace(
            self,
            hidden=pick(self.hidden, rows, 1),
            cell=pick(self.cell, rows, 1),
            keys=keys,
            prepared_keys=prepared_keys,
            mask=mask,
            feed=pick(self.feed, rows),
            coverage=pick(self.coverage, rows),
        )

    def join(self, other: DecoderState) -> DecoderState:
        """This state's rows and sentences, then `other`'s (a batch joining a running search;
        both with the same rows per sentence): the per-sentence tensors padded at the end to
        the longer source, the new positions masked out, so that no row attends to them."""
        return replace(
            self,
            hidden=join_rows(self.hidden, other.hidden, 1),
            cell=join_rows(self.cell, other.cell, 1),
            keys=join_rows(self.keys, other.keys, 0, 1),
            prepared_keys=join_rows(self.prepared_keys, other.prepared_keys, 0, 1),
            mask=join_rows(self.mask, other.mask, 0, 1),
            feed=join_rows(self.feed, other.feed, 0),
            coverage=join_rows(self.coverage, other.coverage, 0, 1),
        )


def join_rows(
    x: Tensor | None, y: Tensor | None, dim: int, source_dim: int | None = None
) -> Tensor | None:
    """x then y along `dim` (None where either is absent); with `source_dim`, both first
    padded with zeros (False) at the end of that axis to the longer of the two."""
    if x is None or y is None:
        return None
    if source_dim is not None:
        length = max(x.size(source_dim), y.size(source_dim))

        def pad(t: Tensor) -> Tensor:
            after = (0, 0) * (t.dim() - 1 - source_dim % t.dim())
            return F.pad(t, (*after, 0, length - t.size(source_dim)))

        x, y = pad(x), pad(y)
    return torch.cat([x, y], dim)
