"""Dropout, with its mask drawn faster on CPUs.

In training each element is kept with probability 1 - p and scaled by 1 / (1 - p), or zeroed;
in evaluation the input passes unchanged: what `nn.Dropout` computes. On a CPU torch draws that
mask with `bernoulli_`, one element at a time; uniform numbers compared with p give the same
Bernoulli(1 - p) mask in well under half the time, forward and backward (docs/benchmarks.md).
Elsewhere (CUDA) torch's own fused dropout is used.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
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
