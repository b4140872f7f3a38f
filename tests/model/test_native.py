"""The fused C++ kernels (attnmt/model/native.py, csrc/fused.cpp) against the torch code of
fused.py that they replace in fp32, forward and every gradient within 1e-5, and the torch code
taking over, with one log line saying so, where the kernels cannot be had."""

import logging
import os
import time

import pytest
import torch

from attnmt.model import blocks, fast, fused, native
from attnmt.train.blockwise import linear_cross_entropy
from tests.model.test_fast import teacher_forced, twins

FP32 = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def kernels():
    """The compiled kernels (built here the first time, about half a minute)."""
    try:
        return native.load()
    except native.NativeUnavailable as why:
        pytest.skip(f"the fused C++ kernels cannot be built on this machine: {why}")


@pytest.fixture
def fresh_kernels():
    """native.kernels() forgets what it loaded, before and after the test."""
    native.kernels.cache_clear()
    yield
    native.kernels.cache_clear()


class Spy:
    """`kernels` with a count of the calls to each of its functions."""

    def __init__(self, kernels):
        self.kernels, self.calls = kernels, {}

    def __getattr__(self, name):
        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return getattr(self.kernels, name)(*args)

        return call


def assert_all_close(outputs, expected):
    assert len(outputs) == len(expected)
    for i, (a, b) in enumerate(zip(outputs, expected, strict=True)):
        torch.testing.assert_close(a, b, **FP32, msg=lambda m, i=i: f"output {i}: {m}")


def gate_inputs(batch=3, hidden=5):
    """gi (B, 3H), gh (B, 3H) as the columns of a wider product (rows strided, as the decoder's
    [U q; gh]), q (B, H) and d q' (B, H); gates from -12 to 12, so that both of tanh's ranges
    and saturated sigmoids occur."""
    torch.manual_seed(4)
    gi = torch.randn(batch, 3 * hidden) * 4
    gh = (torch.randn(batch, 7 + 3 * hidden) * 4)[:, 7:]
    return gi, gh, torch.randn(batch, hidden), torch.randn(batch, hidden)


def test_gru_gates_forward_and_backward_equal_torch(kernels):
    gi, gh, query, grad_out = gate_inputs()
    results = []
    for step_kernels in (kernels, None):
        kept = fused._gru_buffers(1, *query.shape)
        kept = [k[0] for k in kept]
        out = torch.empty_like(query)
        fused._gru_step(gi, gh, query, kept, out, step_kernels)
        grad_gi, grad_gh = torch.empty_like(gi), torch.empty(len(gi), 9 + gi.size(1))[:, 9:]
        direct = fused._gru_step_backward(grad_out, query, kept, grad_gi, grad_gh, step_kernels)
        results.append([out, *kept, grad_gi, grad_gh, direct])
    assert_all_close(*results)


def test_the_kernels_refuse_what_they_cannot_read(kernels):
    gi, gh, query, _ = gate_inputs()
    kept = [k[0] for k in fused._gru_buffers(1, *query.shape)]
    with pytest.raises(RuntimeError, match="gi: expected fp32"):
        kernels.gru_forward(gi.double(), gh, query, *kept, torch.empty_like(query))
    with pytest.raises(RuntimeError, match=r"gh: expected shape \[3, 15\]"):
        kernels.gru_forward(gi, gh[:, 1:], query, *kept, torch.empty_like(query))


def test_the_scorers_energy_forward_and_backward_equal_torch(kernels):
    torch.manual_seed(5)
    batch, length, attn = 3, 5, 7
    wh = torch.randn(batch, length, attn) * 2
    uq = (torch.randn(batch, 4 + attn) * 2)[:, 4:]  # strided rows, as the decoder's [U q; gh]
    v = torch.randn(attn)
    grad_scores = torch.randn(batch, length)
    accumulated = torch.randn(batch, length, attn)  # both add to what earlier steps left
    grad_v_before = torch.randn(attn)

    energy = torch.empty_like(wh)
    scores = kernels.energy_forward(wh, uq, v, energy)
    grad_energy_sum, grad_v = accumulated.clone(), grad_v_before.clone()
    grad_uq = torch.empty(batch, 2 + attn)[:, 2:]
    kernels.energy_backward(grad_scores, energy, v, grad_energy_sum, grad_uq, grad_v)

    # fused.py's torch code: e = tanh(W h + U q), s = e v; d v += d s e, d s e^2 summed, and
    # d (U q) = v (sum_i d s_i - sum_i d s_i e_i^2)
    expected_energy = torch.tanh(wh + uq.unsqueeze(1))
    squared = expected_energy.square() * grad_scores.unsqueeze(-1)
    expected = [
        expected_energy,
        expected_energy @ v,
        accumulated + squared,
        (grad_scores.sum(1, keepdim=True) - squared.sum(1)) * v,
        grad_v_before + grad_scores.view(1, -1) @ expected_energy.view(-1, attn),
    ]
    assert_all_close([energy, scores, grad_energy_sum, grad_uq, grad_v.view(1, -1)], expected)


