"""One equivalence harness: every fast twin (attnmt/model/fast.py) against the plain module it
replaces, forward and every gradient, exactly in fp32 (within 1e-5) and close under bf16.

Each case builds a tiny model twice from one seed, plain (`model.fast=false`) and accelerated,
runs the same inputs through both and compares what comes out. The cases say which twin they
reach, and check that it ran (a twin that fell back to its plain code would pass for nothing).
"""

import copy
from dataclasses import replace

import pytest
import torch

from attnmt.model import blocks, fast, fused
from attnmt.model.accelerate import TWINS, accelerate
from attnmt.model.fast import copies_of
from attnmt.options import option_names
from tests.model.test_seq2seq import batch, tiny_model

FP32 = {"rtol": 1e-5, "atol": 1e-5}
# bf16 keeps 8 bits of mantissa: the two paths round their products at different points.
BF16 = {"rtol": 0.05, "atol": 0.05}


def twins(*overrides):
    """The plain model of `overrides` and an accelerated copy with the same weights."""
    plain = tiny_model(*overrides, "model.fast=false")
    assert not any(type(m) in TWINS.values() for m in plain.modules())
    return plain, accelerate(copy.deepcopy(plain))


def teacher_forced(model, guide_weight=0.0):
    """The loss, the features and weights, and every parameter's gradient, of one teacher-forced
    pass whose loss reads every position of both outputs, unevenly."""
    model.zero_grad()
    source, lengths, previous = batch()
    features, weights = model(source, lengths, previous)
    loss = model.logits(features).float().logsumexp(-1).mul(torch.linspace(0.5, 2, 4)).sum()
    loss = loss + guide_weight * weights.float().clamp_min(1e-9).log().mul(weights.detach()).sum()
    loss.backward()
    grads = [p.grad.float() for p in model.parameters() if p.grad is not None]
    return [loss.detach(), features.detach().float(), weights.detach().float(), *grads]


def decoded(model):
    """Three decoding steps as beam search takes them: 2 hypotheses a sentence, then rows picked
    with repeats (copies of one hypothesis), then a sentence dropped and the rows reordered:
    each step's logits and weights, and the last coverage where the scorer keeps one."""
    source, lengths, _ = batch()
    outputs = []
    with torch.no_grad():
        _, state = model.encode(source, lengths)
        for rows, sentences, words in (
            (torch.arange(3).repeat_interleave(2), None, [5, 6, 7, 8, 9, 10]),
            (torch.tensor([0, 0, 3, 2, 4, 4]), None, [4, 5, 6, 7, 8, 9]),
            (torch.tensor([5, 4, 1, 0]), torch.tensor([2, 0]), [6, 7, 8, 9]),
        ):
            state = state.select(rows, sentences)
            logits, weights, state = model.decoder.step(torch.tensor(words), state)
            outputs += [logits.float(), weights.float()]
    return outputs + ([] if state.coverage is None else [state.coverage])


def assert_all_close(fast_outputs, plain_outputs, tolerance):
    assert len(fast_outputs) == len(plain_outputs)
    for i, (a, b) in enumerate(zip(fast_outputs, plain_outputs, strict=True)):
        torch.testing.assert_close(a, b, **tolerance, msg=lambda m, i=i: f"output {i}: {m}")


BAHDANAU = "decoder=bahdanau"  # the fused loop's decoder, named where a case is about it
DECODERS = [
    [BAHDANAU],
    ["decoder=luong"],
    ["decoder=luong", "decoder.input_feeding=false"],
]
MODELS = [
    *[[*d, f"attention={a}"] for d in DECODERS for a in option_names("attention")],
    [BAHDANAU, "decoder.feed_prev_output=false"],
    [BAHDANAU, "decoder.rnn_type=lstm"],
    [BAHDANAU, "decoder.num_layers=2"],
    [BAHDANAU, "encoder.rnn_type=lstm", "encoder.num_layers=2"],
    [BAHDANAU, "encoder.rnn_type=rnn", "encoder.bidirectional=false", "encoder.num_layers=2"],
]
# What keeps a model's teacher forcing off the fused loop (`FastBahdanauDecoder.runs_fused`),
# and the scorers it computes.
NOT_FUSED = ("decoder=luong", "decoder.rnn_type", "decoder.num_layers", "attention=")
LOOP_SCORERS = [f"attention={a}" for a in ("additive", "dot", "scaled_dot", "bilinear")]


