"""The default decoder's fused teacher-forced loop computes what its step loop computes."""

import pytest
import torch

from attnmt.model import blocks
from attnmt.model.decoder import BahdanauDecoder
from attnmt.model.fused import gru_layer
from tests.model.test_seq2seq import batch, tiny_model


def run(model, fused, monkeypatch, guide_weight=0.0):
    """The loss's value, the features and weights, and every parameter's gradient, from the
    fused loop or (fused=False) the step loop."""
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(BahdanauDecoder, "runs_fused", lambda self, state: False)
        model.zero_grad()
        source, lengths, previous = batch()
        features, weights = model(source, lengths, previous)
        # a loss that reads every position of both outputs, unevenly
        loss = model.logits(features).logsumexp(-1).mul(torch.linspace(0.5, 2, 4)).sum()
        loss = loss + guide_weight * weights.clamp_min(1e-9).log().mul(weights.detach()).sum()
        loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return loss.detach(), features.detach(), weights.detach(), grads


def pad_rows(monkeypatch, padding):
    """The products' buffers `padding` rows past the batch, as bf16 pads them (fp32 does not)."""
    monkeypatch.setattr(blocks, "padded_rows", lambda rows, dtype, device: rows + padding)


@pytest.mark.parametrize("overrides", [[], ["decoder.feed_prev_output=false"]])
@pytest.mark.parametrize("guide_weight", [0.0, 0.7])
@pytest.mark.parametrize("padding", [0, 5])
def test_the_fused_loop_equals_the_step_loop_in_fp32(overrides, guide_weight, padding, monkeypatch):
    pad_rows(monkeypatch, padding)
    model = tiny_model(*overrides)
    assert model.decoder.runs_fused(model.encode(*batch()[:2])[1])
    fused = run(model, True, monkeypatch, guide_weight)
    loop = run(model, False, monkeypatch, guide_weight)
    for a, b in zip(fused[:3], loop[:3], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert fused[3].keys() == loop[3].keys()
    for name in loop[3]:
        torch.testing.assert_close(fused[3][name], loop[3][name], rtol=1e-5, atol=1e-6, msg=name)


def test_the_fused_loop_is_close_to_the_step_loop_under_bf16_autocast(monkeypatch):
    model = tiny_model()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = run(model, True, monkeypatch)
        loop = run(model, False, monkeypatch)
    torch.testing.assert_close(fused[1].float(), loop[1].float(), rtol=0.05, atol=0.02)
    for name in loop[3]:
        torch.testing.assert_close(fused[3][name], loop[3][name], rtol=0.1, atol=0.05, msg=name)


@pytest.mark.parametrize(
    "overrides",
    [
        ["attention=coverage"],
        ["attention=dot"],
        ["attention=local_p"],
        ["decoder.rnn_type=lstm"],
        ["decoder.num_layers=2"],
        ["decoder=luong"],
    ],
)
def test_other_decoders_and_scorers_keep_the_step_loop(overrides):
    model = tiny_model(*overrides)
    state = model.encode(*batch()[:2])[1]
    assert not getattr(model.decoder, "runs_fused", lambda state: False)(state)


def gru_and_inputs():
    torch.manual_seed(1)
    gru = torch.nn.GRU(3, 5, batch_first=True)  # unequal sizes: input 3, hidden 5
    inputs = torch.randn(4, 6, 3, requires_grad=True)
    return gru, inputs


def gru_outputs_and_grads(gru, inputs, fused):
    gru.zero_grad()
    inputs.grad = None
    weights = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
    states = gru_layer(inputs, weights) if fused else gru(inputs)[0]
    states.float().mul(torch.linspace(0.5, 2, 5)).sum().backward()
    return [states.detach().float(), inputs.grad, *(w.grad for w in weights)]


@pytest.mark.parametrize("padding", [0, 5])
def test_gru_layer_equals_torch_gru_in_fp32(padding, monkeypatch):
    pad_rows(monkeypatch, padding)
    gru, inputs = gru_and_inputs()
    fused = gru_outputs_and_grads(gru, inputs, True)
    plain = gru_outputs_and_grads(gru, inputs, False)
    for a, b in zip(fused, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_gru_layer_is_close_to_torch_gru_under_bf16_autocast():
    gru, inputs = gru_and_inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = gru_outputs_and_grads(gru, inputs, True)
        plain = gru_outputs_and_grads(gru, inputs, False)
    for a, b in zip(fused, plain, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=0.05, atol=0.05)
