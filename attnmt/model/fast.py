"""The fast twins: subclasses of the plain modules that compute the same numbers, faster (the
Dropout twin draws its masks from the same distribution by another route).

Each twin has its plain module's parameters, buffers and state_dict keys; `accelerate.py`
swaps them in when the model is built (`model.fast=true`, the default), the way
`torch.ao.quantization` swaps modules, and leaves the plain modules as the lesson writes them.
Each checks at run time whether its trick applies (the device, the compute type, whether
autograd records) and otherwise runs its plain module's code. docs/benchmarks.md has what
each saves; tests/model/test_fast.py holds each against its plain module, forward and backward.

- `BlockedLinear` (`nn.Linear`): bf16 products on the CPU in rows of a few fixed sizes
  (`blocks.py`), so oneDNN compiles a kernel per size, not one per batch.
- `Dropout` (`nn.Dropout`): its CPU mask drawn from uniform numbers rather than one
  `bernoulli_` per element, the same Bernoulli(1 - p) mask in under half the time.
- `PaddedRNNEncoder` (`RNNEncoder`): on the CPU the RNN over padded sentences instead of packed
  sequences, each direction of each layer as its own call, the reverse one over each sentence
  reversed within its length (`padded_rnn`). torch's CPU RNN then makes every step's input
  product in one product before its loop, which it cannot do for packed sequences; padding
  still never reaches a real position. Under bf16 autocast a GRU direction runs as
  `fused.gru_layer` (its backward written out, its products in blocks of rows), and in fp32
  too where the fused C++ kernels load (`fused.uses_kernels`): with them it is faster than
  torch's GRU, without them slower.
- `FastBahdanauDecoder` (`BahdanauDecoder`) and `FastLuongDecoder` (`LuongDecoder`):
  - the fused teacher-forced loop (Bahdanau, a one-layer GRU with a plain additive, dot,
    scaled dot or bilinear scorer, on the CPU; the default model is one):
    `fused.bahdanau_gru_loop`, one autograd node with its backward through time written out;
  - copy-aware attention in beam search (Bahdanau): hypotheses that extend one hypothesis by
    several words are copies of its state until their next RNN step, and the query is that
    state (q_{t-1}), so each distinct hypothesis attends once and its copies share the result
    (`CopiedState` notes which rows are copies);
  - the bf16 decoding step of a one-layer GRU (both): `fused.gru_step`, its products in
    blocks of rows and its gates in fp32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional as F

from attnmt.model.attention import (
    AdditiveAttention,
    Attention,
    BilinearAttention,
    DotAttention,
    ScaledDotAttention,
)
from attnmt.model.blocks import autocast_blocked, blocked, linear
from attnmt.model.decoder import AttentionDecoder, BahdanauDecoder, LuongDecoder
from attnmt.model.encoder import EncoderOutput, RNNEncoder
from attnmt.model.fused import bahdanau_gru_loop, gru_layer, gru_step, uses_kernels
from attnmt.model.state import DecoderState
from attnmt.vocab import PAD_ID


class BlockedLinear(nn.Linear):
    """`nn.Linear`, its products (forward and backward) in blocks of rows where they run on
    oneDNN: bf16 on the CPU (`blocks.linear`); elsewhere `F.linear`."""

    twin_of = nn.Linear  # int8 decoding quantizes it as one (`attnmt.runtime.quantize`)

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


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
            if (
                isinstance(rnn, nn.GRU)
                and torch.is_grad_enabled()
                and (autocast_blocked(read) or uses_kernels(read))
            ):
                out = gru_layer(read, tuple(weights[f"{name}_l0"] for name in RNN_WEIGHTS))
            else:
                out, _ = functional_call(one_way(read.size(-1)), weights, (read,))
            finals.append(out[rows, last])  # after the sentence's last real position
            states.append(out.gather(1, flip.unsqueeze(-1).expand_as(out)) if direction else out)
        layer_input = torch.cat(states, -1) * real
        if layer < rnn.num_layers - 1 and rnn.dropout and rnn.training:
            layer_input = F.dropout(layer_input, rnn.dropout, training=True)
    return layer_input, torch.cat(finals, -1)


class PaddedRNNEncoder(RNNEncoder):
    """`RNNEncoder`, on the CPU over padded sentences (`padded_rnn`); elsewhere, and with an
    int8 RNN (not an `nn.RNNBase`), over packed sequences, which cuDNN runs in one call."""

    def forward(self, source: Tensor, source_lengths: Tensor) -> EncoderOutput:
        if source.device.type != "cpu" or not isinstance(self.rnn, nn.RNNBase):
            return super().forward(source, source_lengths)
        embedded = self.dropout(self.embedding(source))  # (B, S, E)
        states, top = padded_rnn(self.rnn, embedded, source_lengths, self.one_way)
        return EncoderOutput(self.dropout(states), top, source != PAD_ID)

    def one_way(self, input_size: int) -> nn.RNNBase:
        """A one-layer, one-way RNN of this encoder's kind and width reading `input_size`: it
        lends `padded_rnn` its code, never its weights. Kept by width in a plain attribute (not
        a submodule), so it is never saved; on the meta device: no memory, no draw from the RNG.
        """
        rnns = self.__dict__.setdefault("one_way_rnns", {})
        if input_size not in rnns:
            rnns[input_size] = type(self.rnn)(
                input_size, self.rnn.hidden_size, batch_first=True, device="meta"
            )
        return rnns[input_size]


def copies_of(rows: Tensor) -> tuple[Tensor, Tensor] | None:
    """For `rows` (R,) with repeats: the position of each distinct value's first occurrence
    (P,) and which distinct value each position holds (R,); None without repeats."""
    distinct, inverse = rows.unique(return_inverse=True)
    if len(distinct) == len(rows):
        return None
    positions = torch.arange(len(rows), device=rows.device)
    first = torch.full_like(distinct, len(rows)).scatter_reduce_(0, inverse, positions, "amin")
    return first, inverse


@dataclass
class CopiedState(DecoderState):
    """`DecoderState` that notes which rows `select` copied from one row: the first row of each
    distinct one (P,) and which of those each row is (R,); None when all differ. The copies
    share all of that row's state, coverage included, until the next RNN step."""

    copies: tuple[Tensor, Tensor] | None = None

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> CopiedState:
        return replace(super().select(rows, sentences), copies=copies_of(rows))

    def join(self, other: DecoderState) -> CopiedState:
        joined = super().join(other)
        theirs = other.copies if isinstance(other, CopiedState) else None
        if self.copies is None and theirs is None:
            return replace(joined, copies=None)
        rows, more = self.hidden.size(1), other.hidden.size(1)
        return replace(joined, copies=_join_copies(self.copies, theirs, rows, more, joined.keys))


