"""Every encoder x decoder x scorer builds and trains; padding, state shapes, the step API."""

import itertools

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.model.build import build_model
from attnmt.model.seq2seq import parameter_summary
from attnmt.options import option_names
from attnmt.vocab import PAD_ID
from tests.conftest import compose_config, plain

SRC_VOCAB, TGT_VOCAB = 11, 13
# Unequal tiny sizes catch transposes: embeddings 3/4, encoder 7 (x2), decoder 5, attention 6.
TINY = [
    "encoder.embedding_dim=3",
    "encoder.hidden_size=7",
    "decoder.embedding_dim=4",
    "decoder.hidden_size=5",
    "encoder.dropout=0.0",
    "decoder.dropout=0.0",
]


def tiny_model(*overrides):
    cfg = plain(compose_config("train", [*TINY, *overrides]))
    if "attn_dim" in cfg["attention"]:
        cfg["attention"]["attn_dim"] = 6
    if "heads" in cfg["attention"]:
        cfg["attention"]["heads"] = 2
    torch.manual_seed(0)
    return build_model(cfg, SRC_VOCAB, TGT_VOCAB)


def batch():
    source = torch.tensor([[5, 6, 7, 8, 3], [9, 4, 3, PAD_ID, PAD_ID], [10, 3, PAD_ID, 0, 0]])
    lengths = (source != PAD_ID).sum(1)
    previous = torch.tensor([[2, 5, 6, 7], [2, 8, 9, PAD_ID], [2, 11, PAD_ID, PAD_ID]])
    return source, lengths, previous


COMBINATIONS = list(
    itertools.product(option_names("encoder"), option_names("decoder"), option_names("attention"))
)


@pytest.mark.parametrize("encoder,decoder,attention", COMBINATIONS)
def test_every_combination_runs_forward_and_backward(encoder, decoder, attention):
    model = tiny_model(f"encoder={encoder}", f"decoder={decoder}", f"attention={attention}")
    source, lengths, previous = batch()
    features, weights = model(source, lengths, previous)
    logits = model.logits(features)
    assert logits.shape == (3, 4, TGT_VOCAB) and weights.shape == (3, 4, 5)
    logits.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing, f"no gradient reaches {missing}"


@pytest.mark.parametrize("decoder", ["bahdanau", "luong"])
def test_padded_batch_equals_each_sentence_alone(decoder):
    model = tiny_model(f"decoder={decoder}", "decoder.num_layers=2", "encoder.num_layers=3").eval()
    source, lengths, previous = batch()
    with torch.no_grad():
        logits = model.logits(model(source, lengths, previous)[0])
        for i in range(3):
            n, m = lengths[i].item(), (previous[i] != PAD_ID).sum().item()
            alone = model.logits(
                model(source[i : i + 1, :n], lengths[i : i + 1], previous[i : i + 1, :m])[0]
            )
            assert torch.allclose(logits[i, :m], alone[0], atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        ["encoder=lstm", "decoder.rnn_type=gru", "decoder.num_layers=3"],
        ["encoder=gru", "decoder.rnn_type=lstm", "encoder.num_layers=2"],
        ["encoder=rnn", "encoder.bidirectional=false", "decoder.rnn_type=rnn"],
        ["decoder.init=mean", "decoder.rnn_type=lstm", "decoder.num_layers=2"],
        ["decoder.init=zeros", "decoder=luong", "decoder.rnn_type=lstm"],
    ],
)
def test_decoder_starts_from_any_encoder_shape(overrides):
    model = tiny_model(*overrides)
    source, lengths, previous = batch()
    _, state = model.encode(source, lengths)
    layers = model.decoder.rnn.num_layers
    assert state.hidden.shape == (layers, 3, 5)
    assert (state.cell is not None) == (model.decoder.rnn.mode == "LSTM")
    model.logits(model(source, lengths, previous)[0]).sum().backward()


@pytest.mark.parametrize(
    "overrides",
    [
        ["decoder=bahdanau"],
        ["decoder=bahdanau", "decoder.feed_prev_output=false"],
        ["decoder=luong"],
        ["decoder=luong", "decoder.input_feeding=false"],
    ],
)
def test_step_api_equals_teacher_forcing_and_state_reorders(overrides):
    model = tiny_model(*overrides).eval()
    with_all = tiny_model(overrides[0])
    narrower = len(overrides) > 1  # the RNN reads the context (or the word) alone
    assert (model.decoder.rnn.input_size < with_all.decoder.rnn.input_size) == narrower
    source, lengths, previous = batch()
    with torch.no_grad():
        forced = model.logits(model(source, lengths, previous)[0])
        _, state = model.encode(source, lengths)
        for t in range(previous.size(1)):
            logits, _, state = model.decoder.step(previous[:, t], state)
            assert torch.allclose(logits, forced[:, t], atol=1e-6)
        _, state = model.encode(source, lengths)
        order = torch.tensor([2, 0, 1])  # reorder sentences, rows with them
        logits, _, _ = model.decoder.step(previous[order, 0], state.select(order, order))
        assert torch.allclose(logits, forced[order, 0], atol=1e-6)
        _, state = model.encode(source, lengths)
        grown = state.select(torch.arange(3).repeat_interleave(2))  # 2 beams per sentence
        logits, _, _ = model.decoder.step(previous[:, 0].repeat_interleave(2), grown)
        assert torch.allclose(logits, forced[:, 0].repeat_interleave(2, dim=0), atol=1e-6)


