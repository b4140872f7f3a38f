"""Products in blocks of rows: the same numbers as the plain products, in a few shapes."""

import pytest
import torch
import torch.nn.functional as F

from attnmt.model import blocks


@pytest.mark.parametrize("rows", [0, 1, 127, 128, 1023, 1024, 1025, 2500])
def test_blocked_products_equal_the_plain_ones(rows, monkeypatch):
    monkeypatch.setattr(blocks, "BLOCK_ROWS", 512)
    torch.manual_seed(0)
    a = torch.randn(rows, 24).to(torch.bfloat16)
    b = torch.randn(24, 40).to(torch.bfloat16)
    bias = torch.randn(40).to(torch.bfloat16)
    assert blocks.blocked(a)
    expected = (a.float() @ b.float() + bias.float()).to(torch.bfloat16)
    torch.testing.assert_close(blocks.mm(a, b, bias), expected, rtol=0.02, atol=0.05)
    c = torch.randn(rows, 16).to(torch.bfloat16)
    torch.testing.assert_close(blocks.mm_at(a, c), a.float().t() @ c.float(), rtol=0.02, atol=0.2)


@pytest.mark.parametrize("rows", [5, 300, 2100])
def test_blocks_take_few_shapes(rows):
    x = torch.arange(rows, dtype=torch.bfloat16).unsqueeze(1)  # each row holds its index
    found = list(blocks.row_blocks(x))
    sizes = {len(block) for _, _, block in found}
    assert all(size % blocks.ROW_MULTIPLE == 0 and size <= blocks.BLOCK_ROWS for size in sizes)
    covered = sum(real for _, real, _ in found)
    assert covered == rows
    for start, real, block in found:  # the real rows in place, zero rows after them
        assert torch.equal(block[:real], x[start : start + real])
        assert not block[real:].any()
    assert [len(block) for _, _, block in blocks.row_blocks(x.float())] == [
        min(blocks.BLOCK_ROWS, rows - start) for start in range(0, rows, blocks.BLOCK_ROWS)
    ]  # fp32: no zero rows
    padded = blocks.padded_rows(rows, torch.bfloat16, torch.device("cpu"))
    assert padded % blocks.ROW_MULTIPLE == 0 and rows <= padded < rows + blocks.ROW_MULTIPLE
    assert blocks.padded_rows(rows, torch.float32, torch.device("cpu")) == rows


def linear_outputs_and_grads(function, x, layer, autocast):
    x.grad = None
    layer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y = function(x, layer.weight, layer.bias)
    y.float().mul(torch.linspace(-1, 1, 40)).sum().backward()
    return [y.float(), x.grad, layer.weight.grad, layer.bias.grad]


def test_linear_under_bf16_autocast_is_as_close_to_fp32_as_f_linear():
    torch.manual_seed(0)
    x = torch.randn(3, 700, 24, requires_grad=True)
    layer = torch.nn.Linear(24, 40)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert blocks.runs_blocked(x)  # else `linear` is F.linear, and the test says nothing
    exact = linear_outputs_and_grads(F.linear, x, layer, autocast=False)
    blocked = linear_outputs_and_grads(blocks.linear, x, layer, autocast=True)
    plain = linear_outputs_and_grads(F.linear, x, layer, autocast=True)
    for ours, theirs, reference in zip(blocked, plain, exact, strict=True):
        scale = reference.abs().max()
        assert (ours - reference).abs().max() <= max(
            2 * (theirs - reference).abs().max(), 0.01 * scale
        )


def test_fp32_products_are_the_plain_ones():
    a, b = torch.randn(300, 8), torch.randn(8, 5)
    assert not blocks.blocked(a)
    assert torch.equal(blocks.mm(a, b), a @ b)
    assert torch.equal(blocks.linear(a, b.t()), F.linear(a, b.t()))


def test_a_frozen_weight_with_a_trained_bias_gets_its_gradient_over_many_blocks():
    # Whole blocks are written straight into the output only where no autograd graph is
    # wanted: here the bias alone requires grad.
    torch.manual_seed(0)
    x = torch.randn(2500, 24).to(torch.bfloat16)
    weight = torch.randn(40, 24).to(torch.bfloat16)
    bias = torch.randn(40).to(torch.bfloat16).requires_grad_()
    blocks.linear(x, weight, bias).float().sum().backward()
    assert torch.allclose(bias.grad.float(), torch.full((40,), 2500.0), rtol=0.01)
    with torch.no_grad():  # decoding: no autograd node, the same numbers
        plain = F.linear(x, weight, bias)
        torch.testing.assert_close(blocks.linear(x, weight, bias), plain, rtol=0.02, atol=0.05)
