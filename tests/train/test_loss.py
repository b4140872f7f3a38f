"""The blockwise output layer + loss against torch's own linear and cross-entropy."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmt.model import native
from attnmt.train import blockwise
from attnmt.train.blockwise import linear_cross_entropy


def _problem(rows: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randn(rows, 12, generator=g, requires_grad=True)
    weight = torch.randn(50, 12, generator=g, requires_grad=True)
    bias = torch.randn(50, generator=g, requires_grad=True)
    target = torch.randint(0, 50, (rows,), generator=g)
    return inputs, weight, bias, target


def _reference(inputs, weight, bias, target, smoothing):  # noqa: ANN001, ANN202
    logits = F.linear(inputs, weight, bias).float()
    return F.cross_entropy(logits, target, label_smoothing=smoothing, reduction="sum")


@pytest.mark.parametrize("rows,block", [(37, 8), (16, 16), (5, 256), (1, 1), (130, 64)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("sub_rows", [128, 3])
@pytest.mark.parametrize("kernels", ["as loaded", "off"])
def test_loss_and_gradients_match_torch(
    rows: int, block: int, smoothing: float, sub_rows: int, kernels: str, monkeypatch
) -> None:
    """With the fused C++ kernels where they load, and with the torch code."""
    monkeypatch.setattr(blockwise, "SUB_ROWS", sub_rows)  # pieces of 3: several per block
    if kernels == "off":
        monkeypatch.setattr(native, "kernels", lambda: None)
    inputs, weight, bias, target = _problem(rows)
    ours = linear_cross_entropy(inputs, weight, bias, target, smoothing, rows=block)
    (ours * 3).backward()  # the incoming gradient scales all three
    mine = [t.grad.clone() for t in (inputs, weight, bias)]
    for t in (inputs, weight, bias):
        t.grad = None
    theirs = _reference(inputs, weight, bias, target, smoothing)
    (theirs * 3).backward()
    torch.testing.assert_close(ours, theirs)
    for got, want in zip(mine, (inputs.grad, weight.grad, bias.grad), strict=True):
        torch.testing.assert_close(got, want)


def test_without_gradients_the_same_loss() -> None:
    inputs, weight, bias, target = _problem(37)
    with torch.no_grad():
        ours = linear_cross_entropy(inputs, weight, bias, target, 0.1, rows=8)
        theirs = _reference(inputs, weight, bias, target, 0.1)
    torch.testing.assert_close(ours, theirs)


def test_under_autocast_close_to_torch_and_grads_in_parameter_types() -> None:
    inputs, weight, bias, target = _problem(37)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = linear_cross_entropy(inputs, weight, bias, target, 0.1, rows=8)
        theirs = _reference(inputs, weight, bias, target, 0.1)
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, theirs, rtol=1e-2, atol=0.0)
    ours.backward()
    assert (inputs.grad.dtype, weight.grad.dtype, bias.grad.dtype) == (torch.float32,) * 3
    mine = weight.grad.clone()
    weight.grad = None
    theirs.backward()
    assert F.cosine_similarity(mine.flatten(), weight.grad.flatten(), dim=0) > 0.999
