"""The training objective: summed cross-entropy over a batch's real target tokens."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.data.dataset import Batch
from attnmt.model.seq2seq import Seq2Seq
from attnmt.vocab import PAD_ID


class TokenLoss(nn.Module):
    """Summed cross-entropy over a batch's real target tokens (padding never scored), with
    label smoothing; validation's dev loss is the same with `label_smoothing=0`.

    A module of its own so that DistributedDataParallel sees the whole computation.
    """

    def __init__(self, model: Seq2Seq, label_smoothing: float) -> None:
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing

    def forward(
        self, source: Tensor, source_lengths: Tensor, previous: Tensor, target: Tensor
    ) -> Tensor:
        features, _ = self.model(source, source_lengths, previous)
        real = target != PAD_ID
        logits = self.model.logits(features[real])  # (N, V): real positions only
        return F.cross_entropy(
            logits.float(), target[real], label_smoothing=self.label_smoothing, reduction="sum"
        )

    def of_batch(self, batch: Batch) -> Tensor:
        """The summed loss of `batch` (already on the model's device)."""
        return self(batch.source, batch.source_lengths, batch.previous, batch.target)