def takes_the_fused_loop(overrides):
    return not any(o.startswith(NOT_FUSED) and o not in LOOP_SCORERS for o in overrides)


def pad_rows(monkeypatch, padding):
    """The products' buffers `padding` rows past the batch, as bf16 pads them (fp32 does not)."""
    monkeypatch.setattr(blocks, "padded_rows", lambda rows, dtype, device: rows + padding)


def training_case(overrides, padding, guide_weight):
    """Teacher forcing, forward and backward: BlockedLinear, PaddedRNNEncoder and, for FUSED,
    the fused loop."""

    def run(monkeypatch):
        pad_rows(monkeypatch, padding)
        plain, accelerated = twins(*overrides)
        state = accelerated.encode(*batch()[:2])[1]
        assert type(accelerated.encoder) is fast.PaddedRNNEncoder
        if isinstance(accelerated.decoder, fast.FastBahdanauDecoder):
            assert accelerated.decoder.runs_fused(state) == takes_the_fused_loop(overrides)
        expected = teacher_forced(plain, guide_weight)
        return teacher_forced(accelerated, guide_weight), expected, FP32

    return run


def decoding_case(overrides):
    """Beam search's steps: the copy-aware attention where the decoder has it."""

    def run(monkeypatch):
        plain, accelerated = twins(*overrides)
        plain.eval(), accelerated.eval()
        if isinstance(accelerated.decoder, fast.FastBahdanauDecoder):
            _, state = accelerated.encode(*batch()[:2])
            assert state.select(torch.tensor([0, 0, 1, 2])).copies is not None
        return decoded(accelerated), decoded(plain), FP32

    return run


def bf16_training_case(overrides):
    """Under bf16 autocast: blocked products, the fused loop, gru_layer in the encoder."""

    def run(monkeypatch):
        plain, accelerated = twins(*overrides)
        layers, loops = [], []
        monkeypatch.setattr(fast, "gru_layer", lambda *a: layers.append(1) or fused.gru_layer(*a))
        monkeypatch.setattr(
            fast, "bahdanau_gru_loop", lambda *a: loops.append(1) or fused.bahdanau_gru_loop(*a)
        )
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = teacher_forced(plain)
            outputs = teacher_forced(accelerated)
        assert layers  # the encoder's GRU ran as gru_layer
        assert bool(loops) == takes_the_fused_loop(overrides)
        return outputs, expected, BF16

    return run


def bf16_decoding_case(*overrides):
    """bf16 weights: the bf16 GRU decoding step (gru_step) and blocked products."""

    def run(monkeypatch):
        return bf16_decoded(monkeypatch, *overrides)

    return run


def bf16_decoded(monkeypatch, *overrides):
    plain, accelerated = twins(*overrides)
    plain, accelerated = plain.eval().bfloat16(), accelerated.eval().bfloat16()
    steps = []
    monkeypatch.setattr(fast, "gru_step", lambda *a: steps.append(1) or fused.gru_step(*a))
    expected, outputs = decoded(plain), decoded(accelerated)
    assert len(steps) == 3  # each step took the bf16 GRU step
    return outputs, expected, BF16


def gru_and_inputs(dtype=torch.float32):
    torch.manual_seed(1)
    gru = torch.nn.GRU(3, 5, batch_first=True).to(dtype)  # unequal sizes: input 3, hidden 5
    inputs = torch.randn(4, 6, 3, dtype=dtype, requires_grad=True)
    return gru, inputs


