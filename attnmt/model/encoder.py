"""The RNN encoder: source tokens -> encoder states H = [h_1..h_n] and a final state.

Shapes: B batch, S source length, E embedding width, D output width (hidden x directions).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.config import in_range
from attnmt.errors import ConfigError
from attnmt.vocab import PAD_ID

RNN_TYPES: dict[str, type[nn.RNNBase]] = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}


def rnn_class(rnn_type: str, key: str) -> type[nn.RNNBase]:
    """The torch RNN class of `rnn_type`; `key` is the config key that set it."""
    if rnn_type not in RNN_TYPES:
        raise ConfigError(f"{key}={rnn_type!r}: valid types are {', '.join(RNN_TYPES)}")
    return RNN_TYPES[rnn_type]


MAX_WIDTH = 4096  # embedding and hidden sizes beyond it would not fit in memory as weights


def check_rnn_sizes(
    group: str, embedding_dim: int, hidden_size: int, num_layers: int, dropout: float
) -> None:
    """Refuse sizes an RNN of config group `group` cannot take, naming the key."""
    in_range(f"{group}.embedding_dim", embedding_dim, 1, MAX_WIDTH)
    in_range(f"{group}.hidden_size", hidden_size, 1, MAX_WIDTH)
    in_range(f"{group}.num_layers", num_layers, 1, 32)
    in_range(f"{group}.dropout", dropout, 0.0, 0.99)


@dataclass
class EncoderOutput:
    """What the decoder needs from the encoder."""

    states: Tensor  # (B, S, D), zeros at padding
    final: Tensor  # (B, D), the top layer's last state of each direction, concatenated
    mask: Tensor  # (B, S) bool, True at real tokens


class RNNEncoder(nn.Module):
    """Embeddings and a (bidirectional) GRU, LSTM or plain RNN over packed sequences."""

    def __init__(
        self,
        vocab_size: int,
        rnn_type: str,
        embedding_dim: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        check_rnn_sizes("encoder", embedding_dim, hidden_size, num_layers, dropout)
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(dropout)
        self.rnn = rnn_class(rnn_type, "encoder.rnn_type")(
            embedding_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.directions

    def forward(self, source: Tensor, source_lengths: Tensor) -> EncoderOutput:
        """source (B, S) ids, source_lengths (B,) -> states (B, S, D), final (B, D).

        The RNN reads packed sequences, so padding never reaches a real position."""
        embedded = self.dropout(self.embedding(source))  # (B, S, E)
        mask = source != PAD_ID
        packed = pack_padded_sequence(
            embedded, source_lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        packed_states, final = self.rnn(packed)
        states, _ = pad_packed_sequence(
            packed_states, batch_first=True, total_length=source.size(1)
        )
        if isinstance(final, tuple):  # LSTM: (h, c); the decoder starts from h
            final = final[0]
        # final: (layers x directions, B, hidden) -> the top layer's directions side by side
        top = final[-self.directions :].transpose(0, 1).flatten(1)  # (B, D)
        return EncoderOutput(self.dropout(states), top, mask)