def loops(fed, scorer="additive"):
    """The default model's two loops, tiny and of unequal sizes (batch 3, source 5, target 4,
    input E `fed`, hidden 6, attention 7), with the last source positions of two sentences
    masked: a function running both through autograd that returns every output and gradient.
    `scorer`: additive (U, v, with W h as the prepared keys), bilinear (its matrix U) or
    scaled_dot (no matrix; divisor sqrt(6)), the products' prepared keys the keys."""
    torch.manual_seed(6)
    batch, length, steps, hidden, attn = 3, 5, 4, 6, 7
    encoder = torch.nn.GRU(3, hidden, batch_first=True)
    decoder = torch.nn.GRU(fed + hidden, hidden, batch_first=True)
    U, v = torch.randn(attn, hidden) * 0.5, torch.randn(1, attn)
    source = torch.randn(batch, length, 3)
    embedded = torch.randn(batch, steps, fed)
    mask = torch.arange(length) < torch.tensor([5, 3, 4])[:, None]  # (B, S)
    W = torch.randn(attn, hidden) * 0.5
    parameters = [*encoder.parameters(), *decoder.parameters(), U, v, W]
    leaves = [source, embedded, *parameters]

    def run():
        for leaf in leaves:
            leaf.requires_grad_(True)
            leaf.grad = None
        encoder_weights = (
            encoder.weight_ih_l0,
            encoder.weight_hh_l0,
            encoder.bias_ih_l0,
            encoder.bias_hh_l0,
        )
        keys = fused.gru_layer(source, encoder_weights)  # (B, S, H)
        prepared, loop_scorer = {
            "additive": (keys @ W.t(), (U, v, 1.0)),
            "bilinear": (keys, (U[:hidden], None, 1.0)),
            "scaled_dot": (keys, (None, None, hidden**0.5)),
        }[scorer]
        queries, contexts, weights = fused.bahdanau_gru_loop(
            embedded,
            keys[:, -1],
            keys,
            prepared,
            mask,
            (decoder.weight_ih_l0, decoder.weight_hh_l0, decoder.bias_ih_l0, decoder.bias_hh_l0),
            loop_scorer,
        )
        loss = sum(
            (o * torch.linspace(0.5, 2, o.size(-1))).sum() for o in (queries, contexts, weights)
        )
        loss.backward()
        return [keys, queries, contexts, weights, *(leaf.grad for leaf in leaves)]

    return run


@pytest.mark.parametrize("fed", [3, 0], ids=["with-embedding", "context-alone"])
@pytest.mark.parametrize("padding", [0, 5])
@pytest.mark.parametrize("scorer", ["additive", "bilinear", "scaled_dot"])
def test_the_loops_with_the_kernels_equal_the_loops_without(
    kernels, fed, padding, scorer, monkeypatch
):
    """Every output and gradient of gru_layer and bahdanau_gru_loop through autograd, with the
    kernels and without; with `padding`, the products' buffers have zero rows past the batch,
    as bf16 pads them. The product scorers use the GRU's kernels only."""
    monkeypatch.setattr(blocks, "padded_rows", lambda rows, dtype, device: rows + padding)
    run = loops(fed, scorer)
    spy = Spy(kernels)
    monkeypatch.setattr(native, "kernels", lambda: spy)
    outputs = run()
    energy = {"energy_forward", "energy_backward"} if scorer == "additive" else set()
    assert set(spy.calls) == {"gru_forward", "gru_backward", *energy}
    monkeypatch.setattr(native, "kernels", lambda: None)
    assert_all_close(outputs, run())