def gru_layer_case(autocast, padding):
    """fused.gru_layer, the encoder twin's GRU (bf16, and fp32 with the C++ kernels), against
    nn.GRU with every gradient."""

    def run(monkeypatch):
        pad_rows(monkeypatch, padding)
        gru, inputs = gru_and_inputs()
        weights = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
        results = []
        for layer in (lambda: fused.gru_layer(inputs, weights), lambda: gru(inputs)[0]):
            gru.zero_grad()
            inputs.grad = None
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                states = layer()
            states.float().mul(torch.linspace(0.5, 2, 5)).sum().backward()
            results.append([states.detach().float(), inputs.grad, *(w.grad for w in weights)])
        return *results, BF16 if autocast else FP32

    return run


def gru_step_case(dtype):
    """fused.gru_step, the decoders' bf16 step, against one step of nn.GRU."""

    def run(monkeypatch):
        gru, inputs = gru_and_inputs(dtype)
        query = torch.randn(4, 5, dtype=dtype)
        with torch.no_grad():
            step = fused.gru_step(inputs[:, 0], query, gru)
            _, expected = gru(inputs[:, :1], query.unsqueeze(0))
        assert step.dtype == dtype
        return [step.float()], [expected[0].float()], BF16 if dtype == torch.bfloat16 else FP32

    return run


def linear_case(autocast):
    """BlockedLinear against nn.Linear, several blocks of rows, the last one padded."""

    def run(monkeypatch):
        monkeypatch.setattr(blocks, "BLOCK_ROWS", 256)
        torch.manual_seed(2)
        layer = torch.nn.Linear(7, 5)
        twin = accelerate(copy.deepcopy(layer))
        assert type(twin) is fast.BlockedLinear
        x = torch.randn(700, 7, requires_grad=True)
        results = []
        for module in (twin, layer):
            module.zero_grad()
            x.grad = None
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                assert blocks.runs_blocked(x) == autocast  # else the twin is F.linear
                y = module(x)
            y.float().mul(torch.linspace(0.5, 2, 5)).sum().backward()
            results.append([y.detach().float(), x.grad, module.weight.grad, module.bias.grad])
        return *results, BF16 if autocast else FP32

    return run


def dropout_case(monkeypatch):
    """fast.Dropout against nn.Dropout's formula for the mask it drew: kept elements scaled by
    1 / (1 - p), the gradient through them only (tests/model/test_dropout.py: its rate)."""
    torch.manual_seed(3)
    twin = accelerate(torch.nn.Sequential(torch.nn.Dropout(0.3)))[0]
    assert type(twin) is fast.Dropout
    x = torch.randn(50, 40, requires_grad=True)
    y = twin(x)
    kept = y != 0
    assert 0.6 < kept.float().mean() < 0.8
    y.sum().backward()
    expected = [torch.where(kept, x / 0.7, 0.0).detach(), kept.float() / 0.7, x]
    return [y.detach(), x.grad, twin.eval()(x)], expected, FP32


