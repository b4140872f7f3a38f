"""The encoder-decoder with soft attention (`build.build_model` builds it from a config).

Sizes meet in one documented way: the keys the decoder attends over are the encoder states
projected to the decoder's width, keys = P h_i (P bias-free; the identity when the widths already
match). So every scorer, dot included, works with any encoder and decoder sizes, and the context
has the decoder's width.

Shapes: B batch, S source length, T target length, D encoder width, H decoder width.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnmt.model.decoder import AttentionDecoder
from attnmt.model.encoder import EncoderOutput, RNNEncoder
from attnmt.model.state import DecoderState


class Seq2Seq(nn.Module):
    """Encoder, key projection and attention decoder."""

    def __init__(self, encoder: RNNEncoder, decoder: AttentionDecoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        if encoder.output_size == decoder.hidden_size:
            self.key_projection: nn.Module = nn.Identity()
        else:
            self.key_projection = nn.Linear(encoder.output_size, decoder.hidden_size, bias=False)

    def encode(self, source: Tensor, source_lengths: Tensor) -> tuple[EncoderOutput, DecoderState]:
        """source (B, S) -> the encoder's output and the decoder's initial state."""
        encoder_output = self.encoder(source, source_lengths)
        keys = self.key_projection(encoder_output.states)  # P h_i: (B, S, H)
        return encoder_output, self.decoder.init_state(encoder_output, keys)

    def forward(
        self, source: Tensor, source_lengths: Tensor, previous: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Teacher forcing: source (B, S), previous target words (B, T) (BOS first) ->
        output features (B, T, F) and attention weights (B, T, S); `logits` maps features."""
        _, state = self.encode(source, source_lengths)
        return self.decoder(previous, state)

    def logits(self, features: Tensor) -> Tensor:
        return self.decoder.logits(features)


def parameter_summary(model: nn.Module) -> str:
    """A table of parameter counts per part of the model (each shared tensor counted once)."""
    rows, seen = [], set()
    for name, child in model.named_children():
        for part_name, part in [(name, child)] if name != "decoder" else child.named_children():
            params = [p for p in part.parameters() if id(p) not in seen]
            seen.update(id(p) for p in params)
            label = part_name if name != "decoder" else f"decoder.{part_name}"
            if params:
                rows.append((label, sum(p.numel() for p in params)))
    rows.append(("total", sum(n for _, n in rows)))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {count:>11,}" for label, count in rows)
