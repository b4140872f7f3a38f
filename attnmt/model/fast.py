"""The model's speed tricks, each behind a named seam and each computing exactly what the
plain code beside it in the textbook would; docs/benchmarks.md has what each saves.

- `Dropout`: `nn.Dropout` with its CPU mask drawn from uniform numbers. Torch draws the mask
  with `bernoulli_`, one element at a time; uniform numbers compared with p give the same
  Bernoulli(1 - p) mask in well under half the time, forward and backward. Elsewhere (CUDA)
  torch's own fused dropout is used.
- `padded_rnn`: the encoder's RNN over padded sentences instead of packed sequences, each
  direction of each layer as its own call, the reverse one over each sentence reversed within
  its length. torch's CPU RNN then makes every step's input product in one product before its
  loop, which it cannot do for packed sequences; padding still never reaches a real position.
  Training under bf16 autocast runs a GRU's directions as `fused.gru_layer` (its backward
  written out, its products in blocks of rows); in fp32, torch's GRU is as fast.
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
from torch.func import functional_call
from torch.nn import functional as F

from attnmt.model.blocks import autocast_blocked
from attnmt.model.fused import gru_layer


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


RNN_WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def padded_rnn(
    rnn: nn.RNNBase, inputs: Tensor, lengths: Tensor, one_way: Callable[[int], nn.RNNBase]
) -> tuple[Tensor, Tensor]:
    """What `rnn` (batch-first, any layers and directions) computes over the packed sentences
    of `inputs` (B, S, I) with `lengths` (B,): the top layer's states (B, S, D), zero at
    padding, and its last state of each direction side by side (B, D). Each direction of each
    layer runs over the whole padded batch as `one_way(input width)`, a one-layer, one-way RNN
    of the same kind whose weights are swapped for that direction's; the reverse direction
    reads each sentence reversed within its length, so padding comes after the real positions
    in both directions and never reaches them. Between layers, `rnn`'s dropout as it applies
    it."""
    batch, steps = inputs.shape[:2]
    positions = torch.arange(steps, device=inputs.device)
    lengths = lengths.to(inputs.device)
    real = (positions < lengths[:, None]).unsqueeze(-1)  # (B, S, 1)
    # position t of a reversed sentence reads position length-1-t; padding stays; its own inverse
    flip = torch.where(real[..., 0], lengths[:, None] - 1 - positions, positions)  # (B, S)
    rows, last = torch.arange(batch, device=inputs.device), lengths - 1
    directions = 2 if rnn.bidirectional else 1
    layer_input = inputs
    for layer in range(rnn.num_layers):
        states, finals = [], []
        for direction in range(directions):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            weights = {f"{name}_l0": getattr(rnn, name + suffix) for name in RNN_WEIGHTS}
            read = layer_input
            if direction:  # each sentence reversed within its length
                read = read.gather(1, flip.unsqueeze(-1).expand(-1, -1, read.size(-1)))
            if isinstance(rnn, nn.GRU) and torch.is_grad_enabled() and autocast_blocked(read):
                out = gru_layer(read, tuple(weights[f"{name}_l0"] for name in RNN_WEIGHTS))
            else:
                out, _ = functional_call(one_way(read.size(-1)), weights, (read,))
            finals.append(out[rows, last])  # after the sentence's last real position
            states.append(out.gather(1, flip.unsqueeze(-1).expand_as(out)) if direction else out)
        layer_input = torch.cat(states, -1) * real
        if layer < rnn.num_layers - 1 and rnn.dropout and rnn.training:
            layer_input = F.dropout(layer_input, rnn.dropout, training=True)
    return layer_input, torch.cat(finals, -1)
