"""The training objective: summed cross-entropy over a batch's real target tokens,

    loss = - sum_{t: y_t real} log softmax(V_o features_t + b)[y_t]   (with label smoothing)

The output layer's product and the loss are computed together by
`attnmt.train.blockwise.linear_cross_entropy`, a speed and memory seam: the same sum, with the
batch's logits never whole.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnmt.data.dataset import Batch
from attnmt.model.seq2seq import Seq2Seq
from attnmt.train.blockwise import linear_cross_entropy
from attnmt.vocab import PAD_ID


class TokenLoss(nn.Module):
    """Summed cross-entropy over a batch's real target tokens (padding never scored), with
    label smoothing; validation's dev loss is the same with `label_smoothing=0`.

    A module of its own so that DistributedDataParallel sees the whole computation.
    """

    def __init__(self, model: Seq2Seq, label_smoothing: float) -> None:
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing

    def forward(self, batch: Batch) -> tuple[Tensor, int]:
        """The summed loss of `batch` (already on the model's device) and the number of target
        tokens it sums over."""
        features, _ = self.model(batch.source, batch.source_lengths, batch.previous)
        real = batch.target != PAD_ID
        decoder = self.model.decoder
        inputs = decoder.output_inputs(features[real])  # (N, F): real positions only
        weight, bias = decoder.output_weights()
        loss = linear_cross_entropy(inputs, weight, bias, batch.target[real], self.label_smoothing)
        return loss, batch.target_tokens
