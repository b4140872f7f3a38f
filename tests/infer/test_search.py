"""Greedy and beam search agree where they must; n-best lists are ordered; batches that join a
running search find what they find alone."""

import math

import pytest
import torch

from attnmt.infer.fast import LOG_PROB_ROWS, block_rows, pick_log_probs, row_top_k
from attnmt.infer.search import beam_search, best_extensions, greedy, max_lengths
from attnmt.runtime import quantize
from attnmt.vocab import BOS_ID, EOS_ID
from tests.model.test_seq2seq import batch, tiny_model


def _model_and_source(seed):
    model = tiny_model("decoder.dropout=0.0").eval()
    torch.manual_seed(seed)
    with torch.no_grad():  # sharpen the random model so outputs vary in length
        for p in model.parameters():
            p.mul_(3)
    source, lengths, _ = batch()
    return model, source, lengths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_is_exactly_greedy(seed):
    model, source, lengths = _model_and_source(seed)
    limits = max_lengths(lengths, 2.0, 3)
    greedy_ids = [h.ids for h in greedy(model, source, lengths, limits, keep_attention=False)]
    beam = beam_search(model, source, lengths, limits, 1, alpha=1.0, keep_attention=False)
    assert [h[0].ids for h in beam] == greedy_ids


def test_nbest_lists_are_ordered_by_score_and_attention_fits():
    model, source, lengths = _model_and_source(0)
    limits = max_lengths(lengths, 2.0, 3)
    found = beam_search(model, source, lengths, limits, 4, alpha=0.6, keep_attention=True, n_best=4)
    for hypotheses, limit in zip(found, limits.tolist(), strict=True):
        scores = [h.score for h in hypotheses]
        assert len(hypotheses) == 4 and scores == sorted(scores, reverse=True)
        for h in hypotheses:
            assert len(h.ids) <= limit
            steps = h.attention.shape[0]
            assert steps in (len(h.ids), len(h.ids) + 1)  # + the EOS step when it ended so
            assert torch.allclose(h.attention.sum(-1), torch.ones(steps), atol=1e-5)


def test_beam_finds_a_sequence_at_least_as_likely_as_greedy_without_penalty():
    model, source, lengths = _model_and_source(1)
    limits = max_lengths(lengths, 2.0, 3)
    greedy_scores = [h.score for h in greedy(model, source, lengths, limits, False)]
    beam = beam_search(model, source, lengths, limits, 5, alpha=0.0, keep_attention=False)
    for hypotheses, greedy_score in zip(beam, greedy_scores, strict=True):
        assert hypotheses[0].score >= greedy_score - 1e-5


@pytest.mark.parametrize("eos_bias", [2.0, 3.0])
def test_stopping_at_the_first_best_hypothesis_is_exact_without_penalty(eos_bias):
    # With alpha=0 a running hypothesis only loses log-probability, so a sentence whose best
    # finished hypothesis beats every running one can stop: asking for one hypothesis instead
    # of five decodes fewer rows but finds the same best.
    model, source, lengths = _model_and_source(0)
    with torch.no_grad():  # make EOS likely enough that some sentences end early
        model.decoder.output.bias[EOS_ID] += eos_bias
    limits = max_lengths(lengths, 2.0, 3)
    rows, step = [], model.decoder.step_features
    model.decoder.step_features = lambda previous, state: (
        rows.append(len(previous)) or step(previous, state)
    )
    one = beam_search(model, source, lengths, limits, 5, alpha=0.0, keep_attention=False)
    rows_one, rows[:] = sum(rows), []
    five = beam_search(model, source, lengths, limits, 5, alpha=0.0, keep_attention=False, n_best=5)
    assert rows_one < sum(rows)
    assert all(len(h) == 1 for h in one) and all(len(h) == 5 for h in five)
    assert [h[0].ids for h in one] == [h[0].ids for h in five]
    assert [h[0].score for h in one] == pytest.approx([h[0].score for h in five])