def _join_copies(
    first: tuple[Tensor, Tensor] | None,
    second: tuple[Tensor, Tensor] | None,
    rows: int,
    more: int,
    like: Tensor,
) -> tuple[Tensor, Tensor]:
    """The `copies` of `rows` rows whose copies are `first`, then `more` rows whose copies are
    `second` (None: every row distinct); on `like`'s device."""

    def whole(copies: tuple[Tensor, Tensor] | None, count: int) -> tuple[Tensor, Tensor]:
        every = torch.arange(count, device=like.device)
        return (every, every) if copies is None else copies

    (a_first, a_inverse), (b_first, b_inverse) = whole(first, rows), whole(second, more)
    return torch.cat([a_first, b_first + rows]), torch.cat([a_inverse, b_inverse + len(a_first)])


def attend_copies(
    attention: Callable[..., tuple[Tensor, Tensor]],
    query: Tensor,
    state: CopiedState,
) -> tuple[Tensor, Tensor]:
    """`attention(query, keys, mask, prepared_keys, coverage)` for query rows (R, H) of which
    `state.copies` says many are copies of one: each distinct row attends once, with its
    sentence's keys (B, S, H), and its copies take its result."""
    first, inverse = state.copies
    sentence = first // (query.size(0) // state.keys.size(0))  # each hypothesis's sentence
    context, weights = attention(
        query[first],
        state.keys[sentence],
        state.mask[sentence],
        state.prepared_keys[sentence],
        None if state.coverage is None else state.coverage[first],
    )
    return context[inverse], weights[inverse]


