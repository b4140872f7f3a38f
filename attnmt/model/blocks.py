"""Matrix products whose row count changes with every batch, run in rows of a few fixed sizes.

A speed seam. On CPU, bf16 products run on oneDNN, which compiles a kernel for each new shape
of a product (1 to 7 ms each on an AMX Xeon) and keeps the last few hundred. A training batch's
products have as many rows as its sentences (B), positions (B x S, B x T) or target tokens, so
nearly every product of every batch is a new shape: before this seam, compiling took more of a
step than the products themselves (docs/benchmarks.md). Here the rows go in blocks of
`BLOCK_ROWS`, the last one padded with zero rows to a multiple of `ROW_MULTIPLE`, so each
product takes one of a few shapes and its kernel is compiled once per run. The zero rows add
nothing to a result and are cut off.

`linear` runs a linear layer this way (forward and backward; `fast.BlockedLinear` is the
twin of `nn.Linear` that calls it); `mm` and `mm_at` are the products for code that forms its
own gradients.
Off the CPU, or in fp32 (whose products run on MKL, which compiles nothing per shape), they are
the plain products.

Shapes: M rows, K and N widths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

BLOCK_ROWS = 1024
ROW_MULTIPLE = 128


def onednn_type(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether products of `dtype` on `device` run on oneDNN, one kernel per shape: bf16 or
    fp16 on the CPU."""
    return device.type == "cpu" and dtype in (torch.bfloat16, torch.float16)


def blocked(x: Tensor) -> bool:
    """Whether products of `x` run in blocks: `onednn_type` of x's."""
    return onednn_type(x.dtype, x.device)


