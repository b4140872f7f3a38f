"""Search: turning a trained model into translations, greedy or with a batched beam.

Shapes: B batch, S source length, V target vocabulary, K beam size.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import torch
from torch import Tensor
from torch.nn import functional as F

from attnmt.infer.ensemble import Ensemble, EnsembleState
from attnmt.infer.fast import block_rows, pick_log_probs, row_top_k
from attnmt.model.seq2seq import Seq2Seq
from attnmt.model.state import DecoderState, join_rows
from attnmt.vocab import BOS_ID, EOS_ID


@dataclass
class Hypothesis:
    """One output sentence: its ids (no BOS/EOS), score, attention (T, S) if kept, and whether
    it ended with EOS (then T is len(ids) + 1) rather than at its length limit."""

    ids: list[int]
    score: float
    attention: Tensor | None = None
    ended: bool = True


def max_lengths(source_lengths: Tensor, a: float, b: int) -> Tensor:
    """The longest output allowed for each sentence: a * source length + b pieces."""
    return (source_lengths.float() * a + b).long()


@torch.no_grad()
def greedy(
    model: Seq2Seq | Ensemble,
    source: Tensor,
    source_lengths: Tensor,
    limits: Tensor,
    keep_attention: bool,
) -> list[Hypothesis]:
    """The most probable word at each step, for a whole batch; finished rows stop computing."""
    _, state = model.encode(source, source_lengths)
    batch = source.size(0)
    active = torch.arange(batch, device=source.device)  # rows still decoding
    previous = torch.full((batch,), BOS_ID, dtype=torch.long, device=source.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    scores = [0.0] * batch
    ended = [False] * batch
    attention: list[list[Tensor]] = [[] for _ in range(batch)]
    limits = limits.to(source.device)
    rows = block_rows(model.decoder, source.device)
    for t in range(int(limits.max())):
        features, weights, state = model.decoder.step_features(previous, state)
        log_probs, words = pick_log_probs(  # (B',) each, fp32 as in beams
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
class Beams:
    """The running hypotheses of the n sentences still being decoded, W beams each (W = 1
    before a sentence's first step, where all K beams would be the same; K after).

    A sentence that joined a running search has its words and attention rows after `first`
    entries of padding (BOS, zero rows), which `finish` drops.
    """

    sentences: Tensor  # (n,) each one's index among all the sentences searched
    first: Tensor  # (n,) where each one's words begin in `tokens`
    scores: Tensor  # (n, W) log P of each beam
    tokens: Tensor  # (n, W, t) the words so far
    attention: Tensor  # (n, W, t, S) their attention rows ((n, 1, 0, S) when not kept)
    coverage: Tensor | None  # (n, W, S) the sum of those rows, for the coverage penalty (if on)
    state: DecoderState | EnsembleState  # n * W rows, each sentence's W consecutive

    def keep(self, going: Tensor, rows: Tensor) -> Beams:
        """Only the sentences `going` (indices into n), their beams from the flat `rows` (n', K)."""
        return Beams(
            self.sentences[going],
            self.first[going],
            self.scores[going],
            self.tokens[going],
            self.attention[going],
            None if self.coverage is None else self.coverage[going],
            self.state.select(rows.flatten(), going),
        )

    def join(self, other: Beams) -> Beams:
        """These sentences, then `other`'s (as many beams, no more words): other's words and
        attention rows padded at the front to as many as these, the source axes at the end
        to the longer source."""
        lead = self.tokens.size(2) - other.tokens.size(2)
        attention = other.attention
        if attention.size(2):  # kept: zero rows before its first word's
            attention = F.pad(attention, (0, 0, lead, 0))
        return Beams(
            torch.cat([self.sentences, other.sentences]),
            torch.cat([self.first, other.first + lead]),
            torch.cat([self.scores, other.scores]),
            torch.cat([self.tokens, F.pad(other.tokens, (lead, 0), value=BOS_ID)]),
            join_rows(self.attention, attention, 0, -1),
            join_rows(self.coverage, other.coverage, 0, -1),
            self.state.join(other.state),
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


def extend(
    beams: Beams,
    features: Tensor,
    to_logits: Callable[[Tensor], Tensor],
    weights: Tensor,
    at_limit: Tensor,
    k: int,
    keep_attention: bool,
    rows_per_block: int | None = None,
) -> Extensions:
    """Rank every beam's one-word extensions, the logits `to_logits(features)`
    (`rows_per_block` at a time, `pick_log_probs`); those with EOS, or at the limit, end.
    `weights` (n * W, S), this step's attention, is kept with them when `keep_attention`, and
    added to their coverage when the beams keep that."""
    n, width = beams.scores.shape
    scores, origin, words = best_extensions(
        features, beams.scores, 2 * k, to_logits, rows_per_block
    )
    rows = torch.arange(n, device=words.device).unsqueeze(1) * width + origin
    ends = (words == EOS_ID) | at_limit.unsqueeze(1)
    attention = coverage = None
    if keep_attention:
        history = beams.attention.flatten(0, 1)[rows]  # (n, 2K, t, S)
        attention = torch.cat([history, weights[rows].unsqueeze(2)], 2)
    if beams.coverage is not None:
        coverage = beams.coverage.flatten(0, 1)[rows] + weights[rows]  # (n, 2K, S)
    return Extensions(scores, words, rows, ends, attention, coverage)


def finish(
    found: list[list[Hypothesis]],
    beams: Beams,
    ext: Extensions,
    final: Tensor,
    alpha: float,
    beta: float,
    source_lengths: Tensor,
) -> None:
    """Add the extensions marked in `final` (n, 2K) to their sentences' finished hypotheses,
    scored log P / length_penalty + coverage_penalty (when the extensions carry coverage);
    source_lengths (all sentences searched) say which positions are real."""
    i, j = final.nonzero(as_tuple=True)
    if not len(i):
        return
    # One transfer per tensor, then plain Python over the (few) finished extensions.
    histories = beams.tokens.flatten(0, 1)[ext.rows[i, j]].tolist()
    words, scores = ext.words[i, j].tolist(), ext.scores[i, j].tolist()
    sentences, firsts = beams.sentences[i], beams.first[i].tolist()
    penalties = [0.0] * len(i)
    if ext.coverage is not None:
        positions = torch.arange(ext.coverage.size(-1), device=sentences.device)
        mask = positions < source_lengths[sentences].unsqueeze(1)
        penalties = coverage_penalty(ext.coverage[i, j], mask, beta).tolist()
    for m, (ids, sentence) in enumerate(zip(histories, sentences.tolist(), strict=True)):
        ids = ids[firsts[m] :]  # without the padding before the sentence joined
        ended = words[m] == EOS_ID
        if not ended:
            ids.append(words[m])
        kept = ext.attention[i[m], j[m], firsts[m] :] if ext.attention is not None else None
        score = scores[m] / length_penalty(len(ids) + 1, alpha) + penalties[m]
        found[sentence].append(Hypothesis(ids, score, kept, ended))


def carry(beams: Beams, ext: Extensions, k: int) -> tuple[Beams, Tensor]:
    """The next beams: the first K extensions of each sentence that do not end (a sentence
    with fewer keeps them at log P -inf). Returns them and their flat rows (n, K)."""
    rank = torch.arange(ext.ends.size(1), device=ext.ends.device)
    chosen = (ext.ends.long() * ext.ends.size(1) + rank).argsort(-1)[:, :k]  # (n, K)
    scores = ext.scores.gather(1, chosen).masked_fill(ext.ends.gather(1, chosen), float("-inf"))
    rows = ext.rows.gather(1, chosen)
    tokens = torch.cat(
        [beams.tokens.flatten(0, 1)[rows], ext.words.gather(1, chosen).unsqueeze(-1)], 2
    )
    attention, coverage = beams.attention, None
    if ext.attention is not None:
        index = chosen[..., None, None].expand(-1, -1, *ext.attention.shape[2:])
        attention = ext.attention.gather(1, index)
    if ext.coverage is not None:
        coverage = ext.coverage.gather(1, chosen.unsqueeze(-1).expand(-1, -1, ext.coverage.size(2)))
    return replace(
        beams, scores=scores, tokens=tokens, attention=attention, coverage=coverage
    ), rows


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
    first (`beam_search_batches`)."""
    batch = SourceBatch(source, source_lengths, limits)
    return beam_search_batches(model, [batch], beam_size, alpha, keep_attention, n_best, beta)


@dataclass
class SourceBatch:
    """Sentences to search together: their ids (B, S), lengths and output limits (B,)."""

    source: Tensor
    lengths: Tensor
    limits: Tensor


@torch.no_grad()
def beam_search_batches(
    model: Seq2Seq | Ensemble,
    batches: Iterable[SourceBatch],
    beam_size: int,
    alpha: float,
    keep_attention: bool,
    n_best: int = 1,
    beta: float = 0.0,
    join_below: int = 0,
) -> list[list[Hypothesis]]:
    """The best `n_best` (<= beam_size) hypotheses of every sentence of `batches`, in their
    order, best first; `beta` > 0 adds GNMT's `coverage_penalty` to the finished ones' scores.

    All beams of all sentences step together as rows (one row per sentence at the first step,
    where every beam would be the same). Each step: `extend` ranks the 2K best extensions of
    each sentence; `finish` keeps those among the first K that end (EOS, or the sentence's
    length limit), scored log P / length_penalty (+ coverage_penalty); `carry` makes the first
    K that do not end the next beams. A sentence stops, and its rows leave the batch, at its
    length limit or once it has `n_best` finished hypotheses and its best running one, were it
    to end at the next step, would not beat the n-th of them (exact for alpha=0, where log P
    only falls, with or without the coverage penalty, which stays <= 0; the usual early stop
    otherwise).

    A batch's last few sentences would step on alone, a few rows per step at the cost of many.
    So once the running sentences hold fewer than `join_below` source tokens (their number
    times the longest source among them, padding included), the next batch takes its first
    step (one row a sentence to K) and joins them, the source positions of both padded to the
    longer and masked: a joined hypothesis's attention has a column per position of that
    longer source, zero past its own. 0: each batch searches alone.
    """
    k, waiting = beam_size, deque(batches)
    n_best = min(n_best, k)
    found: list[list[Hypothesis]] = []
    device = waiting[0].source.device if waiting else torch.device("cpu")
    lengths = torch.empty(0, dtype=torch.long, device=device)  # of every sentence so far
    limits = torch.empty(0, dtype=torch.long, device=device)
    bar = torch.empty(0, device=device)  # each one's n-th best finished score
    first_k = torch.arange(2 * k, device=device) < k
    rows_per_block = block_rows(model.decoder, device)

    def admit() -> Beams:
        """The next batch's sentences, before their first step."""
        nonlocal lengths, limits, bar
        batch = waiting.popleft()
        count, positions = batch.source.shape
        _, state = model.encode(batch.source, batch.lengths)
        lengths = torch.cat([lengths, batch.lengths.to(device)])
        limits = torch.cat([limits, batch.limits.to(device)])
        bar = torch.cat([bar, torch.full((count,), float("-inf"), device=device)])
        sentences = torch.arange(len(found), len(found) + count, device=device)
        found.extend([] for _ in range(count))
        return Beams(
            sentences,
            torch.zeros(count, dtype=torch.long, device=device),
            torch.zeros((count, 1), device=device),
            torch.empty((count, 1, 0), dtype=torch.long, device=device),
            torch.zeros((count, 1, 0, positions), device=device),
            torch.zeros((count, 1, positions), device=device) if beta > 0 else None,
            state,
        )

    def advance(beams: Beams) -> Beams | None:
        """One step of `beams`: the next ones, without the sentences that are done (None
        when all are)."""
        words_so_far = beams.tokens.size(2) - beams.first  # (n,)
        if beams.tokens.size(2):
            previous = beams.tokens[:, :, -1].flatten()
        else:  # the first step
            previous = torch.full((len(beams.sentences),), BOS_ID, dtype=torch.long, device=device)
        features, weights, state = model.decoder.step_features(previous, beams.state)
        at_limit = limits[beams.sentences] <= words_so_far + 1
        ext = extend(
            beams,
            features,
            model.decoder.logits,
            weights,
            at_limit,
            k,
            keep_attention,
            rows_per_block,
        )
        final = ext.ends & first_k  # the extensions that finish now
        finish(found, beams, ext, final, alpha, beta, lengths)
        beams, rows = carry(replace(beams, state=state), ext, k)
        for s in beams.sentences[final.any(1)].tolist():
            if len(found[s]) >= n_best:
                bar[s] = sorted(h.score for h in found[s])[-n_best]
        # were it to end at the next step (the penalty in fp64, as for one Python number)
        best_running = beams.scores[:, 0] / length_penalty(words_so_far.double() + 2, alpha).float()
        done = at_limit | (bar[beams.sentences] >= best_running)
        if done.all():
            return None
        going = (~done).nonzero().squeeze(1)
        if len(going) < len(done):  # sentences left: their rows and their keys go
            return beams.keep(going, rows[going])
        # hypotheses moved between the beams of each sentence (or grew from 1 to K)
        return replace(beams, state=state.select(rows.flatten()))

    beams: Beams | None = None
    while beams is not None or waiting:
        if beams is None:  # a batch starts afresh
            beams = admit()
        elif waiting and len(beams.sentences) * beams.attention.size(-1) < join_below:
            joining = advance(admit())
            if joining is not None:
                beams = beams.join(joining)
        beams = advance(beams)
    return [sorted(h, key=lambda h: -h.score)[:n_best] for h in found]