class _GRUDecodingStep(AttentionDecoder):
    """The bf16 decoding step of a one-layer GRU as `fused.gru_step`: products in blocks of
    rows (every search step has its own row count), gates in fp32; otherwise the RNN's step."""

    def rnn_step(self, rnn_input: Tensor, state: DecoderState) -> DecoderState:
        gru = type(self.rnn) is nn.GRU and self.rnn.num_layers == 1
        if not (gru and blocked(rnn_input) and not torch.is_grad_enabled()):
            return super().rnn_step(rnn_input, state)
        hidden = gru_step(rnn_input, state.hidden[0], self.rnn).unsqueeze(0)
        return replace(state, hidden=hidden, cell=None)


# The scorers `fused.bahdanau_gru_loop` computes (exactly these types: a subclass may score
# otherwise, as coverage does), and how each gives the loop its weights: (U, v, divisor).
LOOP_SCORERS: dict[type[Attention], Callable[[Attention], tuple]] = {
    AdditiveAttention: lambda scorer: (scorer.U.weight, scorer.v.weight, 1.0),
    DotAttention: lambda scorer: (None, None, 1.0),
    ScaledDotAttention: lambda scorer: (None, None, scorer.divisor),
    BilinearAttention: lambda scorer: (scorer.W.weight, None, 1.0),
}


def _loop_scorer(scorer: Attention) -> tuple[Tensor | None, Tensor | None, float]:
    """`scorer`'s weights as `fused.bahdanau_gru_loop` takes them."""
    return LOOP_SCORERS[type(scorer)](scorer)


class FastBahdanauDecoder(_GRUDecodingStep, BahdanauDecoder):
    """`BahdanauDecoder` with the fused teacher-forced loop, copy-aware attention and the bf16
    GRU decoding step (see the module's docstring)."""

    def init_state(self, encoder_output: EncoderOutput, keys: Tensor) -> DecoderState:
        plain = super().init_state(encoder_output, keys)
        return CopiedState(**{field.name: getattr(plain, field.name) for field in fields(plain)})

    def attend(self, query: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        if not isinstance(state, CopiedState) or state.copies is None:
            return super().attend(query, state)
        context, weights = attend_copies(self.attention, query, state)
        if state.coverage is not None:
            state = replace(state, coverage=state.coverage + weights)  # c_i += a_i
        return context, weights, state

    def rnn_step(self, rnn_input: Tensor, state: DecoderState) -> DecoderState:
        state = super().rnn_step(rnn_input, state)
        if isinstance(state, CopiedState):
            state = replace(state, copies=None)  # the rows differ from now on
        return state

    def forward(self, previous: Tensor, state: DecoderState) -> tuple[Tensor, Tensor]:
        if not self.runs_fused(state):
            return super().forward(previous, state)
        embedded = self.dropout(self.embedding(previous))  # (B, T, E)
        rnn = self.rnn
        queries, contexts, weights = bahdanau_gru_loop(
            embedded,
            state.hidden[0],
            state.keys,
            state.prepared_keys,
            state.mask,
            (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0),
            _loop_scorer(self.attention),
        )  # q_t (B, T, H), context_t (B, T, H), a (B, T, S)
        return self.features(torch.cat([queries, contexts, embedded], -1)), weights

    def runs_fused(self, state: DecoderState) -> bool:
        """Whether teacher forcing takes `fused.bahdanau_gru_loop`: on the CPU, for a one-layer
        GRU with a bias and a plain scorer the loop computes (`LOOP_SCORERS`), no window."""
        rnn = self.rnn
        return (
            state.keys.device.type == "cpu"
            and type(self.attention) in LOOP_SCORERS
            and self.attention.window is None
            and type(rnn) is nn.GRU
            and rnn.num_layers == 1
            and rnn.bias
            and getattr(state, "copies", None) is None
        )


class FastLuongDecoder(_GRUDecodingStep, LuongDecoder):
    """`LuongDecoder` with the bf16 GRU decoding step. Its query is the new state, so beam
    hypotheses never attend as copies, and its all-steps teacher forcing is already fast."""
