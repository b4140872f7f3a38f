"""attnmt's Dropout: nn.Dropout's behaviour, with its CPU mask drawn from uniform numbers."""

import pytest
import torch
from torch import nn

from attnmt.model.fast import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keeps_each_element_with_probability_1_minus_p_and_rescales(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(200_000) + 1.0  # never 0, so a zero means dropped
    y = Dropout(p).train()(x)
    kept = y != 0
    # 200,000 draws: the kept share's standard deviation is below 0.0012
    assert abs(kept.float().mean().item() - (1 - p)) < 0.006
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))


def test_the_gradient_flows_through_kept_elements_only() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 32, requires_grad=True)
    y = Dropout(0.4).train()(x)
    y.backward(torch.ones_like(y))
    expected = (y != 0).float() / 0.6
    torch.testing.assert_close(x.grad, expected)


def test_a_bf16_input_keeps_its_type_and_rate() -> None:
    torch.manual_seed(2)
    x = torch.ones(100_000, dtype=torch.bfloat16)
    y = Dropout(0.3).train()(x)
    assert y.dtype == torch.bfloat16
    assert abs((y != 0).float().mean().item() - 0.7) < 0.01


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_evaluation_and_the_edges_match_nn_dropout(p: float) -> None:
    x = torch.randn(10, 7)
    assert torch.equal(Dropout(p).eval()(x), nn.Dropout(p).eval()(x))
    if p in (0.0, 1.0):  # nothing random left to differ
        assert torch.equal(Dropout(p).train()(x), nn.Dropout(p).train()(x))


def test_bad_p_is_refused_as_nn_dropout_refuses_it() -> None:
    with pytest.raises(ValueError):
        Dropout(1.5)
