"""Inference's speed tricks, each behind a named seam and each giving exactly the output of the
plain code it stands for; docs/benchmarks.md has what each saves.

- `row_top_k`: `topk` over a wide vocabulary row (or over all of a sentence's beams' rows,
  each shifted by its beam's log P), ranked in blocks: faster on CPU.
- `pick_log_probs`: a step's logits and log-probabilities made and reduced a block of rows
  (or of sentences) at a time.
- `once_per_distinct`: a block of input that repeats a sentence searches it once; search is
  deterministic and a sentence's result does not depend on the others in its batch, so each
  repeat gets a copy of the first one's hypotheses.

(The model's own tricks, such as attending once for copied beam hypotheses, are in
`attnmt.model.fast`; batches joining a running greedy or beam search, so that a batch's last
sentences do not step on alone, in `attnmt.infer.batches`.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor, nn
from torch.ao.nn.quantized import dynamic as quantized_dynamic

from attnmt.infer.hypothesis import Hypothesis


def row_top_k(values: Tensor, k: int, shifts: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """`values.topk(k, dim=-1)` of a wide (n, V) tensor, ranked in blocks: the same values
    (equal values may come in another order), and faster than `topk` on CPU for rows of
    thousands of words (docs/benchmarks.md has the measurement).

    For values (n, W, V) and shifts (n, W): the k best shifts[s, w] + values[s, w, v] over
    all (w, v) of each s, and their flat indices w * V + v, as
    `(values + shifts[..., None]).view(n, -1).topk(k)` would give them (a beam's log P plus
    its words' log P), with only the sums it ranks formed.

    Cut each row into blocks of about 100. The k blocks with the best (shifted) maxima hold
    the k best values: their maxima are k values that nothing in another block beats. So rank
    the block maxima, then only the values of those k blocks.
    """
    if values.dim() == 2:
        values = values.unsqueeze(1)
    n, width, vocab = values.shape
    divisors = (b for b in range(40, 257) if vocab % b == 0 and vocab // b * width >= k)
    block = min(divisors, key=lambda b: abs(b - 100), default=None)
    if block is None:  # no block size fits this width: rank whole rows
        every = values if shifts is None else values + shifts.unsqueeze(-1)
        return every.reshape(n, -1).topk(k, dim=-1)
    per_row = vocab // block  # blocks in each row of V
    maxima = values.view(n, width, per_row, block).amax(-1)  # (n, W, V / block)
    if shifts is not None:
        maxima = maxima + shifts.unsqueeze(-1)
    best_blocks = maxima.view(n, width * per_row).topk(k, dim=-1).indices  # (n, k)
    rows = torch.arange(n, device=values.device).unsqueeze(1) * (width * per_row) + best_blocks
    blocks = values.reshape(-1, block)
    candidates = blocks.index_select(0, rows.flatten()).view(n, k, block)
    if shifts is not None:
        candidates = candidates + shifts.gather(1, best_blocks // per_row).unsqueeze(-1)
    top, at = candidates.view(n, k * block).topk(k, dim=-1)
    return top, best_blocks.gather(1, at // block) * block + at % block


# Rows per block in `pick_log_probs`: 512 rows of a 4,000-piece vocabulary are 8 MB of fp32.
LOG_PROB_ROWS = 512


def pick_log_probs(
    inputs: Tensor,
    pick: Callable[..., tuple[Tensor, ...]],
    to_logits: Callable[[Tensor], Tensor] | None = None,
    rows: int | None = LOG_PROB_ROWS,
    beside: Tensor | None = None,
) -> tuple[Tensor, ...]:
    """`pick(to_logits(inputs).float().log_softmax(-1))` for inputs (n, *) and a `pick` that
    reduces each row on its own to tensors of n rows (a max, a top-k), in blocks of at most
    `rows` rows (a row: inputs[i], a sentence's beams for inputs (n, W, F)) and of even size
    (None: all at once); `to_logits` is the output layer (None: the inputs are the logits).
    `beside` (n, *), if given, is cut into the same blocks and
    each block of it passed to `pick` after the log-probabilities. Faster on CPU: a whole
    step's logits, their fp32 copy and log-probabilities (rows x vocabulary, tens of MB each)
    would each pass through memory, where a block's stay in the cache (docs/benchmarks.md has
    the measurement).

    The values are those of the whole step up to the product's rounding: a product's kernel,
    and so its last bits, may depend on how many rows it has (MKL's fp32 one does for a few
    rows, hence blocks of even size, never a small last one), and an int8 layer's scale on
    all of them (`block_rows` keeps such a layer whole)."""

    def picked(block: Tensor, *more: Tensor) -> tuple[Tensor, ...]:
        logits = block if to_logits is None else to_logits(block)
        return pick(logits.float().log_softmax(-1), *more)

    extra = () if beside is None else (beside,)
    if rows is None or len(inputs) <= rows:
        return picked(inputs, *extra)
    parts = -(-len(inputs) // rows)
    split = zip(inputs.tensor_split(parts), *(x.tensor_split(parts) for x in extra), strict=True)
    found = [picked(*blocks) for blocks in split]
    return tuple(torch.cat(column) for column in zip(*found, strict=True))


def block_rows(decoder: nn.Module, device: torch.device) -> int | None:
    """`pick_log_probs`'s rows per block for the steps of `decoder` on `device`: LOG_PROB_ROWS
    on CPU, whose cache the blocks are for; None (the whole step at once) elsewhere, and where
    the output layer is int8 (`quantize=int8`), which scales its input by the range of all the
    rows of a call, so that blocks would change the logits."""
    output = getattr(decoder, "output", None)  # an ensemble's members make their own logits
    if device.type != "cpu" or isinstance(output, quantized_dynamic.Linear):
        return None
    return LOG_PROB_ROWS


def copy_hypothesis(hypothesis: Hypothesis) -> Hypothesis:
    """A copy that shares nothing a caller could change with the original."""
    weights = hypothesis.attention
    return replace(
        hypothesis, ids=list(hypothesis.ids), attention=None if weights is None else weights.clone()
    )


def once_per_distinct(
    sources: Sequence[np.ndarray],
    search: Callable[[Sequence[np.ndarray]], list[list[Hypothesis]]],
) -> list[list[Hypothesis]]:
    """`search(sources)`, with each distinct source searched once and its repeats given
    copies of its hypotheses."""
    firsts: dict[tuple[int, ...], int] = {}  # each distinct source -> its index in `distinct`
    where = [firsts.setdefault(tuple(s.tolist()), len(firsts)) for s in sources]
    if len(firsts) == len(sources):
        return search(sources)
    found = search([np.asarray(ids, dtype=np.int64) for ids in firsts])
    return [[copy_hypothesis(h) for h in found[i]] for i in where]