CASES = {
    **{
        f"train-{'-'.join(o)}-pad{p}": training_case(o, p, g)
        for o in MODELS
        for p, g in ((0, 0.0), (5, 0.7))
    },
    **{f"decode-{'-'.join(o)}": decoding_case(o) for o in MODELS},
    **{
        f"bf16-train-{'-'.join(o)}": bf16_training_case(o)
        for o in (
            [BAHDANAU],
            [BAHDANAU, "attention=scaled_dot"],
            [BAHDANAU, "attention=bilinear"],
            [BAHDANAU, "encoder.num_layers=2"],
            ["decoder=luong", "decoder.input_feeding=false"],
        )
    },
    **{
        f"bf16-decode-{'-'.join(o)}": bf16_decoding_case(*o)
        for o in ([BAHDANAU], ["decoder=luong"], ["decoder=luong", "decoder.input_feeding=false"])
    },
    **{f"gru_layer-{a}-pad{p}": gru_layer_case(a, p) for a in (False, True) for p in (0, 5)},
    "gru_step-fp32": gru_step_case(torch.float32),
    "gru_step-bf16": gru_step_case(torch.bfloat16),
    "linear-fp32": linear_case(False),
    "linear-bf16": linear_case(True),
    "dropout": dropout_case,
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_fast_twin_equals_its_plain_module(case, monkeypatch):
    fast_outputs, plain_outputs, tolerance = case(monkeypatch)
    assert_all_close(fast_outputs, plain_outputs, tolerance)


def test_the_models_of_the_cases_reach_every_twin():
    reached = {type(m) for overrides in MODELS for m in twins(*overrides)[1].modules()}
    assert set(TWINS.values()) - reached == set()


def test_a_checkpoint_is_the_same_file_for_both_and_loads_into_either():
    plain, accelerated = twins()
    assert plain.state_dict().keys() == accelerated.state_dict().keys()
    other = tiny_model("model.fast=false")
    torch.manual_seed(9)
    for p in accelerated.parameters():
        p.data.normal_()
    other.load_state_dict(accelerated.state_dict())
    assert_all_close(teacher_forced(other), teacher_forced(accelerated), FP32)


def test_which_models_take_the_fused_loop():
    for overrides, fused_loop in (
        ([BAHDANAU], True),
        ([BAHDANAU, "decoder.feed_prev_output=false"], True),
        ([BAHDANAU, "attention=dot"], True),
        ([BAHDANAU, "attention=scaled_dot"], True),
        ([BAHDANAU, "attention=bilinear"], True),
        ([BAHDANAU, "attention=coverage"], False),
        ([BAHDANAU, "attention=local_p"], False),
        ([BAHDANAU, "attention=dot", "attention.window=local_p"], False),
        ([BAHDANAU, "attention=multihead"], False),
        ([BAHDANAU, "decoder.rnn_type=lstm"], False),
        ([BAHDANAU, "decoder.num_layers=2"], False),
    ):
        _, accelerated = twins(*overrides)
        state = accelerated.encode(*batch()[:2])[1]
        assert accelerated.decoder.runs_fused(state) == fused_loop, overrides
        copied = state.select(torch.tensor([0, 0, 1, 2]))
        assert not accelerated.decoder.runs_fused(copied)  # copies never train
        assert not accelerated.decoder.runs_fused(replace(state, keys=state.keys.to("meta")))


def test_copies_name_each_repeated_rows_first_position():
    first, inverse = copies_of(torch.tensor([3, 3, 5, 3, 7, 5]))
    assert first.tolist() == [0, 2, 4] and inverse.tolist() == [0, 0, 1, 0, 2, 1]
    assert copies_of(torch.tensor([4, 1, 2])) is None


@pytest.mark.parametrize("attention", option_names("attention"))
def test_copied_rows_attend_once_with_the_numbers_each_would_get(attention, monkeypatch):
    model = tiny_model(BAHDANAU, f"attention={attention}").eval()  # attends before it steps
    source, lengths, _ = batch()
    with torch.no_grad():
        _, state = model.encode(source, lengths)
        two = state.select(torch.arange(3).repeat_interleave(2))  # 2 hypotheses a sentence
        _, _, state = model.decoder.step(torch.tensor([5, 6, 7, 8, 9, 10]), two)
        assert state.copies is None  # after the step, the two differ
        rows = torch.tensor([0, 0, 1, 3, 2, 3, 5, 5, 5])  # 3 a sentence, from 5 distinct rows
        copied = state.select(rows)
        words = torch.tensor([5, 6, 7, 8, 9, 10, 4, 5, 6])
        queries = []
        score = model.decoder.attention.score
        monkeypatch.setattr(
            model.decoder.attention,
            "score",
            lambda q, k, *coverage: queries.append(q.shape) or score(q, k, *coverage),
        )
        logits, weights, after = model.decoder.step(words, copied)
        alone, alone_weights, alone_after = model.decoder.step(words, replace(copied, copies=None))
    # The same arithmetic per row; a product of fewer rows may round its last bit otherwise.
    assert torch.allclose(logits, alone, atol=1e-6)
    assert torch.allclose(weights, alone_weights, atol=1e-6)
    if after.coverage is not None:  # each copy's coverage: its own row's, this step added
        assert torch.allclose(after.coverage, alone_after.coverage, atol=1e-6)
        assert torch.allclose(after.coverage, state.coverage[rows] + weights, atol=1e-6)
    attended = queries[0][0] * queries[0][-2]  # (rows or sentences, [heads,] queries each, D)
    assert attended == 5  # not 9: the distinct rows
    assert after.copies is None
