"""The training objective: summed cross-entropy over a batch's real target tokens,

    loss = - sum_{t: y_t real} log softmax(V_o features_t + b)[y_t]   (with label smoothing)

plus, with guided alignment (Chen et al. 2016; `trainer.guided_alignment` = w > 0), w times the
cross-entropy between each guided target position's attention row a_t and its guide row g_t
(`attnmt.data.guide`: a distribution over the source pieces that eflomal's links reach):

    + w * ( - sum_{t guided} sum_i g_{t,i} log a_{t,i} )

summed like the token loss, so w = 1 weighs one guided row like one token.

The output layer's product and the loss are computed together by
`attnmt.train.blockwise.linear_cross_entropy`, a speed and memory seam: the same sum, with the
batch's logits never whole.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.data.dataset import Batch
from attnmt.model.seq2seq import Seq2Seq
from attnmt.train.blockwise import linear_cross_entropy
from attnmt.vocab import PAD_ID

SMALLEST_WEIGHT = 1e-9  # attention weights are floored here before the log (local_p's reach 0)


def alignment_cross_entropy(weights: Tensor, guide: Tensor) -> Tensor:
    """- sum_{b,t,i} guide[b,t,i] log weights[b,t,i], in fp32; rows of `guide` that are all
    zero (not guided, padding) add nothing."""
    return -(guide * torch.log(weights.float().clamp_min(SMALLEST_WEIGHT))).sum()


class TokenLoss(nn.Module):
    """Summed cross-entropy over a batch's real target tokens (padding never scored), with
    label smoothing, plus `guided_alignment` times the attention's cross-entropy against the
    batch's guide (module docstring) where the batch has one; validation's dev loss is the
    token cross-entropy alone, with `label_smoothing=0`. (So a guided run's logged training
    loss includes the alignment term.)

    A module of its own so that DistributedDataParallel sees the whole computation.
    """

    def __init__(
        self, model: Seq2Seq, label_smoothing: float, guided_alignment: float = 0.0
    ) -> None:
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing
        self.guided_alignment = guided_alignment

    def forward(self, batch: Batch) -> tuple[Tensor, int]:
        """The summed loss of `batch` (already on the model's device) and the number of target
        tokens it sums over."""
        features, weights = self.model(batch.source, batch.source_lengths, batch.previous)
        real = batch.target != PAD_ID
        decoder = self.model.decoder
        inputs = decoder.output_inputs(features[real])  # (N, F): real positions only
        weight, bias = decoder.output_weights()
        loss = linear_cross_entropy(inputs, weight, bias, batch.target[real], self.label_smoothing)
        if self.guided_alignment and batch.guide is not None:
            loss = loss + self.guided_alignment * alignment_cross_entropy(weights, batch.guide)
        return loss, batch.target_tokens
