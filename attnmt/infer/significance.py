"""Whether one system's BLEU beats another's beyond the noise of both sentences and seeds.

A comparison of two training recipes has two sources of chance: the test sentences (another
sample of sentences gives another BLEU) and the seeds (another seed gives another model).
`paired_bootstrap` resamples both at once, the paired multi-bootstrap of Sellam et al. (2022,
"The MultiBERTs"): each sample draws the sentences with replacement and the seeds with
replacement, the same draws for both systems, and takes the difference of their seed-averaged
corpus BLEU. BLEU is recomputed from per-sentence sufficient statistics (`bleu_statistics`), so
a sample costs one sum, not a scoring run. `ratio_interval` is the one-system bootstrap of a
ratio of per-sentence counts (a recall), in the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from attnmt.infer.evaluate import bleu_tokenizer

ORDER = 4  # BLEU's largest n-gram
SAMPLES = 10_000  # enough to resolve p-values near 0.05 / 10 (Bonferroni over ten variants)
CHUNK = 500  # bootstrap samples summed at once (a CHUNK x sentences matrix of counts)


def bleu_statistics(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> np.ndarray:
    """sacrebleu's BLEU statistics of each sentence, (N, 10) integers: hypothesis length,
    reference length, matching n-grams for n = 1..4, hypothesis n-grams for n = 1..4. Their sum
    over any set of sentences gives that set's corpus BLEU (`corpus_bleu`)."""
    bleu = BLEU(tokenize=bleu_tokenizer(lang))
    # the per-sentence half of corpus_score, which sacrebleu's own significance tests use
    stats = bleu._extract_corpus_statistics(list(hypotheses), [list(references)])
    return np.asarray(stats, dtype=np.int64).reshape(len(hypotheses), 2 + 2 * ORDER)


def corpus_bleu(totals: np.ndarray) -> np.ndarray:
    """Corpus BLEU of summed statistics (..., 10), as sacrebleu computes it (smooth: exp):

        BLEU = BP * exp(1/4 sum_n log p_n),   BP = min(1, exp(1 - r / c)),
        p_n = m_n / t_n, or 1 / (2^k t_n) for the k-th order with no match (m_n = 0),

    with c the hypothesis length, r the reference length, m_n the matching and t_n the
    hypothesis n-grams. 0 where nothing matches or some order has no n-gram at all."""
    totals = np.asarray(totals, dtype=np.float64)
    hyp_len, ref_len = totals[..., 0], totals[..., 1]
    matches, ngrams = totals[..., 2 : 2 + ORDER], totals[..., 2 + ORDER :]
    unmatched = np.cumsum(matches == 0, axis=-1)  # k: orders with no match so far
    safe = np.maximum(ngrams, 1.0)
    precision = np.where(matches > 0, matches / safe, 1.0 / (2.0**unmatched * safe))
    with np.errstate(divide="ignore"):
        ratio = np.where(hyp_len > 0, ref_len / np.maximum(hyp_len, 1.0), np.inf)
    brevity = np.where(hyp_len < ref_len, np.exp(np.minimum(1.0 - ratio, 0.0)), 1.0)
    score = 100.0 * brevity * np.exp(np.log(precision).mean(axis=-1))
    empty = (matches.sum(axis=-1) == 0) | (ngrams == 0).any(axis=-1)
    return np.where(empty, 0.0, score)


@dataclass(frozen=True)
class Comparison:
    """A system against a baseline over the seeds both have: BLEU differences (system minus
    baseline) and the bootstrap's verdict on them."""

    seeds: list[int]
    difference: float  # of the seed-averaged corpus BLEU
    seed_differences: list[float]  # per seed, same seed for both
    standard_error: float | None  # of the mean of seed_differences (None with one seed)
    low: float  # the bootstrap's 95% interval of the difference
    high: float
    p_value: float  # two-sided: that the difference is 0
    samples: int


