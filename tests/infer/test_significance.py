"""attnmt.infer.significance: BLEU from per-sentence statistics as sacrebleu scores it, and a
bootstrap over sentences and seeds that finds a real difference and only that."""

import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from attnmt.infer.significance import (
    bleu_statistics,
    corpus_bleu,
    paired_bootstrap,
    ratio_interval,
)

WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "sofa", "quickly", "today"]


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 9))) for _ in range(count)]


def noisy(lines: list[str], rate: float, seed: int) -> list[str]:
    """`lines` with each word replaced by a random one with probability `rate`, and every
    fourth line cut short (a brevity penalty)."""
    rng = random.Random(seed)
    out = []
    for i, line in enumerate(lines):
        words = [rng.choice(WORDS) if rng.random() < rate else w for w in line.split()]
        out.append(" ".join(words[: max(1, len(words) // 2)] if i % 4 == 0 else words))
    return out


@pytest.mark.parametrize("rate", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bleu_of_summed_statistics_is_sacrebleus_corpus_bleu(rate, lang):
    references = sentences(37, seed=5)
    hypotheses = noisy(references, rate, seed=7)
    stats = bleu_statistics(hypotheses, references, lang)
    assert stats.shape == (37, 10)
    expected = BLEU(tokenize="zh" if lang == "zh" else "13a").corpus_score(hypotheses, [references])
    assert corpus_bleu(stats.sum(axis=0)) == pytest.approx(expected.score, abs=1e-9)


def test_bleu_of_edge_cases_matches_sacrebleu():
    """No match at all, an order with no n-gram, a match of unigrams only (exp smoothing)."""
    cases = [(["x y"], ["a b"]), (["a"], ["a b c"]), (["a b c d e"], ["a c e g i"])]
    for hypotheses, references in cases:
        stats = bleu_statistics(hypotheses, references, "en").sum(axis=0)
        expected = BLEU().corpus_score(hypotheses, [references]).score
        assert corpus_bleu(stats) == pytest.approx(expected, abs=1e-9)


def runs(references: list[str], rates: list[float], seed: int) -> dict[int, np.ndarray]:
    """Per-sentence statistics of one system per seed (seed k: noise rate rates[k])."""
    return {
        k + 1: bleu_statistics(noisy(references, rate, seed + k), references, "en")
        for k, rate in enumerate(rates)
    }


def test_a_system_against_itself_is_no_difference():
    references = sentences(60, seed=1)
    system = runs(references, [0.4, 0.5, 0.45], seed=10)
    found = paired_bootstrap(system, system, samples=500)
    assert found.difference == 0.0 and found.seed_differences == [0.0, 0.0, 0.0]
    assert found.p_value == 1.0 and found.low == found.high == 0.0


def test_a_better_system_on_every_seed_is_found_with_its_seed_differences():
    references = sentences(200, seed=2)
    better = runs(references, [0.1, 0.12, 0.08], seed=20)
    worse = runs(references, [0.5, 0.55, 0.45], seed=30)
    found = paired_bootstrap(better, worse, samples=2000)
    whole = {k: corpus_bleu(v.sum(axis=0)) for k, v in better.items()}
    base = {k: corpus_bleu(v.sum(axis=0)) for k, v in worse.items()}
    assert found.seed_differences == pytest.approx([whole[k] - base[k] for k in (1, 2, 3)])
    assert found.difference == pytest.approx(np.mean(found.seed_differences))
    assert found.p_value < 0.001 and 0 < found.low < found.difference < found.high
    assert found.standard_error == pytest.approx(np.std(found.seed_differences, ddof=1) / 3**0.5)
    reversed_ = paired_bootstrap(worse, better, samples=2000)
    assert reversed_.difference == pytest.approx(-found.difference)
    assert reversed_.p_value < 0.001 and reversed_.high < 0


def test_seeds_that_disagree_are_not_significant_though_each_seed_is():
    """Seed 1 much better, seed 2 much worse: each alone is a clear difference over the
    sentences, the two together are not."""
    references = sentences(200, seed=3)
    system = runs(references, [0.1, 0.6], seed=40)
    baseline = runs(references, [0.6, 0.1], seed=50)
    for seed in (1, 2):
        alone = paired_bootstrap({seed: system[seed]}, {seed: baseline[seed]}, samples=1000)
        assert alone.p_value < 0.01
    both = paired_bootstrap(system, baseline, samples=1000)
    assert both.p_value > 0.2


def test_only_the_seeds_both_have_are_compared_and_the_result_repeats():
    references = sentences(50, seed=4)
    system = runs(references, [0.2, 0.3, 0.25], seed=60)
    baseline = {k: v for k, v in runs(references, [0.4, 0.5, 0.45], seed=70).items() if k != 2}
    first = paired_bootstrap(system, baseline, samples=300)
    assert first.seeds == [1, 3] and len(first.seed_differences) == 2
    assert paired_bootstrap(system, baseline, samples=300) == first
    one = paired_bootstrap({1: system[1]}, {1: baseline[1]}, samples=300)
    assert one.standard_error is None
    with pytest.raises(ValueError, match="no seed"):
        paired_bootstrap({2: system[2]}, baseline)


def test_the_interval_of_a_ratio_holds_it_and_narrows_with_more_sentences():
    found, sought = [1, 0, 2, 0, 1], [1, 0, 3, 1, 1]  # 4 of 6; the second sentence seeks none
    low, high = ratio_interval(found, sought)
    assert 0.0 <= low < 4 / 6 < high <= 1.0
    assert ratio_interval(found, sought) == (low, high)  # seeded
    wide = high - low
    low, high = ratio_interval(found * 20, sought * 20)
    assert low < 4 / 6 < high and high - low < wide / 2
    assert ratio_interval([1, 1], [1, 1]) == (1.0, 1.0)
    assert ratio_interval([0, 0], [0, 0]) is None
    assert ratio_interval([], []) is None