@pytest.mark.parametrize("decoder", option_names("decoder"))
def test_coverage_is_the_running_sum_of_past_weights(decoder):
    model = tiny_model(f"decoder={decoder}", "attention=coverage").eval()
    source, lengths, previous = batch()
    with torch.no_grad():
        _, state = model.encode(source, lengths)
        assert torch.equal(state.coverage, torch.zeros(3, 5))  # nothing attended yet
        steps = []
        for t in range(previous.size(1)):
            _, weights, state = model.decoder.step(previous[:, t], state)
            steps.append(weights)
            assert torch.allclose(state.coverage, torch.stack(steps).sum(0), atol=1e-6)
        _, forced = model(source, lengths, previous)  # teacher forcing: (B, T, S)
    assert torch.allclose(forced.sum(1), state.coverage, atol=1e-5)
    padding = torch.arange(5) >= lengths.unsqueeze(1)
    assert torch.all(state.coverage[padding] == 0)
    assert not torch.allclose(steps[0], steps[-1])  # the coverage changes what is attended


@pytest.mark.parametrize("decoder", option_names("decoder"))
def test_select_reorders_grows_and_shrinks_the_coverage_with_its_rows(decoder):
    model = tiny_model(f"decoder={decoder}", "attention=coverage").eval()
    source, lengths, _ = batch()
    with torch.no_grad():
        _, state = model.encode(source, lengths)
        state = state.select(torch.arange(3).repeat_interleave(2))  # 2 hypotheses a sentence
        for words in ([5, 6, 7, 8, 9, 10], [4, 11, 6, 5, 12, 7]):  # the two now differ
            _, _, state = model.decoder.step(torch.tensor(words), state)
        rows = torch.tensor([1, 0, 2, 3, 5, 4])  # beams swapped within sentences 0 and 2
        moved = state.select(rows)
        assert torch.equal(moved.coverage, state.coverage[rows])
        words = torch.tensor([5, 6, 7, 8, 9, 10])
        logits, _, after = model.decoder.step(words, moved)
        unmoved_words = torch.empty_like(words).index_copy_(0, rows, words)
        unmoved, _, unmoved_after = model.decoder.step(unmoved_words, state)
        assert torch.allclose(logits, unmoved[rows], atol=1e-6)
        assert torch.allclose(after.coverage, unmoved_after.coverage[rows], atol=1e-6)
        kept = state.select(torch.tensor([4, 5]), torch.tensor([2]))  # only sentence 2 goes on
        assert torch.equal(kept.coverage, state.coverage[4:6]) and kept.mask.shape == (1, 5)
        alone, _, _ = model.decoder.step(words[4:], kept)
        assert torch.allclose(alone, model.decoder.step(words, state)[0][4:], atol=1e-6)


def test_tied_embeddings_share_one_tensor():
    model = tiny_model("decoder=bahdanau", "decoder.tie_embeddings=true")
    assert model.decoder.output.weight is model.decoder.embedding.weight


def test_impossible_combinations_name_the_keys():
    with pytest.raises(ConfigError, match="decoder.tie_embeddings.*decoder.embedding_dim"):
        tiny_model("decoder=luong", "decoder.tie_embeddings=true")
    with pytest.raises(ConfigError, match="encoder.rnn_type='transformer'"):
        tiny_model("encoder.rnn_type=transformer")
    with pytest.raises(ConfigError, match="decoder.init='last'"):
        tiny_model("decoder.init=last")


def test_dot_attention_just_works_with_the_default_sizes():
    cfg = plain(compose_config("train", ["attention=dot"]))
    model = build_model(cfg, SRC_VOCAB, TGT_VOCAB)
    assert model.encoder.output_size == 512 and model.decoder.hidden_size == 256
    source, lengths, previous = batch()
    assert model(source, lengths, previous)[0].shape[:2] == (3, 4)


def test_parameter_summary_counts_every_parameter_once():
    model = tiny_model("decoder=bahdanau", "decoder.tie_embeddings=true")
    total = sum(p.numel() for p in model.parameters())  # shared tensors appear once here too
    assert parameter_summary(model).splitlines()[-1].split()[-1] == f"{total:,}"


@pytest.mark.parametrize("attention", option_names("attention"))
def test_luong_without_input_feeding_trains_all_steps_at_once_as_the_step_loop(attention):
    from attnmt.model.decoder import AttentionDecoder

    overrides = ["decoder=luong", "decoder.input_feeding=false", "decoder.num_layers=2"]
    model = tiny_model(*overrides, f"attention={attention}")
    assert type(model.decoder).forward is not AttentionDecoder.forward  # two paths compared
    source, lengths, previous = batch()
    real = previous != PAD_ID
    results = []
    for forward in (type(model.decoder).forward, AttentionDecoder.forward):  # at once, loop
        model.zero_grad()
        _, state = model.encode(source, lengths)
        features, weights = forward(model.decoder, previous, state)
        loss = model.logits(features)[real].log_softmax(-1).sum()
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results.append((loss.detach(), weights.detach(), grads))
    (at_once, weights, grads), (looped, looped_weights, looped_grads) = results
    assert torch.allclose(at_once, looped, rtol=1e-5)
    assert torch.allclose(weights, looped_weights, atol=1e-6)
    pairs = zip(grads, looped_grads, strict=True)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in pairs)