def test_the_fp32_encoder_runs_as_gru_layer_where_the_kernels_load(kernels, monkeypatch):
    """The default model's encoder twin: each direction as gru_layer with the kernels, as
    torch's GRU without; the model equal to the plain one either way."""
    plain, accelerated = twins()
    layers = []
    monkeypatch.setattr(fast, "gru_layer", lambda *a: layers.append(1) or fused.gru_layer(*a))
    for loaded, directions in ((kernels, 2), (None, 0)):
        monkeypatch.setattr(native, "kernels", lambda loaded=loaded: loaded)
        layers.clear()
        assert_all_close(teacher_forced(accelerated), teacher_forced(plain))
        assert len(layers) == directions


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_loss_with_the_kernel_equals_the_loss_without(kernels, smoothing, monkeypatch):
    """linear_cross_entropy in fp32: one softmax_xent call a block, the loss and every gradient
    as the torch code's; logits from -30 to 30, so that some probabilities underflow."""
    torch.manual_seed(6)
    inputs = (torch.randn(37, 12) * 3).requires_grad_()
    weight, bias = torch.randn(300, 12).requires_grad_(), torch.randn(300).requires_grad_()
    target = torch.randint(0, 300, (37,))
    results, spy = [], Spy(kernels)
    for loaded in (spy, None):
        monkeypatch.setattr(native, "kernels", lambda loaded=loaded: loaded)
        loss = linear_cross_entropy(inputs, weight, bias, target, smoothing, rows=16)
        loss.backward()
        results.append([loss, *(t.grad.clone() for t in (inputs, weight, bias))])
        inputs.grad = weight.grad = bias.grad = None
    assert results[0][0].abs() > 100  # logits wide enough to test something
    assert_all_close(*results)
    assert spy.calls == {"softmax_xent": 3}  # 37 rows in blocks of 16


def test_the_loss_kernel_refuses_an_id_outside_the_vocabulary(kernels):
    logits, grad_bias = torch.randn(4, 10), torch.zeros(10)
    with pytest.raises(RuntimeError, match="target 10 at row 2 is outside the vocabulary of 10"):
        kernels.softmax_xent(logits, torch.tensor([0, 9, 10, 1]), 0.1, grad_bias)
    with pytest.raises(RuntimeError, match="grad_bias: expected shape"):
        kernels.softmax_xent(logits, torch.tensor([0, 9, 1, 1]), 0.1, torch.zeros(9))


def test_bf16_keeps_the_torch_code(kernels, monkeypatch):
    spy = Spy(kernels)
    monkeypatch.setattr(native, "kernels", lambda: spy)
    run = loops(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        run()
    assert spy.calls == {}


def test_the_first_use_logs_on_once(kernels, fresh_kernels, caplog):
    caplog.set_level(logging.INFO, logger=native.__name__)
    assert native.kernels() is not None
    assert native.kernels() is not None
    assert [r.getMessage() for r in caplog.records] == ["fused C++ GRU: on"]


def test_without_a_compiler_the_torch_code_runs_and_the_log_says_why(
    fresh_kernels, caplog, monkeypatch, tmp_path
):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # nothing built there
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    caplog.set_level(logging.INFO, logger=native.__name__)
    gru = torch.nn.GRU(3, 5, batch_first=True)
    inputs = torch.randn(4, 6, 3)
    states = fused.gru_layer(inputs, tuple(gru.parameters()))
    torch.testing.assert_close(states, gru(inputs)[0], **FP32)
    assert native.kernels() is None
    assert [r.getMessage() for r in caplog.records] == [
        f"fused C++ GRU: off: no C++ compiler ('{tmp_path / 'no-such-compiler'}': install one, "
        "or set CXX)"
    ]


def test_attnmt_native_0_forces_the_torch_code(fresh_kernels, caplog, monkeypatch):
    monkeypatch.setenv(native.SWITCH, "0")
    monkeypatch.setattr(native, "load", lambda: pytest.fail("loaded with ATTNMT_NATIVE=0"))
    caplog.set_level(logging.INFO, logger=native.__name__)
    assert native.kernels() is None
    assert fused._kernels_for(torch.float32) is None
    assert [r.getMessage() for r in caplog.records] == ["fused C++ GRU: off: ATTNMT_NATIVE=0"]


def test_a_lock_left_by_an_interrupted_build_is_reported_not_waited_on(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    lock = native.build_directory(native.library_name()) / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    old = time.time() - native.STALE_LOCK_SECONDS - 60
    os.utime(lock, (old, old))
    with pytest.raises(native.NativeUnavailable, match="interrupted build: delete it"):
        native.load()