def paired_bootstrap(
    system: dict[int, np.ndarray],
    baseline: dict[int, np.ndarray],
    samples: int = SAMPLES,
    seed: int = 1234,
) -> Comparison:
    """Compare `system` with `baseline`, each a run's per-sentence statistics (N, 10) by seed,
    on the seeds both have (the same N sentences for all).

    Each bootstrap sample draws N sentence indices and K seeds with replacement (K: the
    seeds both have), the same for both systems, and takes

        d* = mean over drawn seeds k of BLEU(system_k on the drawn sentences)
           - mean over drawn seeds k of BLEU(baseline_k on the drawn sentences).

    p = 2 min(P(d* <= 0), P(d* >= 0)) (with one added to each count, at most 1): small when
    the samples' differences keep the observed sign. With few seeds the seed draw sees little
    of their spread (three seeds give ten distinct draws), so `seed_differences` and their
    standard error are reported beside it."""
    seeds = sorted(set(system) & set(baseline))
    if not seeds:
        raise ValueError("no seed that both systems have")
    runs = np.stack([system[s] for s in seeds] + [baseline[s] for s in seeds])  # (2K, N, 10)
    count, sentences, width = len(seeds), runs.shape[1], runs.shape[2]
    whole = corpus_bleu(runs.sum(axis=1))  # (2K,)
    seed_differences = [float(d) for d in whole[:count] - whole[count:]]
    by_sentence = runs.transpose(1, 0, 2).reshape(sentences, -1)  # (N, 2K * 10)
    rng = np.random.default_rng(seed)
    differences = []
    for start in range(0, samples, CHUNK):
        size = min(CHUNK, samples - start)
        drawn = rng.multinomial(sentences, np.full(sentences, 1.0 / sentences), size=size)
        scores = corpus_bleu((drawn @ by_sentence).reshape(size, 2 * count, width))  # (C, 2K)
        picked = rng.integers(count, size=(size, count))  # (C, K) seed positions
        ours = np.take_along_axis(scores[:, :count], picked, axis=1).mean(axis=1)
        theirs = np.take_along_axis(scores[:, count:], picked, axis=1).mean(axis=1)
        differences.append(ours - theirs)
    bootstrap = np.concatenate(differences)
    below, above = (bootstrap <= 0).sum(), (bootstrap >= 0).sum()
    p_value = min(1.0, 2 * (min(below, above) + 1) / (samples + 1))
    low, high = np.percentile(bootstrap, [2.5, 97.5])
    return Comparison(
        seeds=seeds,
        difference=statistics.fmean(seed_differences),
        seed_differences=seed_differences,
        standard_error=(statistics.stdev(seed_differences) / count**0.5 if count > 1 else None),
        low=float(low),
        high=float(high),
        p_value=float(p_value),
        samples=samples,
    )


def ratio_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    samples: int = 1_000,
    seed: int = 1234,
) -> tuple[float, float] | None:
    """The bootstrap 95% interval of a ratio of per-sentence counts, sum(numerators) /
    sum(denominators) (a recall: words found over words sought), resampling the sentences with
    replacement. A sample whose sentences have no denominator at all has no ratio and is left
    out; None when every sample is such (as when no sentence has a denominator)."""
    counts = np.stack([numerators, denominators], axis=1).astype(np.float64)  # (N, 2)
    sentences = len(counts)
    if not sentences or not counts[:, 1].any():
        return None
    rng = np.random.default_rng(seed)
    sums = []
    for start in range(0, samples, CHUNK):
        size = min(CHUNK, samples - start)
        drawn = rng.multinomial(sentences, np.full(sentences, 1.0 / sentences), size=size)
        sums.append(drawn @ counts)  # (C, 2)
    totals = np.concatenate(sums)
    totals = totals[totals[:, 1] > 0]
    if not len(totals):
        return None
    low, high = np.percentile(totals[:, 0] / totals[:, 1], [2.5, 97.5])
    return float(low), float(high)