def test_best_extensions_match_ranking_every_beam_and_word():
    torch.manual_seed(0)
    n, width, vocab, count = 2, 3, 7, 4
    logits, scores = torch.randn(n * width, vocab), torch.randn(n, width)
    top_scores, origin, words = best_extensions(logits, scores, count)
    every = (scores.unsqueeze(-1) + logits.log_softmax(-1).view(n, width, vocab)).view(n, -1)
    expected_scores, expected_ids = every.topk(count, dim=-1)
    assert torch.allclose(top_scores, expected_scores)
    assert torch.equal(origin, expected_ids // vocab) and torch.equal(words, expected_ids % vocab)


@pytest.mark.parametrize("width", [4000, 4001, 30, 640])
def test_row_top_k_in_blocks_equals_topk(width):
    torch.manual_seed(width)
    values = torch.randn(64, width)
    values[0, ::37] = 10.0 + torch.arange(len(values[0, ::37]), dtype=torch.float)  # spread out
    values[1, :12] = 20.0 + torch.arange(12, dtype=torch.float)  # all in the first block
    top, at = row_top_k(values, 10)
    expected, expected_at = values.topk(10, dim=-1)
    assert torch.equal(top, expected) and torch.equal(at, expected_at)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [7, 64, 512])
def test_log_probs_picked_in_blocks_of_rows_equal_the_whole_step(rows, dtype):
    torch.manual_seed(rows)
    output = torch.nn.Linear(256, 300).to(dtype)
    features = torch.randn(513, 256).to(dtype)  # not a multiple of any block size
    with torch.no_grad():
        logits = output(features)
        whole = logits.float().log_softmax(-1)
        for pick in (lambda lp: lp.max(-1), lambda lp: row_top_k(lp, 5)):
            expected_values, expected_ids = pick(whole)
            values, ids = pick_log_probs(logits, pick, rows=rows)  # the logits in blocks
            assert torch.equal(values, expected_values) and torch.equal(ids, expected_ids)
            values, ids = pick_log_probs(features, pick, output, rows=rows)  # the product too:
            # its last bits may depend on how many rows it has (pick_log_probs)
            torch.testing.assert_close(values, expected_values, rtol=0, atol=1e-5)
            assert torch.equal(ids, expected_ids)


def test_an_int8_output_layer_and_other_devices_take_the_whole_step_at_once():
    model, _, _ = _model_and_source(0)
    cpu = torch.device("cpu")
    assert block_rows(model.decoder, cpu) == LOG_PROB_ROWS
    assert block_rows(model.decoder, torch.device("cuda")) is None
    # int8 scales each call's input by all its rows: blocks would change the logits
    assert block_rows(quantize(model, "int8", cpu).decoder, cpu) is None


def test_scores_with_a_length_penalty_are_log_p_over_the_penalty():
    from attnmt.infer.search import length_penalty
    from attnmt.vocab import BOS_ID

    model, source, lengths = _model_and_source(1)
    limits = max_lengths(lengths, 2.0, 3)
    found = beam_search(
        model, source, lengths, limits, 3, alpha=0.8, keep_attention=False, n_best=3
    )
    for i, hypotheses in enumerate(found):
        for h in hypotheses:
            target = h.ids + ([EOS_ID] if h.ended else [])
            previous = torch.tensor([[BOS_ID, *target[:-1]]])
            with torch.no_grad():
                features, _ = model(source[i : i + 1, : lengths[i]], lengths[i : i + 1], previous)
                log_probs = model.logits(features).log_softmax(-1)[0]
            log_p = log_probs[torch.arange(len(target)), torch.tensor(target)].sum().item()
            assert h.score == pytest.approx(log_p / length_penalty(len(h.ids) + 1, 0.8), abs=1e-4)
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)


