"""The output layer and the cross-entropy together, a block of target positions at a time.

A speed and memory seam under `attnmt.train.loss`: a batch's logits (tokens x vocabulary, the
largest tensors of a step) never exist whole, and the gradient of each block is formed while
its logits are at hand, so the backward pass has nothing of them to keep
(docs/benchmarks.md has what it saves). `linear_cross_entropy` equals
`F.cross_entropy(F.linear(inputs, weight, bias).float(), target, reduction="sum", ...)`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmt.model import native
from attnmt.model.blocks import autocast_off, compute_type, row_blocks

# Rows of a block whose softmax and gradient are formed together: 128 x an 8,000-piece
# vocabulary is 4 MB of fp32, about what two cores' caches hold.
SUB_ROWS = 128

# Target positions per block: 1,024 x an 8,000-piece vocabulary is 32 MB of fp32 logits.
# Fewer, larger blocks make larger products; docs/benchmarks.md has the sizes measured. In bf16
# the last block's rows are rounded up with zero rows (no loss, no gradient;
# `blocks.row_blocks`): oneDNN compiles a kernel for each new shape of a product, and the last
# block's row count would otherwise be new at nearly every step.
BLOCK_ROWS = 1024


def linear_cross_entropy(
    inputs: Tensor,
    weight: Tensor,
    bias: Tensor,
    target: Tensor,
    label_smoothing: float,
    rows: int = BLOCK_ROWS,
) -> Tensor:
    """sum_n CE(inputs_n W^T + b, target_n) with label smoothing, in blocks of `rows`: equal to
    `F.cross_entropy(F.linear(inputs, weight, bias).float(), target, reduction="sum", ...)`
    (under autocast the products run in its type, the softmax in fp32, as there)."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (inputs, weight, bias)):
        return _LinearCrossEntropy.apply(inputs, weight, bias, target, label_smoothing, rows)
    x, w, b = _compute_type(inputs, weight, bias)
    total = torch.zeros((), dtype=torch.float32, device=inputs.device)
    with autocast_off(inputs):
        for start, real, xs in row_blocks(x, rows):
            logits = torch.addmm(b, xs, w.t())[:real].float()
            total += F.cross_entropy(
                logits,
                target[start : start + rows],
                label_smoothing=label_smoothing,
                reduction="sum",
            )
    return total


class _LinearCrossEntropy(torch.autograd.Function):
    """The loss with its gradients formed block by block in the forward pass; backward only
    scales them. The softmax of each block is computed once and becomes its gradient in place:
    d loss / d logits = softmax - q, q = (1 - s) onehot(target) + s / V. In fp32 on the CPU,
    where the fused C++ kernels load (attnmt.model.native), one kernel does a block's
    element-wise work, the same formulas in one pass over it."""

    @staticmethod
    def forward(ctx, inputs, weight, bias, target, smoothing, rows):  # noqa: ANN001, ANN205
        x, w, b = _compute_type(inputs, weight, bias)
        vocab = w.shape[0]
        total = torch.zeros((), dtype=torch.float32, device=x.device)
        grad_x = torch.empty_like(x)
        grad_w = torch.zeros(w.shape, dtype=torch.float32, device=x.device)
        grad_b = torch.zeros(vocab, dtype=torch.float32, device=x.device)
        fp32_cpu = x.dtype == torch.float32 and x.device.type == "cpu"
        kernels = native.kernels() if fp32_cpu else None
        with autocast_off(inputs):
            for start, real, xs in row_blocks(x, rows):
                logits = torch.addmm(b, xs, w.t())  # (R, V), padding rows (if any) last
                if kernels is not None:  # the gradient over the logits, in place
                    ts = target[start : start + real]
                    total += kernels.softmax_xent(logits[:real], ts, smoothing, grad_b)
                    grad = logits
                    grad[real:] = 0
                else:
                    grad = _softmax_xent(logits, target[start:], real, smoothing, grad_b, total)
                if real == len(xs):
                    torch.mm(grad, w, out=grad_x[start : start + rows])
                else:
                    grad_x[start : start + real] = torch.mm(grad, w)[:real]
                grad_w += torch.mm(grad.t(), xs)
        ctx.save_for_backward(grad_x, grad_w, grad_b)
        ctx.dtypes = inputs.dtype, weight.dtype, bias.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total):  # noqa: ANN001, ANN205
        grads = (g * grad_total for g in ctx.saved_tensors)
        gx, gw, gb = (g.to(dtype) for g, dtype in zip(grads, ctx.dtypes, strict=True))
        return gx, gw, gb, None, None, None


def _softmax_xent(
    logits: Tensor, target: Tensor, real: int, smoothing: float, grad_b: Tensor, total: Tensor
) -> Tensor:
    """The gradient of a block's first `real` rows of logits (R, V) against `target` (its first
    `real` ids), zero in its padding rows; their summed loss subtracted from `total` and their
    summed gradient added to `grad_b`, in place."""
    vocab = logits.size(1)
    grad = torch.zeros_like(logits) if real < len(logits) else torch.empty_like(logits)
    # The element-wise work in fp32, SUB_ROWS rows at a time: each piece stays in the cache
    # through its passes, where a whole block's would not.
    for sub in range(0, real, SUB_ROWS):
        end = min(sub + SUB_ROWS, real)
        ts = target[sub:end, None]
        probs = logits[sub:end].float().log_softmax(-1)
        picked = probs.gather(1, ts)
        total -= (1 - smoothing) * picked.sum() + smoothing / vocab * probs.sum()
        probs.exp_()
        probs.scatter_(1, ts, probs.gather(1, ts) - (1 - smoothing))
        if smoothing:
            probs -= smoothing / vocab
        grad_b += probs.sum(0)
        grad[sub:end] = probs
    return grad


def _compute_type(*tensors: Tensor) -> tuple[Tensor, ...]:
    """`tensors` in autocast's type where autocast is on for their device (else as they are)."""
    if not torch.is_autocast_enabled(tensors[0].device.type):
        return tensors
    dtype = compute_type(tensors[0])
    return tuple(t.to(dtype) for t in tensors)
