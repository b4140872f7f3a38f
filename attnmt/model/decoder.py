"""The attention decoders: Bahdanau (attend, then step) and Luong (step, then attend).

Both read the keys (encoder states projected to the decoder width, see `seq2seq.py`) and run one
RNN step per target word. `forward` is teacher-forced over the whole target; `step` is the
one-step API, with a `DecoderState` (`state.py`) that search can reorder and grow; search calls
`step_features` and applies `logits` itself.

Shapes: B batch, S source length, T target length, E embedding width, H decoder hidden width
(= key width), L decoder layers, V target vocabulary.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor, nn

from attnmt.errors import ConfigError
from attnmt.model.attention import Attention
from attnmt.model.encoder import EncoderOutput, check_rnn_sizes, rnn_class
from attnmt.model.state import DecoderState
from attnmt.vocab import PAD_ID


class Bridge(nn.Module):
    """The decoder's initial state from the encoder, for any pair of shapes.

    init="final": tanh(W f), f the encoder's last states; init="mean": tanh(W m), m the mean of
    the encoder states over real positions; init="zeros": zeros. W maps the encoder width to all
    L layers (and the LSTM cell), so layer counts, directions and cell types need not match.
    """

    MODES = ("final", "mean", "zeros")

    def __init__(
        self, init: str, encoder_dim: int, hidden_size: int, num_layers: int, with_cell: bool
    ) -> None:
        super().__init__()
        if init not in self.MODES:
            raise ConfigError(f"decoder.init={init!r}: valid values are {', '.join(self.MODES)}")
        self.init, self.num_layers, self.hidden_size = init, num_layers, hidden_size
        self.parts = 2 if with_cell else 1
        if init != "zeros":
            self.W = nn.Linear(encoder_dim, self.parts * num_layers * hidden_size)

    def forward(self, encoder_output: EncoderOutput) -> tuple[Tensor, Tensor | None]:
        """hidden (L, B, H) and cell (L, B, H) or None."""
        final, states, mask = encoder_output.final, encoder_output.states, encoder_output.mask
        batch = final.size(0)
        if self.init == "zeros":
            start = final.new_zeros(batch, self.parts * self.num_layers * self.hidden_size)
        else:
            source = final
            if self.init == "mean":
                real = mask.unsqueeze(-1).to(states.dtype)  # (B, S, 1)
                source = (states * real).sum(1) / real.sum(1)  # (B, D)
            start = torch.tanh(self.W(source))
        parts = start.view(batch, self.parts, self.num_layers, self.hidden_size).permute(1, 2, 0, 3)
        return parts[0].contiguous(), parts[1].contiguous() if self.parts == 2 else None


class AttentionDecoder(nn.Module):
    """What both decoders share: embeddings, the RNN, the bridge, the output layer, the loops."""

    def __init__(
        self,
        vocab_size: int,
        attention: Attention,
        encoder_dim: int,
        rnn_input_size: int,
        output_input_size: int,
        rnn_type: str,
        embedding_dim: int,
        hidden_size: int,
        num_layers: int,
        dropout: float,
        init: str,
        tie_embeddings: bool,
    ) -> None:
        super().__init__()
        check_rnn_sizes("decoder", embedding_dim, hidden_size, num_layers, dropout)
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)
        self.attention = attention
        self.rnn = rnn_class(rnn_type, "decoder.rnn_type")(
            rnn_input_size,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.bridge = Bridge(init, encoder_dim, hidden_size, num_layers, rnn_type == "lstm")
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(output_input_size, vocab_size)
        if tie_embeddings:
            if output_input_size != embedding_dim:
                raise ConfigError(
                    f"decoder.tie_embeddings needs the output layer's input ({output_input_size}"
                    f", decoder.hidden_size) to equal decoder.embedding_dim ({embedding_dim})"
                )
            self.output.weight = self.embedding.weight

    def init_state(self, encoder_output: EncoderOutput, keys: Tensor) -> DecoderState:
        """The state before the first target word; keys (B, S, H) are the projected states."""
        hidden, cell = self.bridge(encoder_output)
        prepared = self.attention.prepare_keys(keys)
        feed = keys.new_zeros(keys.size(0), self.hidden_size)
        coverage = None
        if self.attention.reads_coverage:  # nothing attended yet; fp32, a sum over many steps
            coverage = torch.zeros(keys.shape[:2], device=keys.device)  # (B, S)
        return DecoderState(hidden, cell, keys, prepared, encoder_output.mask, feed, coverage)

    def rnn_step(self, rnn_input: Tensor, state: DecoderState) -> DecoderState:
        """One step of the (stacked) RNN: rnn_input (B, in) -> new hidden (and cell)."""
        previous = state.hidden if state.cell is None else (state.hidden, state.cell)
        _, new = self.rnn(rnn_input.unsqueeze(1), previous)
        hidden, cell = new if isinstance(new, tuple) else (new, None)
        return replace(state, hidden=hidden, cell=cell)

    def attend(self, query: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        """context = sum_i a_i h_i (B, H) and the weights a (B, S) for query q (B, H), and the
        state with a added to its coverage, c_i + a_i (for a scorer that reads coverage)."""
        context, weights = self.attention(
            query, state.keys, state.mask, state.prepared_keys, state.coverage
        )
        if state.coverage is not None:
            state = replace(state, coverage=state.coverage + weights)  # c_i += a_i
        return context, weights, state

    def recur(self, embedded: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        """The recurrent part of one target step: embedded y_{t-1} (B, E) -> what the output
        features are made of (B, P), the attention weights (B, S) and the next state."""
        raise NotImplementedError

    def features(self, parts: Tensor) -> Tensor:
        """Output features (..., F) from `recur`'s parts (..., P), position by position: what
        feeds no later step, so teacher forcing computes it for all T steps at once."""
        return parts

    def features_step(
        self, embedded: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, DecoderState]:
        """One target step: embedded y_{t-1} (B, E) -> output features, weights (B, S), state."""
        parts, weights, state = self.recur(embedded, state)
        return self.features(parts), weights, state

    def step_features(
        self, previous: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, DecoderState]:
        """previous words (B,) -> output features (B, F), attention weights (B, S), the next
        state: `step` short of the output layer, for a search that applies `logits` itself
        (`attnmt.infer.search`)."""
        return self.features_step(self.dropout(self.embedding(previous)), state)

    def step(self, previous: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        """previous words (B,) -> logits (B, V), attention weights (B, S), the next state."""
        features, weights, state = self.step_features(previous, state)
        return self.logits(features), weights, state

    def forward(self, previous: Tensor, state: DecoderState) -> tuple[Tensor, Tensor]:
        """Teacher forcing: previous words (B, T) -> features (B, T, F), weights (B, T, S).

        `logits(features)` turns (any selection of) the features into logits, so the loss can
        skip padding.
        """
        embedded = self.dropout(self.embedding(previous))  # (B, T, E)
        parts, weights = [], []
        # unbind: one backward for all T steps, where each slice's would zero-fill (B, T, E)
        for embedded_t in embedded.unbind(1):
            part, weight, state = self.recur(embedded_t, state)
            parts.append(part)
            weights.append(weight)
        # One product over all B x T positions rather than T small ones.
        return self.features(torch.stack(parts, 1)), torch.stack(weights, 1)

    def logits(self, features: Tensor) -> Tensor:
        """features (..., F) -> logits (..., V)."""
        return self.output(self.output_inputs(features))

    def output_inputs(self, features: Tensor) -> Tensor:
        """What the output layer multiplies: the features after dropout (..., F)."""
        return self.dropout(features)

    def output_weights(self) -> tuple[Tensor, Tensor]:
        """The output layer's weight (V, F) and bias (V,): `logits = inputs W^T + b`, for a
        loss that computes the product itself (`attnmt.train.loss`)."""
        return self.output.weight, self.output.bias

    def compile_step(self) -> None:
        """Run the recurrent step through `torch.compile` (once for any batch size): its many
        small element-wise ops become a few compiled kernels. For CUDA, where each costs a launch.
        """
        self.recur = torch.compile(self.recur, dynamic=True)  # type: ignore[method-assign]


class BahdanauDecoder(AttentionDecoder):
    """Attend with the previous state, then step (Bahdanau et al., 2015).

    context_t = attend(q_{t-1}, H)
    q_t = RNN([embedding(y_{t-1}); context_t], q_{t-1})   (embedding left out unless
                                                           feed_prev_output)
    features_t = tanh(W_o [q_t; context_t; embedding(y_{t-1})])       (width E)
    logits_t = V_o features_t
    """

    def __init__(
        self,
        vocab_size: int,
        attention: Attention,
        encoder_dim: int,
        embedding_dim: int,
        hidden_size: int,
        feed_prev_output: bool,
        **common: object,
    ) -> None:
        self.feed_prev_output = feed_prev_output
        rnn_input = (embedding_dim if feed_prev_output else 0) + hidden_size
        super().__init__(
            vocab_size,
            attention,
            encoder_dim,
            rnn_input,
            embedding_dim,
            embedding_dim=embedding_dim,
            hidden_size=hidden_size,
            **common,
        )
        self.W_o = nn.Linear(2 * hidden_size + embedding_dim, embedding_dim)

    def recur(self, embedded: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        context, weights, state = self.attend(state.hidden[-1], state)  # query q_{t-1}: (B, H)
        rnn_input = torch.cat([embedded, context], -1) if self.feed_prev_output else context
        state = self.rnn_step(rnn_input, state)
        return torch.cat([state.hidden[-1], context, embedded], -1), weights, state

    def features(self, parts: Tensor) -> Tensor:
        # parts: [q_t; context_t; embedding(y_{t-1})]
        return torch.tanh(self.W_o(parts))


class LuongDecoder(AttentionDecoder):
    """Step, then attend with the new state (Luong et al., 2015).

    q_t = RNN([embedding(y_{t-1}); attentional_{t-1}], q_{t-1})   (input feeding; without
                                                                   it, the embedding alone)
    context_t = attend(q_t, H)
    attentional_t = tanh(W_c [context_t; q_t])                    (width H)
    logits_t = V_o attentional_t
    """

    def __init__(
        self,
        vocab_size: int,
        attention: Attention,
        encoder_dim: int,
        embedding_dim: int,
        hidden_size: int,
        input_feeding: bool,
        **common: object,
    ) -> None:
        self.input_feeding = input_feeding
        rnn_input = embedding_dim + (hidden_size if input_feeding else 0)
        super().__init__(
            vocab_size,
            attention,
            encoder_dim,
            rnn_input,
            hidden_size,
            embedding_dim=embedding_dim,
            hidden_size=hidden_size,
            **common,
        )
        self.W_c = nn.Linear(2 * hidden_size, hidden_size, bias=False)

    def forward(self, previous: Tensor, state: DecoderState) -> tuple[Tensor, Tensor]:
        """Teacher forcing: previous words (B, T) -> features (B, T, H), weights (B, T, S).

        Without input feeding no step needs the one before it but through the RNN, so all T
        steps go at once: one RNN call over the whole target, then every step's attention as
        one batched product, (B, T, S); the same numbers as the step loop, which decoding (one
        word at a time), input feeding and coverage (a running sum of past weights) still use.
        """
        if self.input_feeding or self.attention.reads_coverage:
            return super().forward(previous, state)
        embedded = self.dropout(self.embedding(previous))  # (B, T, E)
        start = state.hidden if state.cell is None else (state.hidden, state.cell)
        queries, _ = self.rnn(embedded, start)  # q_t of the top layer: (B, T, H)
        batch, steps, width = queries.shape
        # The T queries of a sentence attend over its keys as beam search's G queries do.
        context, weights = self.attention(
            queries.reshape(batch * steps, width), state.keys, state.mask, state.prepared_keys
        )  # (B*T, H), (B*T, S)
        context = context.view(batch, steps, -1)
        attentional = torch.tanh(self.W_c(torch.cat([context, queries], -1)))
        return attentional, weights.view(batch, steps, -1)

    def recur(self, embedded: Tensor, state: DecoderState) -> tuple[Tensor, Tensor, DecoderState]:
        # The attentional vector feeds the next step (input feeding): made here, each step.
        rnn_input = torch.cat([embedded, state.feed], -1) if self.input_feeding else embedded
        state = self.rnn_step(rnn_input, state)
        query = state.hidden[-1]  # q_t: (B, H)
        context, weights, state = self.attend(query, state)
        attentional = torch.tanh(self.W_c(torch.cat([context, query], -1)))  # (B, H)
        return attentional, weights, replace(state, feed=self.dropout(attentional))