def padded_rows(rows: int, dtype: torch.dtype, device: torch.device) -> int:
    """The rows of a buffer whose products repeat at every step, zero past `rows`: `rows`
    rounded up to a multiple of ROW_MULTIPLE where products of `dtype` on `device` run on
    oneDNN, else `rows`."""
    return -(-rows // ROW_MULTIPLE) * ROW_MULTIPLE if onednn_type(dtype, device) else rows


def row_blocks(x: Tensor, rows: int = BLOCK_ROWS) -> Iterator[tuple[int, int, Tensor]]:
    """(start, real rows, block) for each block of `rows` rows of x (M, K); where `blocked(x)`,
    the last one's rows rounded up (`padded_rows`) with zero rows after its real ones."""
    for start in range(0, len(x), rows):
        block = x[start : start + rows]
        real = len(block)
        padding = padded_rows(real, x.dtype, x.device) - real
        if start + rows >= len(x) and padding:  # the last block
            block = F.pad(block, (0, 0, 0, padding))
        yield start, real, block


def needs_grad(*tensors: Tensor | None) -> bool:
    """Whether any of `tensors` (None: absent) requires grad."""
    return any(t is not None and t.requires_grad for t in tensors)


def mm(a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
    """a (M, K) @ b (K, N) (+ bias (N,)), in blocks of a's rows where `blocked(a)` (then
    possibly the leading rows of a padded block's product)."""
    if not blocked(a):
        return torch.mm(a, b) if bias is None else torch.addmm(bias, a, b)

    def product(block: Tensor, into: Tensor | None = None) -> Tensor:
        if bias is None:
            return torch.mm(block, b, out=into)
        return torch.addmm(bias, block, b, out=into)

    if 0 < len(a) <= BLOCK_ROWS:  # one block: its product without the padding rows (a view)
        _, real, block = next(row_blocks(a, BLOCK_ROWS))
        return product(block)[:real]
    out = a.new_empty(len(a), b.size(1))
    direct = not (torch.is_grad_enabled() and needs_grad(a, b, bias))
    for start, real, block in row_blocks(a, BLOCK_ROWS):
        if direct and real == len(block):  # a whole block, straight into its rows
            product(block, out[start : start + real])
        else:
            out[start : start + real] = product(block)[:real]
    return out


def mm_at(a: Tensor, b: Tensor) -> Tensor:
    """a^T @ b for a (M, K), b (M, N): (K, N) in fp32, summed over blocks of the M rows where
    `blocked(a)` (a weight's gradient: M the rows of a batch)."""
    if not blocked(a):
        return (a.t() @ b).float()
    out = torch.zeros(a.size(1), b.size(1), dtype=torch.float32, device=a.device)
    for (_, _, a_block), (_, _, b_block) in zip(row_blocks(a), row_blocks(b), strict=True):
        out += (a_block.t() @ b_block).float()
    return out


def compute_type(like: Tensor) -> torch.dtype:
    """Autocast's type where it is on for `like`'s device, else `like`'s own."""
    kind = like.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else like.dtype


def autocast_off(like: Tensor) -> contextlib.AbstractContextManager:
    """No autocast on `like`'s device (for code that casts for itself)."""
    return torch.autocast(like.device.type, enabled=False)


def autocast_blocked(x: Tensor) -> bool:
    """Whether products of `x` run in blocks under autocast: bf16 or fp16 autocast on the CPU
    (training and validation)."""
    return torch.is_autocast_enabled(x.device.type) and runs_blocked(x)


def runs_blocked(x: Tensor) -> bool:
    """Whether products of `x` run in blocks: in their `compute_type` on oneDNN, so under bf16
    autocast on the CPU, or with x in bf16 there (decoding with bf16 weights, where every
    search step has its own row count)."""
    return onednn_type(compute_type(x), x.device)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`F.linear(x, weight, bias)` for x (..., K), weight (N, K), in autocast's type (or x's)
    with its products (forward and backward) in blocks of rows where `runs_blocked(x)`."""
    if not runs_blocked(x):
        return F.linear(x, weight, bias)
    if torch.is_grad_enabled() and needs_grad(x, weight, bias):
        return _Linear.apply(x, weight, bias, compute_type(x))
    return _linear_rows(x, weight, bias, compute_type(x))[0]  # decoding: no autograd node


def _linear_rows(
    x: Tensor, weight: Tensor, bias: Tensor | None, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor]:
    """`linear`'s forward in `dtype`: y (..., N), and the rows (M, K) and weight it
    multiplied, which its backward reads."""
    with autocast_off(x):
        rows = x.reshape(-1, x.size(-1)).to(dtype)  # (M, K)
        w = weight.to(dtype)
        out = mm(rows, w.t(), None if bias is None else bias.to(dtype))
    return out.view(*x.shape[:-1], -1), rows, w


class _Linear(torch.autograd.Function):
    """y = x W^T + b with every product in blocks of rows: forward, d x and d W."""

    @staticmethod
    def forward(ctx, x, weight, bias, dtype):  # noqa: ANN001, ANN205
        out, rows, w = _linear_rows(x, weight, bias, dtype)
        ctx.save_for_backward(rows, w)
        ctx.shape, ctx.has_bias = x.shape, bias is not None
        ctx.dtypes = x.dtype, weight.dtype, None if bias is None else bias.dtype
        return out

    @staticmethod
    def backward(ctx, grad_out):  # noqa: ANN001, ANN205
        rows, w = ctx.saved_tensors
        with autocast_off(rows):
            grad = grad_out.reshape(-1, grad_out.size(-1)).to(w.dtype)  # (M, N)
            grad_x = mm(grad, w).view(ctx.shape) if ctx.needs_input_grad[0] else None
            grad_w = mm_at(grad, rows) if ctx.needs_input_grad[1] else None
            grad_b = grad.sum(0, dtype=torch.float32) if ctx.has_bias else None
        x_type, w_type, b_type = ctx.dtypes
        return (
            None if grad_x is None else grad_x.to(x_type),
            None if grad_w is None else grad_w.to(w_type),
            None if grad_b is None else grad_b.to(b_type),
            None,
        )
