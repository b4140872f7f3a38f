"""Ensembles: several models of one language pair decoding as one.

At every step each member scores the next word given its own decoder state, and the ensemble
ranks words by the members' mean log-probability (their normalised geometric mean). The
search (`attnmt.infer.search`) sees an object shaped like one `Seq2Seq`: `encode`, and a `decoder`
whose `step_features` returns scores, attention weights (the members' mean) and the next state,
and whose `logits` is the identity (each member applies its own output layer). The
members must share the tokenizers, since they read the same source ids and write the same
target ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.model.seq2seq import Seq2Seq
from attnmt.model.state import DecoderState


@dataclass
class EnsembleState:
    """The members' decoder states, selected together."""

    members: list[DecoderState]

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> EnsembleState:
        return EnsembleState([state.select(rows, sentences) for state in self.members])

    def join(self, other: EnsembleState) -> EnsembleState:
        return EnsembleState([a.join(b) for a, b in zip(self.members, other.members, strict=True)])


class EnsembleDecoder(nn.Module):
    """One decoding step of every member, their log-probabilities averaged."""

    def __init__(self, models: nn.ModuleList) -> None:
        super().__init__()
        self.models = models

    def step(self, previous: Tensor, state: EnsembleState) -> tuple[Tensor, Tensor, EnsembleState]:
        """previous words (B,) -> mean log-probabilities (B, V), mean attention (B, S), state."""
        log_probs, weights, states = [], [], []
        for model, member in zip(self.models, state.members, strict=True):
            logits, attention, next_state = model.decoder.step(previous, member)
            log_probs.append(logits.float().log_softmax(-1))
            weights.append(attention)
            states.append(next_state)
        mean = torch.stack(log_probs).mean(0)
        return mean, torch.stack(weights).mean(0), EnsembleState(states)

    def step_features(
        self, previous: Tensor, state: EnsembleState
    ) -> tuple[Tensor, Tensor, EnsembleState]:
        """`step`, as search asks a model's decoder for its features: for an ensemble, the mean
        log-probabilities, since each member applies its own output layer in `step`."""
        return self.step(previous, state)

    def logits(self, mean_log_probs: Tensor) -> Tensor:
        """The ensemble's output layer, the identity: the mean log-probabilities (..., V) as
        they are, which search normalises like logits."""
        return mean_log_probs


class Ensemble(nn.Module):
    """Models that decode together (see the module docstring)."""

    def __init__(self, models: Sequence[Seq2Seq]) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)
        self.decoder = EnsembleDecoder(self.members)

    def encode(self, source: Tensor, source_lengths: Tensor) -> tuple[None, EnsembleState]:
        """source (B, S) -> every member's initial decoder state."""
        return None, EnsembleState([m.encode(source, source_lengths)[1] for m in self.members])
