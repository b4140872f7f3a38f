"""The model's speed tricks, each behind a named seam and each computing exactly what the
plain code beside it in the textbook would; docs/benchmarks.md has what each saves.

- `Dropout`: `nn.Dropout` with its CPU mask drawn from uniform numbers. Torch draws the mask
  with `bernoulli_`, one element at a time; uniform numbers compared with p give the same
  Bernoulli(1 - p) mask in well under half the time, forward and backward. Elsewhere (CUDA)
  torch's own fused dropout is used.
- `copies_of` and `attend_copies`: in beam search, hypotheses that extend one hypothesis by
  several words are copies of its state until their next RNN step. Where the query is that
  state (Bahdanau's q_{t-1}), they attend once per distinct hypothesis and share the result.
  A copy's coverage (`CoverageAttention`) is its original's too: `DecoderState.select` picks
  every row's tensors with the same rows, and the copies end at the same RNN step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Dropout(nn.Dropout):
    """`nn.Dropout` (same arguments, same state), its CPU mask from uniform numbers."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu" or self.inplace:
            return F.dropout(x, self.p, self.training, self.inplace)
        if self.p == 1.0:
            return torch.zeros_like(x)
        # Uniform numbers drawn in fp32 even for a bf16 x (bf16's coarse steps near p would
        # bias the mask), turned in place into the mask already scaled: 1 / (1 - p) or 0.
        mask = torch.rand(x.shape, device=x.device).ge_(self.p).to(x.dtype)
        return x * mask.mul_(1.0 / (1.0 - self.p))


def copies_of(rows: Tensor) -> tuple[Tensor, Tensor] | None:
    """For `rows` (R,) with repeats: the position of each distinct value's first occurrence
    (P,) and which distinct value each position holds (R,); None without repeats."""
    distinct, inverse = rows.unique(return_inverse=True)
    if len(distinct) == len(rows):
        return None
    positions = torch.arange(len(rows), device=rows.device)
    first = torch.full_like(distinct, len(rows)).scatter_reduce_(0, inverse, positions, "amin")
    return first, inverse


def attend_copies(
    attention: Callable[..., tuple[Tensor, Tensor]],
    query: Tensor,
    keys: Tensor,
    mask: Tensor,
    prepared_keys: Tensor,
    copies: tuple[Tensor, Tensor],
    coverage: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`attention(query, keys, mask, prepared_keys, coverage)` for query rows (R, H) (and their
    coverage (R, S), if any) of which `copies` (`copies_of`) says many are copies of one: each
    distinct row attends once, with its sentence's keys (B, S, H), and its copies take its
    result."""
    first, inverse = copies
    sentence = first // (query.size(0) // keys.size(0))  # each hypothesis's sentence
    context, weights = attention(
        query[first],
        keys[sentence],
        mask[sentence],
        prepared_keys[sentence],
        None if coverage is None else coverage[first],
    )
    return context[inverse], weights[inverse]
