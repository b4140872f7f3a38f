"""The model's speed tricks, each behind a named seam and each computing exactly what the
plain code beside it in the textbook would; docs/benchmarks.md has what each saves.

- `Dropout`: `nn.Dropout` with its CPU mask drawn from uniform numbers. Torch draws the mask
  with `bernoulli_`, one element at a time; uniform numbers compared with p give the same
  Bernoulli(1 - p) mask in well under half the time, forward and backward. Elsewhere (CUDA)
  torch's own fused dropout is used.
- `SplitInputGru`: under teacher forcing the embedding's share of the decoder RNN's input
  product, W_e e_t, is known for every step before the loop: one (B*T, E) x (E, 3H) product
  there instead of T small ones, and only the rest of the input (the context, or Luong's
  fed-back vector) is multiplied inside the loop. The gates are torch's GRU equations, so the
  step computes what `nn.GRU`'s does.
- `padded_rnn`: the encoder's RNN over padded sentences instead of packed sequences, each
  direction of each layer as its own call, the reverse one over each sentence reversed within
  its length. torch's CPU RNN then makes every step's input product in one product before its
  loop, which it cannot do for packed sequences; padding still never reaches a real position.
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


class SplitInputGru:
    """A one-layer `nn.GRU` stepped over a teacher-forced target whose input at step t is
    [e_t; rest_t], e_t the embedding of the previous word: the embeddings' share of the input
    product, W_e e_t + b_ih, is made here for all T steps in one (B*T, E) x (E, 3H) product,
    and each step (`__call__`) multiplies only rest_t (the context, or Luong's fed-back vector)
    and the hidden state. The weights the loop multiplies are cast here, once, when autocast is
    on, rather than at every step. The gates are torch's GRU equations (r, z, n):
        r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r * h_n),
        h' = (1 - z) * n + z * h,   [i_r; i_z; i_n] = W_ih x + b_ih, [h_r; h_z; h_n] = W_hh h + b_hh
    """

    def __init__(self, rnn: nn.GRU, embedded: Tensor) -> None:
        width = embedded.size(-1)  # E
        weight_e, weight_rest = rnn.weight_ih_l0.split([width, rnn.input_size - width], 1)
        # unbind: one backward for all T steps, where each slice's would zero-fill (B, T, 3H)
        self.shares = F.linear(embedded, weight_e, rnn.bias_ih_l0).unbind(1)
        device = embedded.device.type
        low = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        self.weight_rest = weight_rest if low is None else weight_rest.to(low)
        self.weight_hh = rnn.weight_hh_l0 if low is None else rnn.weight_hh_l0.to(low)
        self.bias_hh = rnn.bias_hh_l0

    def __call__(self, step: int, rest: Tensor, hidden: Tensor) -> Tensor:
        """Step `step`'s next hidden state (1, B, H) from rest_t (B, I) and hidden (1, B, H)."""
        previous = hidden[0]
        input_gates = self.shares[step] + F.linear(rest, self.weight_rest)
        hidden_gates = F.linear(previous, self.weight_hh, self.bias_hh)
        i_r, i_z, i_n = input_gates.chunk(3, -1)
        h_r, h_z, h_n = hidden_gates.chunk(3, -1)
        reset = torch.sigmoid(i_r + h_r)
        update = torch.sigmoid(i_z + h_z)
        new = torch.tanh(i_n + reset * h_n)
        return (new + update * (previous - new)).unsqueeze(0)


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
            index = flip.unsqueeze(-1).expand(-1, -1, layer_input.size(-1))
            read = layer_input.gather(1, index) if direction else layer_input
            out, _ = functional_call(one_way(read.size(-1)), weights, (read,))
            finals.append(out[rows, last])  # after the sentence's last real position
            states.append(out.gather(1, flip.unsqueeze(-1).expand_as(out)) if direction else out)
        layer_input = torch.cat(states, -1) * real
        if layer < rnn.num_layers - 1 and rnn.dropout and rnn.training:
            layer_input = F.dropout(layer_input, rnn.dropout, training=True)
    return layer_input, torch.cat(finals, -1)
