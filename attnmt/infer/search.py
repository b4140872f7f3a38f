"""Search: turning a trained model into translations, greedy or with a batched beam.

Shapes: B batch, n sentences still running, S source length, T longest output, V target
vocabulary, K beam size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from attnmt.infer.ensemble import Ensemble, EnsembleState
from attnmt.infer.fast import block_rows, pick_log_probs, row_top_k
from attnmt.infer.hypothesis import Hypothesis
from attnmt.model.seq2seq import Seq2Seq
from attnmt.model.state import DecoderState
from attnmt.vocab import BOS_ID, EOS_ID


def max_lengths(source_lengths: Tensor, a: float, b: int) -> Tensor:
    """The longest output allowed for each sentence: a * source length + b pieces."""
    return (source_lengths.float() * a + b).long()


def best_extensions(
    inputs: Tensor,
    scores: Tensor,
    count: int,
    to_logits: Callable[[Tensor], Tensor] | None = None,
    rows: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The `count` best one-word extensions of each sentence's beams, best first.

    inputs (n * W, *) of the next word for W beams of n sentences: the logits (n * W, V), or
    what `to_logits` (the output layer) makes the logits of, `rows` at a time
    (`pick_log_probs`); scores (n, W) the beams' log P. An extension scores log P(beam) +
    log P(word | beam), ranked over each sentence's W x V at once (`row_top_k`, the beams'
    log P as shifts), in blocks of whole sentences, about `rows` rows each.
    Returns their scores, the beam each extends (origin) and the word, each (n, count).
    """
    n, width = scores.shape

    def ranked(log_probs: Tensor, beam_scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # the best `count` of log P(beam) + log P(word | beam) over each sentence's W x V
        top_scores, at = row_top_k(log_probs, count, beam_scores)
        vocab = log_probs.size(-1)
        return top_scores, at // vocab, at % vocab

    sentences = None if rows is None else max(1, rows // width)  # per block
    return pick_log_probs(inputs.reshape(n, width, -1), ranked, to_logits, sentences, scores)


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's length penalty ((5 + length) / 6)^alpha; scores are divided by it."""
    return ((5 + length) / 6) ** alpha


# The least coverage counted: a position no step attended at all (local-p's windows leave exact
# zeros) costs beta * log(1e-6), where log 0 would make every such hypothesis's score -inf.
MIN_COVERAGE = 1e-6


def coverage_penalty(coverage: Tensor, mask: Tensor, beta: float) -> Tensor:
    """GNMT's coverage penalty, beta * sum_i log(min(c_i, 1)) over the real source positions
    i, c_i the attention a hypothesis paid position i over all its steps; added to its score
    (it is <= 0: it costs the hypotheses that left source positions unread).

    coverage (..., S), mask (..., S) True at real positions -> (...).
    """
    covered = coverage.clamp(MIN_COVERAGE, 1.0).log()  # log(min(c_i, 1))
    return beta * covered.masked_fill(~mask, 0.0).sum(-1)


@dataclass
class SourceBatch:
    """Sentences to search together: their ids (B, S), lengths and output limits (B,)."""

    source: Tensor
    lengths: Tensor
    limits: Tensor


@dataclass
class GreedyRows:
    """The sentences a greedy search is still decoding, one row each, and what each has found:
    its words and their attention written at each step's index into tensors of its longest
    output (T), so that a step adds to them without a Python loop over the rows.

    Each row counts its own steps: the rows of a batch take theirs together, but a batch that
    joined a running search (`attnmt.infer.batches`) started later than the rows it joined.
    """

    sentences: Tensor  # (n,) each one's index among all the sentences searched
    limits: Tensor  # (n,) the most steps each may take
    previous: Tensor  # (n,) the word of its last step (BOS before the first)
    steps: Tensor  # (n,) how many steps each has taken
    tokens: Tensor  # (n, T) the word of each step, EOS included
    scores: Tensor  # (n,) log P of those words, fp64: the sum that Python floats would make
    attention: Tensor  # (n, T, S) the attention of each step ((n, 0, S) when not kept)
    state: DecoderState | EnsembleState | None  # n rows (None in `found`: done)

    def found(self, done: Tensor) -> GreedyRows:
        """What the sentences at `done` (indices into n) have found, without their decoder
        states: what `GreedySearch.finish` reads."""
        return GreedyRows(
            self.sentences[done],
            self.limits[done],
            self.previous[done],
            self.steps[done],
            self.tokens[done],
            self.scores[done],
            self.attention[done],
            None,
        )

    def keep(self, going: Tensor) -> GreedyRows:
        """Only the sentences at `going` (indices into n), their decoder states too."""
        return replace(self.found(going), state=self.state.select(going, going))


class GreedySearch:
    """Greedy search: the most probable word at each step, until EOS or the sentence's length
    limit, for every sentence `start`ed; a sentence's rows leave the batch once it is done.

        search = GreedySearch(model, keep_attention=False)
        rows = search.start(batch)
        while rows is not None:
            rows = search.step(rows)
        hypotheses = search.finish()

    A hypothesis's score is log P of its words and EOS, summed in fp64 from the fp32
    log-probabilities of each step, in order.
    """

    def __init__(self, model: Seq2Seq | Ensemble, keep_attention: bool = False) -> None:
        self.model = model
        self.keep_attention = keep_attention
        self.started = 0  # sentences started; GreedyRows.sentences count them
        self.done: list[GreedyRows] = []  # what the sentences that are done found

    @torch.no_grad()
    def start(self, batch: SourceBatch) -> GreedyRows:
        """The rows of `batch`'s sentences before their first step: their source encoded,
        nothing found yet. They are numbered after the sentences started before."""
        device = batch.source.device
        count, positions = batch.source.shape
        longest = int(batch.limits.max())
        _, state = self.model.encode(batch.source, batch.lengths)
        sentences = torch.arange(self.started, self.started + count, device=device)
        self.started += count
        steps_kept = longest if self.keep_attention else 0
        return GreedyRows(
            sentences,
            batch.limits.to(device),
            torch.full((count,), BOS_ID, dtype=torch.long, device=device),
            torch.zeros(count, dtype=torch.long, device=device),
            torch.zeros((count, longest), dtype=torch.long, device=device),
            torch.zeros(count, dtype=torch.float64, device=device),
            torch.zeros((count, steps_kept, positions), device=device),
            state,
        )

    @torch.no_grad()
    def step(self, rows: GreedyRows) -> GreedyRows | None:
        """One word more for every sentence of `rows`, written into its tensors: the rows of
        the sentences not done yet (None when all are)."""
        features, weights, state = self.model.decoder.step_features(rows.previous, rows.state)
        log_probs, words = pick_log_probs(  # (n,) each, fp32 as in beams
            features,
            lambda lp: lp.max(-1),
            self.model.decoder.logits,
            block_rows(self.model.decoder, features.device),
        )
        here = torch.arange(len(words), device=words.device)
        rows.tokens[here, rows.steps] = words
        attention = rows.attention
        if self.keep_attention:
            # In the weights' type (bf16 for a bf16 model): a copy where it is not yet, at
            # the first step and after a join.
            attention = attention.to(weights.dtype)
            attention[here, rows.steps] = weights
        steps = rows.steps + 1
        rows = replace(
            rows,
            previous=words,
            steps=steps,
            scores=rows.scores + log_probs.double(),
            attention=attention,
            state=state,
        )
        done = (words == EOS_ID) | (rows.limits <= steps)
        going = (~done).nonzero().squeeze(1)
        if len(going) == len(done):
            return rows
        self.done.append(rows.found(done.nonzero().squeeze(1)))
        return rows.keep(going) if len(going) else None

    def finish(self) -> list[Hypothesis]:
        """The hypothesis of every sentence started, in order (Python lists made here, once
        per group of sentences done together)."""
        hypotheses: dict[int, Hypothesis] = {}
        for rows in self.done:
            steps = rows.steps.tolist()
            kept = list(rows.attention) if self.keep_attention else [None] * len(steps)
            for sentence, words, count, score, attention in zip(
                rows.sentences.tolist(),
                rows.tokens.tolist(),
                steps,
                rows.scores.tolist(),
                kept,
                strict=True,
            ):
                ended = words[count - 1] == EOS_ID  # EOS only ever comes last
                ids = words[: count - 1] if ended else words[:count]
                weights = None if attention is None else attention[:count]
                hypotheses[sentence] = Hypothesis(ids, score, weights, ended)
        return [hypotheses[i] for i in range(self.started)]


@torch.no_grad()
def greedy(
    model: Seq2Seq | Ensemble,
    source: Tensor,
    source_lengths: Tensor,
    limits: Tensor,
    keep_attention: bool,
) -> list[Hypothesis]:
    """The most probable word at each step, for every sentence of one batch
    (`GreedySearch`); finished rows stop computing."""
    search = GreedySearch(model, keep_attention)
    rows: GreedyRows | None = search.start(SourceBatch(source, source_lengths, limits))
    while rows is not None:
        rows = search.step(rows)
    return search.finish()


@dataclass
class Beams:
    """The running hypotheses of the n sentences still being decoded, W beams each (W = 1
    before a sentence's first step, where all K beams would be the same; K after).

    (`attnmt.infer.batches.JoinedBeams` holds sentences that started at different steps.)
    """

    sentences: Tensor  # (n,) each one's index among all the sentences searched
    scores: Tensor  # (n, W) log P of each beam
    tokens: Tensor  # (n, W, t) the words so far
    attention: Tensor  # (n, W, t, S) their attention rows ((n, 1, 0, S) when not kept)
    coverage: Tensor | None  # (n, W, S) the sum of those rows, for the coverage penalty (if on)
    state: DecoderState | EnsembleState  # n * W rows, each sentence's W consecutive

    def words_so_far(self) -> Tensor:
        """(n,) how many words each sentence's hypotheses hold: t."""
        return torch.full_like(self.sentences, self.tokens.size(2))

    def histories(
        self, rows: Tensor, attention: Tensor | None
    ) -> tuple[list[list[int]], list[Tensor] | list[None]]:
        """The words so far of the m hypotheses at flat `rows` (sentence * W + beam), and each
        one's rows of `attention` (m, t', S) if given."""
        words = self.tokens.flatten(0, 1)[rows].tolist()
        return words, [None] * len(words) if attention is None else list(attention)

    def keep(self, going: Tensor, rows: Tensor) -> Beams:
        """Only the sentences `going` (indices into n), their beams from the flat `rows` (n', K)."""
        return replace(
            self,
            sentences=self.sentences[going],
            scores=self.scores[going],
            tokens=self.tokens[going],
            attention=self.attention[going],
            coverage=None if self.coverage is None else self.coverage[going],
            state=self.state.select(rows.flatten(), going),
        )


@dataclass
class Extensions:
    """The 2K best one-word extensions of each sentence's beams, best first, each (n, 2K)."""

    scores: Tensor  # log P(beam) + log P(word | beam)
    words: Tensor
    rows: Tensor  # the flat row (sentence * W + beam) each extends
    ends: Tensor  # True where the extension ends its hypothesis (EOS or the length limit)
    attention: Tensor | None  # (n, 2K, t + 1, S): the rows so far and this step's, if kept
    coverage: Tensor | None  # (n, 2K, S): their sum, if the beams keep it


class BeamSearch:
    """Beam search: the best `n_best` (<= beam_size) hypotheses of every sentence `start`ed,
    best first; `beta` > 0 adds GNMT's `coverage_penalty` to the finished ones' scores.

        search = BeamSearch(model, beam_size=5, alpha=1.0)
        beams = search.start(batch)
        while beams is not None:
            beams = search.step(beams)
        hypotheses = search.finish()

    All beams of all sentences step together as rows (one row per sentence at the first step,
    where every beam would be the same). Each step: `extend` ranks the 2K best extensions of
    each sentence; `record` keeps those among the first K that end (EOS, or the sentence's
    length limit), scored log P / length_penalty (+ coverage_penalty); `carry` makes the first
    K that do not end the next beams. A sentence stops, and its rows leave the batch, at its
    length limit or once it has `n_best` finished hypotheses and its best running one, were it
    to end at the next step, would not beat the n-th of them (exact for alpha=0, where log P
    only falls, with or without the coverage penalty, which stays <= 0; the usual early stop
    otherwise).
    """

    def __init__(
        self,
        model: Seq2Seq | Ensemble,
        beam_size: int,
        alpha: float,
        keep_attention: bool = False,
        n_best: int = 1,
        beta: float = 0.0,
    ) -> None:
        self.model = model
        self.k = beam_size
        self.alpha = alpha
        self.keep_attention = keep_attention
        self.n_best = min(n_best, beam_size)
        self.beta = beta
        # One entry per sentence started, indexed by Beams.sentences:
        self.found: list[list[Hypothesis]] = []  # its finished hypotheses
        self.source_lengths = torch.empty(0, dtype=torch.long)
        self.limits = torch.empty(0, dtype=torch.long)  # its longest output
        self.bar = torch.empty(0)  # its n-th best finished score (-inf until it has n_best)

    @torch.no_grad()
    def start(self, batch: SourceBatch) -> Beams:
        """The beams of `batch`'s sentences before their first step: their source encoded,
        one empty hypothesis each. They are numbered after the sentences started before."""
        device = batch.source.device
        count, positions = batch.source.shape
        _, state = self.model.encode(batch.source, batch.lengths)
        sentences = torch.arange(len(self.found), len(self.found) + count, device=device)
        self.found.extend([] for _ in range(count))
        self.source_lengths = _appended(self.source_lengths, batch.lengths, device)
        self.limits = _appended(self.limits, batch.limits, device)
        self.bar = _appended(self.bar, torch.full((count,), float("-inf")), device)
        return Beams(
            sentences,
            torch.zeros((count, 1), device=device),
            torch.empty((count, 1, 0), dtype=torch.long, device=device),
            torch.zeros((count, 1, 0, positions), device=device),
            torch.zeros((count, 1, positions), device=device) if self.beta > 0 else None,
            state,
        )

    @torch.no_grad()
    def step(self, beams: Beams) -> Beams | None:
        """One word more for every hypothesis of `beams`: the next beams, without the
        sentences that are done (None when all are)."""
        words_so_far = beams.words_so_far()  # (n,)
        if beams.tokens.size(2):
            previous = beams.tokens[:, :, -1].flatten()
        else:  # the first step
            previous = torch.full(
                (len(beams.sentences),), BOS_ID, dtype=torch.long, device=beams.scores.device
            )
        features, weights, state = self.model.decoder.step_features(previous, beams.state)
        at_limit = self.limits[beams.sentences] <= words_so_far + 1
        ext = self.extend(beams, features, weights, at_limit)
        first_k = torch.arange(2 * self.k, device=at_limit.device) < self.k
        final = ext.ends & first_k  # the extensions that finish now
        self.record(beams, ext, final)
        beams, rows = self.carry(replace(beams, state=state), ext)
        self.raise_bars(beams.sentences[final.any(1)])
        # were it to end at the next step (the penalty in fp64, as for one Python number)
        penalty = length_penalty(words_so_far.double() + 2, self.alpha).float()
        best_running = beams.scores[:, 0] / penalty
        done = at_limit | (self.bar[beams.sentences] >= best_running)
        if done.all():
            return None
        going = (~done).nonzero().squeeze(1)
        if len(going) < len(done):  # sentences left: their rows and their keys go
            return beams.keep(going, rows[going])
        # hypotheses moved between the beams of each sentence (or grew from 1 to K)
        return replace(beams, state=state.select(rows.flatten()))

    def finish(self) -> list[list[Hypothesis]]:
        """The best `n_best` hypotheses of every sentence started, in order, best first."""
        return [sorted(h, key=lambda h: -h.score)[: self.n_best] for h in self.found]

    def extend(
        self, beams: Beams, features: Tensor, weights: Tensor, at_limit: Tensor
    ) -> Extensions:
        """Rank every beam's one-word extensions, the logits the output layer makes of
        `features` (`block_rows` at a time, `pick_log_probs`); those with EOS, or at the limit
        (at_limit (n,)), end. `weights` (n * W, S), this step's attention, is kept with them
        when `keep_attention`, and added to their coverage when the beams keep that."""
        n, width = beams.scores.shape
        rows_per_block = block_rows(self.model.decoder, features.device)
        scores, origin, words = best_extensions(
            features, beams.scores, 2 * self.k, self.model.decoder.logits, rows_per_block
        )
        rows = torch.arange(n, device=words.device).unsqueeze(1) * width + origin
        ends = (words == EOS_ID) | at_limit.unsqueeze(1)
        attention = coverage = None
        if self.keep_attention:
            history = beams.attention.flatten(0, 1)[rows]  # (n, 2K, t, S)
            attention = torch.cat([history, weights[rows].unsqueeze(2)], 2)
        if beams.coverage is not None:
            coverage = beams.coverage.flatten(0, 1)[rows] + weights[rows]  # (n, 2K, S)
        return Extensions(scores, words, rows, ends, attention, coverage)

    def record(self, beams: Beams, ext: Extensions, final: Tensor) -> None:
        """Add the extensions marked in `final` (n, 2K) to their sentences' finished
        hypotheses, scored log P / length_penalty + coverage_penalty (when the extensions
        carry coverage)."""
        i, j = final.nonzero(as_tuple=True)
        if not len(i):
            return
        # One transfer per tensor, then plain Python over the (few) finished extensions.
        attention = None if ext.attention is None else ext.attention[i, j]
        histories, kept = beams.histories(ext.rows[i, j], attention)
        words, scores = ext.words[i, j].tolist(), ext.scores[i, j].tolist()
        sentences = beams.sentences[i]
        penalties = [0.0] * len(i)
        if ext.coverage is not None:
            positions = torch.arange(ext.coverage.size(-1), device=sentences.device)
            mask = positions < self.source_lengths[sentences].unsqueeze(1)
            penalties = coverage_penalty(ext.coverage[i, j], mask, self.beta).tolist()
        for m, (ids, sentence) in enumerate(zip(histories, sentences.tolist(), strict=True)):
            ended = words[m] == EOS_ID
            if not ended:
                ids.append(words[m])
            score = scores[m] / length_penalty(len(ids) + 1, self.alpha) + penalties[m]
            self.found[sentence].append(Hypothesis(ids, score, kept[m], ended))

    def carry(self, beams: Beams, ext: Extensions) -> tuple[Beams, Tensor]:
        """The next beams: the first K extensions of each sentence that do not end (a
        sentence with fewer keeps them at log P -inf). Returns them and their flat rows
        (n, K)."""
        rank = torch.arange(ext.ends.size(1), device=ext.ends.device)
        chosen = (ext.ends.long() * ext.ends.size(1) + rank).argsort(-1)[:, : self.k]  # (n, K)
        ended = ext.ends.gather(1, chosen)
        scores = ext.scores.gather(1, chosen).masked_fill(ended, float("-inf"))
        rows = ext.rows.gather(1, chosen)
        tokens = torch.cat(
            [beams.tokens.flatten(0, 1)[rows], ext.words.gather(1, chosen).unsqueeze(-1)], 2
        )
        attention, coverage = beams.attention, None
        if ext.attention is not None:
            index = chosen[..., None, None].expand(-1, -1, *ext.attention.shape[2:])
            attention = ext.attention.gather(1, index)
        if ext.coverage is not None:
            index = chosen.unsqueeze(-1).expand(-1, -1, ext.coverage.size(2))
            coverage = ext.coverage.gather(1, index)
        next_beams = replace(
            beams, scores=scores, tokens=tokens, attention=attention, coverage=coverage
        )
        return next_beams, rows

    def raise_bars(self, sentences: Tensor) -> None:
        """The n-th best finished score of each of `sentences` that has n_best of them."""
        for s in sentences.tolist():
            if len(self.found[s]) >= self.n_best:
                self.bar[s] = sorted(h.score for h in self.found[s])[-self.n_best]


def _appended(table: Tensor, more: Tensor, device: torch.device) -> Tensor:
    """`table` then `more`, on `device` (where the sentences' beams are)."""
    return torch.cat([table.to(device), more.to(device)])


@torch.no_grad()
def beam_search(
    model: Seq2Seq | Ensemble,
    source: Tensor,
    source_lengths: Tensor,
    limits: Tensor,
    beam_size: int,
    alpha: float,
    keep_attention: bool,
    n_best: int = 1,
    beta: float = 0.0,
) -> list[list[Hypothesis]]:
    """The best `n_best` (<= beam_size) hypotheses of every sentence of one batch, best
    first (`BeamSearch`)."""
    search = BeamSearch(model, beam_size, alpha, keep_attention, n_best, beta)
    beams = search.start(SourceBatch(source, source_lengths, limits))
    while beams is not None:
        beams = search.step(beams)
    return search.finish()