def test_coverage_penalty_is_gnmts_formula_on_real_positions():
    from attnmt.infer.search import coverage_penalty

    coverage = torch.tensor([[0.5, 2.0, 0.25, 9.0], [1.0, 0.1, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    # beta * sum_i log(min(c_i, 1)) over real i: 0.4 (log 0.5 + log 1 + log 0.25), 0.4 log 0.1
    expected = [0.4 * (math.log(0.5) + math.log(0.25)), 0.4 * math.log(0.1)]
    assert coverage_penalty(coverage, mask, 0.4).tolist() == pytest.approx(expected)
    assert coverage_penalty(coverage, mask, 0.0).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_zero_coverage_penalty_leaves_the_beams_as_they_were(seed):
    model, source, lengths = _model_and_source(seed)
    limits = max_lengths(lengths, 2.0, 3)
    before = beam_search(model, source, lengths, limits, 4, 0.6, keep_attention=False, n_best=4)
    # The coverage kept, at a weight too small to reorder anything: the same hypotheses.
    tiny = beam_search(model, source, lengths, limits, 4, 0.6, False, n_best=4, beta=1e-9)
    for a, c in zip(before, tiny, strict=True):
        assert [h.ids for h in a] == [h.ids for h in c]
        assert [h.score for h in c] == pytest.approx([h.score for h in a], abs=1e-6)


class _Reader:
    """A stand-in model of two source positions and six words (a = 4, b = 5), its step's
    log-probabilities and attention set by the previous word alone: from BOS, a (P 0.6) or b
    (0.3), attending to position 0; then EOS (P 0.9), a attending to position 0 again and b
    to position 1. So "a" is the likelier output, but leaves position 1 unread."""

    A, B = 4, 5

    def __init__(self):
        self.decoder = self

    def encode(self, source, source_lengths):
        return None, self  # no state: each step depends on the previous word alone

    def select(self, rows, sentences=None):
        return self

    def step_features(self, previous, state):
        log_probs = torch.full((len(previous), 6), math.log(0.02))  # the logits
        weights = torch.full((len(previous), 2), 0.5)
        first = previous == BOS_ID
        log_probs[first] = torch.tensor([0.025, 0.025, 0.025, 0.025, 0.6, 0.3]).log()
        log_probs[~first, EOS_ID] = math.log(0.9)
        weights[first | (previous == self.A)] = torch.tensor([1.0, 0.0])
        weights[previous == self.B] = torch.tensor([0.0, 1.0])
        return log_probs, weights, state

    def logits(self, features):
        return features


@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_the_coverage_penalty_reranks_what_leaves_a_source_position_unread(beta):
    # "a" attends to position 0 twice (coverage 2, 0), "b" to each once (1, 1). beta = 0:
    # log P alone ranks a first; beta = 0.1 costs a 0.1 log 1e-6 (MIN_COVERAGE for its unread
    # position), about -1.38, more than the log 2 it leads by: b first.
    model, source, lengths = _Reader(), torch.tensor([[7, EOS_ID]]), torch.tensor([2])
    (found,) = beam_search(model, source, lengths, torch.tensor([5]), 2, 0.0, True, 2, beta)
    a = math.log(0.6 * 0.9) + beta * math.log(1e-6)
    b = math.log(0.3 * 0.9)
    expected = sorted([([model.A], a), ([model.B], b)], key=lambda h: -h[1])
    assert [h.ids for h in found] == [ids for ids, _ in expected]
    assert [h.score for h in found] == pytest.approx([score for _, score in expected], abs=1e-5)
    assert all(h.ended for h in found)


def _forced_log_p(model, source, length, hypothesis):
    from attnmt.vocab import BOS_ID

    target = hypothesis.ids + ([EOS_ID] if hypothesis.ended else [])
    previous = torch.tensor([[BOS_ID, *target[:-1]]])
    with torch.no_grad():
        features, weights = model(source[None, :length], length.view(1), previous)
        log_probs = model.logits(features).log_softmax(-1)[0]
    return log_probs[torch.arange(len(target)), torch.tensor(target)].sum().item(), weights[0]


@pytest.mark.parametrize(
    "overrides",
    [
        ["attention=coverage"],
        ["attention=coverage", "decoder=luong"],
        ["attention=local_p"],
        ["attention=dot", "attention.window=local_p", "decoder=luong"],
    ],
)
def test_beam_scores_are_log_p_over_length_plus_the_coverage_penalty(overrides):
    # Teacher forcing recomputes each hypothesis with no beams: a coverage row that select()
    # put with the wrong hypothesis would give other log-probabilities and other weights.
    from attnmt.infer.search import coverage_penalty, length_penalty

    model = tiny_model("decoder.dropout=0.0", *overrides).eval()
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3)
    source, lengths, _ = batch()
    limits = max_lengths(lengths, 2.0, 3)
    found = beam_search(model, source, lengths, limits, 3, 0.8, True, n_best=3, beta=0.7)
    for i, hypotheses in enumerate(found):
        n = lengths[i].item()
        for h in hypotheses:
            log_p, weights = _forced_log_p(model, source[i], lengths[i], h)
            assert torch.allclose(h.attention[:, :n], weights, atol=1e-5)
            coverage = h.attention.sum(0, keepdim=True)  # sum_t a_t,i
            penalty = coverage_penalty(coverage, torch.arange(5).view(1, -1) < n, 0.7).item()
            expected = log_p / length_penalty(len(h.ids) + 1, 0.8) + penalty
            assert h.score == pytest.approx(expected, abs=1e-4)
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)


def test_an_ensemble_of_one_coverage_model_searches_as_that_model():
    from attnmt.infer.ensemble import Ensemble

    model = tiny_model("decoder.dropout=0.0", "attention=coverage").eval()
    source, lengths, _ = batch()
    limits = max_lengths(lengths, 2.0, 3)
    alone = beam_search(model, source, lengths, limits, 3, 0.6, False, n_best=3, beta=0.5)
    ensemble = Ensemble([model]).eval()
    together = beam_search(ensemble, source, lengths, limits, 3, 0.6, False, n_best=3, beta=0.5)
    for a, b in zip(alone, together, strict=True):
        assert [h.ids for h in a] == [h.ids for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [[], ["attention=coverage"], ["attention.window=local_p"], ["decoder=luong", "attention=dot"]],
)
def test_a_bf16_model_searches_with_fp32_scores_and_attention(overrides):
    # The coverage sum and local-p's focus are fp32 beside the bf16 weights (dtype=bfloat16).
    model = tiny_model("decoder.dropout=0.0", *overrides).eval().to(torch.bfloat16)
    source, lengths, _ = batch()
    limits = max_lengths(lengths, 2.0, 3)
    for beam in (1, 3):
        found = beam_search(model, source, lengths, limits, beam, 1.0, True, 1, beta=0.2)
        for (hypothesis,) in found:
            assert hypothesis.attention.dtype == torch.float32
            assert math.isfinite(hypothesis.score)
    for hypothesis in greedy(model, source, lengths, limits, keep_attention=True):
        rows = hypothesis.attention.float().sum(-1)
        assert torch.all(rows <= 1.01) and math.isfinite(hypothesis.score)


def _batches(seed):
    """Three batches of random sentences, each longer than the one before, as translate cuts."""
    from attnmt.infer.search import SourceBatch
    from attnmt.vocab import PAD_ID

    generator = torch.Generator().manual_seed(seed)
    batches = []
    for count, longest in ((4, 3), (3, 5), (5, 7)):
        lengths = torch.randint(max(1, longest - 2), longest + 1, (count,), generator=generator)
        source = torch.randint(4, 11, (count, longest), generator=generator)
        source[torch.arange(longest) >= lengths[:, None]] = PAD_ID
        source[torch.arange(count), lengths - 1] = EOS_ID
        batches.append(SourceBatch(source, lengths, max_lengths(lengths, 2.0, 3)))
    return batches


@pytest.mark.parametrize(
    "overrides,beta",
    [
        ([], 0.0),
        (["attention=coverage"], 0.5),
        (["attention=dot", "attention.window=local_p", "decoder=luong"], 0.0),
        (["encoder=lstm", "decoder=luong", "decoder.input_feeding=false"], 0.2),
        (["decoder.rnn_type=lstm", "decoder.num_layers=2", "attention=multihead"], 0.0),
    ],
)
def test_batches_that_join_a_running_search_find_what_they_find_alone(overrides, beta):
    # A batch joining mid-search takes its first step alone, then joins with its words and
    # attention after padding and its keys padded to the longer source: none of it may show.
    from attnmt.infer.batches import beam_search_batches

    model = tiny_model("decoder.dropout=0.0", *overrides).eval()
    torch.manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3)
    batches = _batches(0)
    alone = beam_search_batches(model, batches, 3, 0.6, True, n_best=2, beta=beta)
    joined = beam_search_batches(
        model, batches, 3, 0.6, True, n_best=2, beta=beta, join_below=10**6
    )
    assert len(alone) == len(joined) == 12
    for a, b in zip(alone, joined, strict=True):
        assert [h.ids for h in a] == [h.ids for h in b]
        assert [h.ended for h in a] == [h.ended for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
        for x, y in zip(a, b, strict=True):
            n = x.attention.size(1)  # the joined ones have the longest source's columns
            assert torch.allclose(x.attention, y.attention[:, :n], atol=1e-6)
            assert not y.attention[:, n:].any()


def test_the_scheduler_without_joins_finds_what_beam_search_finds_batch_by_batch():
    # beam_search_batches' beams (JoinedBeams, every sentence started with its batch) against
    # BeamSearch's own: the same hypotheses, scores and attention, bit for bit.
    from attnmt.infer.batches import beam_search_batches

    model, _, _ = _model_and_source(0)
    batches = _batches(2)
    each = [
        found
        for b in batches
        for found in beam_search(model, b.source, b.lengths, b.limits, 3, 0.6, True, 2, 0.3)
    ]
    together = beam_search_batches(model, batches, 3, 0.6, True, n_best=2, beta=0.3)
    for a, b in zip(each, together, strict=True):
        assert [(h.ids, h.score, h.ended) for h in a] == [(h.ids, h.score, h.ended) for h in b]
        assert all(torch.equal(x.attention, y.attention) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("join_below", [1, 20])
def test_an_ensemble_joins_batches_and_a_batch_may_end_at_its_first_step(join_below):
    # Limits of 1 end every sentence of the second batch at its first step: nothing joins
    # from it; the third batch then joins the first's last sentences (join_below 20) or
    # starts afresh (1: never).
    from dataclasses import replace

    from attnmt.infer.batches import beam_search_batches
    from attnmt.infer.ensemble import Ensemble

    model = tiny_model("decoder.dropout=0.0").eval()
    batches = _batches(1)
    batches[1] = replace(batches[1], limits=torch.ones_like(batches[1].limits))
    ensemble = Ensemble([model]).eval()
    alone = beam_search_batches(model, batches, 3, 0.6, False, n_best=3)
    together = beam_search_batches(ensemble, batches, 3, 0.6, False, 3, join_below=join_below)
    for a, b in zip(alone, together, strict=True):
        assert [h.ids for h in a] == [h.ids for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    assert all(len(h.ids) <= 1 for found in alone[4:7] for h in found)


@pytest.mark.parametrize("width", [1, 5])
def test_row_top_k_ranks_all_beams_of_a_sentence_shifted_by_their_scores(width):
    torch.manual_seed(width)
    values = torch.randn(16, width, 4000).log_softmax(-1)  # blocks of 100: the blocked path
    shifts = -5 * torch.rand(16, width)
    shifts[3, 1:] = float("-inf")  # a sentence with one live beam
    values[4, :, 7] = 5.0  # one word best in every beam: the shifts decide
    top, at = row_top_k(values, 10, shifts)
    expected, expected_at = (values + shifts.unsqueeze(-1)).view(16, -1).topk(10, dim=-1)
    assert torch.equal(top, expected) and torch.equal(at, expected_at)
    if width > 1:
        assert (at[3] < 4000).all()


@torch.no_grad()
def _greedy_row_by_row(model, source, source_lengths, limits, keep_attention):
    """Greedy search as it was before GreedySearch, the oracle of the tests below: each step
    walked its rows in Python, adding each log-probability to a Python float."""
    from attnmt.infer.hypothesis import Hypothesis

    _, state = model.encode(source, source_lengths)
    batch = source.size(0)
    active = torch.arange(batch)
    previous = torch.full((batch,), BOS_ID, dtype=torch.long)
    outputs, scores, ended = [[] for _ in range(batch)], [0.0] * batch, [False] * batch
    attention = [[] for _ in range(batch)]
    rows = block_rows(model.decoder, source.device)
    for t in range(int(limits.max())):
        features, weights, state = model.decoder.step_features(previous, state)
        log_probs, words = pick_log_probs(
            features, lambda lp: lp.max(-1), model.decoder.logits, rows
        )
        for row, (index, word, log_prob) in enumerate(
            zip(active.tolist(), words.tolist(), log_probs.tolist(), strict=True)
        ):
            scores[index] += log_prob
            if word != EOS_ID:
                outputs[index].append(word)
            else:
                ended[index] = True
            if keep_attention:
                attention[index].append(weights[row])
        going = (words != EOS_ID) & (limits[active] > t + 1)
        if not going.any():
            break
        keep = going.nonzero().squeeze(1)
        active, previous, state = active[keep], words[keep], state.select(keep, keep)
    return [
        Hypothesis(
            outputs[i], scores[i], torch.stack(attention[i]) if keep_attention else None, ended[i]
        )
        for i in range(batch)
    ]


def _sharp_model(overrides, eos_bias):
    """A tiny random model with its weights scaled up and `eos_bias` added to EOS's logit, so
    that its outputs vary in length and some end before their limits."""
    model = tiny_model("decoder.dropout=0.0", *overrides).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3)
        model.decoder.output.bias[EOS_ID] += eos_bias
    return model


def _many_batches(seed, count=40, batch_tokens=24):
    """`count` random sentences of 1 to 9 ids (EOS included), sorted by length and cut into
    batches of `batch_tokens` as translate cuts them: a dozen batches of 2 to 12 sentences."""
    import numpy as np

    from attnmt.data.dataset import chunk_by_tokens, pad
    from attnmt.infer.search import SourceBatch

    generator = torch.Generator().manual_seed(seed)
    sources = [
        torch.randint(4, 11, (int(n),), generator=generator).numpy()
        for n in torch.randint(0, 9, (count,), generator=generator)
    ]
    lengths = np.array([len(s) + 1 for s in sources])
    batches = []
    for indices in chunk_by_tokens(np.argsort(lengths, kind="stable"), lengths, batch_tokens):
        source_lengths = torch.from_numpy(lengths[indices])
        source = pad([sources[i] for i in indices], None, EOS_ID)
        batches.append(SourceBatch(source, source_lengths, max_lengths(source_lengths, 2.0, 3)))
    return batches


def _counting(model, monkeypatch):
    """The decoder steps `model` takes and the joins of `greedy_batches`, counted as they
    happen: returns the two lists that grow by one for each."""
    from attnmt.infer import batches

    steps, joins = [], []
    step = model.decoder.step_features
    monkeypatch.setattr(
        model.decoder,
        "step_features",
        lambda previous, state: steps.append(len(previous)) or step(previous, state),
    )
    join = batches.join_greedy
    monkeypatch.setattr(batches, "join_greedy", lambda *rows: joins.append(1) or join(*rows))
    return steps, joins


def _assert_the_same(expected, found, keep_attention):
    assert [h.ids for h in found] == [h.ids for h in expected]
    assert [h.ended for h in found] == [h.ended for h in expected]
    assert [h.score for h in found] == [h.score for h in expected]  # float-equal
    for a, b in zip(expected, found, strict=True):
        if keep_attention:
            assert b.attention.dtype == a.attention.dtype and torch.equal(b.attention, a.attention)
        else:
            assert b.attention is None


# (overrides, EOS bias): each model with about a third to a half of its outputs ending early
# (the biases fit these decoders: each model names its own)
MODELS = [
    (["decoder=bahdanau"], 5.0),
    (["decoder=bahdanau", "attention=coverage"], -1.0),
    (["attention=dot", "attention.window=local_p", "decoder=luong"], 1.0),
    (["encoder=lstm", "decoder=luong", "decoder.input_feeding=false"], -0.3),
    (
        [
            "decoder=bahdanau",
            "decoder.rnn_type=lstm",
            "decoder.num_layers=2",
            "attention=multihead",
        ],
        3.0,
    ),
]


@pytest.mark.parametrize("keep_attention", [True, False])
@pytest.mark.parametrize("overrides,eos_bias", MODELS)
def test_greedy_search_in_tensors_finds_what_the_row_by_row_loop_found(
    overrides, eos_bias, keep_attention
):
    # The words, scores and attention rows written into tensors at each step, not walked
    # in Python: bit for bit what the loop found, batch by batch and in the scheduler
    # without joins, whose steps are the same.
    from attnmt.infer.batches import greedy_batches

    model = _sharp_model(overrides, eos_bias)
    batches = _many_batches(0)
    expected = [
        h
        for b in batches
        for h in _greedy_row_by_row(model, b.source, b.lengths, b.limits, keep_attention)
    ]
    alone = [
        h for b in batches for h in greedy(model, b.source, b.lengths, b.limits, keep_attention)
    ]
    _assert_the_same(expected, alone, keep_attention)
    _assert_the_same(expected, greedy_batches(model, batches, keep_attention), keep_attention)
    assert any(h.ended for h in expected) and not all(h.ended for h in expected)
    assert len({len(h.ids) for h in expected}) > 3  # outputs of varied lengths


def test_a_bf16_greedy_search_keeps_bf16_attention_as_the_row_by_row_loop_did():
    model = _sharp_model(*MODELS[0]).to(torch.bfloat16)
    for b in _many_batches(1)[::3]:
        expected = _greedy_row_by_row(model, b.source, b.lengths, b.limits, True)
        _assert_the_same(expected, greedy(model, b.source, b.lengths, b.limits, True), True)


@pytest.mark.parametrize("keep_attention", [True, False])
@pytest.mark.parametrize("overrides,eos_bias", MODELS)
def test_greedy_batches_that_join_a_running_search_find_what_they_find_alone(
    overrides, eos_bias, keep_attention, monkeypatch
):
    # Each batch joins the last sentences of those before it before its first step, its keys
    # and theirs padded to the longer source. The rows of a step now number more, and a
    # product's last bits may depend on that (fast.pick_log_probs): scores and attention
    # equal up to rounding, the words exactly.
    from attnmt.infer.batches import greedy_batches

    model = _sharp_model(overrides, eos_bias)
    batches = _many_batches(0)
    expected = [
        h
        for b in batches
        for h in _greedy_row_by_row(model, b.source, b.lengths, b.limits, keep_attention)
    ]
    steps, joins = _counting(model, monkeypatch)
    greedy_batches(model, batches, keep_attention)
    steps_alone, steps[:] = len(steps), []
    found = greedy_batches(model, batches, keep_attention, join_below=10**6)
    assert len(joins) == len(batches) - 1 and len(steps) < steps_alone
    assert [h.ids for h in found] == [h.ids for h in expected]
    assert [h.ended for h in found] == [h.ended for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-5)
    for a, b in zip(expected, found, strict=True):
        if not keep_attention:
            assert b.attention is None
            continue
        n = a.attention.size(1)  # the joined ones have the columns of a longer source
        assert b.attention.shape[0] == a.attention.shape[0] and b.attention.size(1) >= n
        assert torch.allclose(b.attention[:, :n], a.attention, atol=1e-6)
        assert not b.attention[:, n:].any()


@pytest.mark.parametrize("join_below", [1, 30, 10**6])
def test_an_ensemble_joins_greedy_batches_even_shorter_ones_or_ones_done_at_once(
    join_below, monkeypatch
):
    # The batches in reverse (each joining longer sources than its own), one of them with
    # limits of 1: it joins and is done at its first step. join_below 1 never joins, 30 when
    # a few rows are left, 10**6 whenever a batch waits.
    from dataclasses import replace

    from attnmt.infer.batches import greedy_batches
    from attnmt.infer.ensemble import Ensemble

    ensemble = Ensemble([_sharp_model(*MODELS[0]), _sharp_model(*MODELS[1])]).eval()
    batches = _many_batches(2)[::-1]
    batches[3] = replace(batches[3], limits=torch.ones_like(batches[3].limits))
    expected = [
        h
        for b in batches
        for h in _greedy_row_by_row(ensemble, b.source, b.lengths, b.limits, True)
    ]
    _, joins = _counting(ensemble, monkeypatch)
    found = greedy_batches(ensemble, batches, True, join_below)
    assert (len(joins) > 0) == (join_below > 1)
    assert [h.ids for h in found] == [h.ids for h in expected]
    assert [h.ended for h in found] == [h.ended for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-5)
    for a, b in zip(expected, found, strict=True):
        n = a.attention.size(1)
        assert torch.allclose(b.attention[:, :n], a.attention, atol=1e-6)
        assert not b.attention[:, n:].any()
    short = sum(len(b.source) for b in batches[:3])
    assert all(len(h.ids) <= 1 for h in found[short : short + len(batches[3].source)])
