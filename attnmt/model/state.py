"""The decoder's state between steps, which search reorders, grows and shrinks.

Shapes: R hypothesis rows, B sentences, S source length, H decoder hidden width, L decoder
layers.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from attnmt.model.fast import copies_of


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
    # Rows that are copies of one row, until the next RNN step changes them: the first row of
    # each distinct one (P,) and which of those each row is (R,); None when all differ.
    copies: tuple[Tensor, Tensor] | None = None

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> DecoderState:
        """The states of hypothesis `rows` (R'), in that order, and, when given, of `sentences`
        (B'): reorders, grows or shrinks. Each sentence's rows must stay consecutive; without
        `sentences` the sentences stay as they are (beam search moving and multiplying
        hypotheses within each sentence). A row picked more than once is noted in `copies`:
        its copies share all of its row state, coverage included.
        """

        def pick(x: Tensor | None, index: Tensor, dim: int = 0) -> Tensor | None:
            return None if x is None else x.index_select(dim, index)

        keys, prepared_keys, mask = self.keys, self.prepared_keys, self.mask
        if sentences is not None:
            keys, prepared_keys = pick(keys, sentences), pick(prepared_keys, sentences)
            mask = pick(mask, sentences)
        return DecoderState(
            pick(self.hidden, rows, 1),
            pick(self.cell, rows, 1),
            keys,
            prepared_keys,
            mask,
            pick(self.feed, rows),
            pick(self.coverage, rows),
            copies_of(rows),
        )
