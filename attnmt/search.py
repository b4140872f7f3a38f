"""Search: turning a trained model into translations, greedy or with a batched beam.

Shapes: B batch, S source length, V target vocabulary, K beam size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.model.seq2seq import Seq2Seq
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
    model: Seq2Seq, source: Tensor, source_lengths: Tensor, limits: Tensor, keep_attention: bool
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
    for t in range(int(limits.max())):
        logits, weights, state = model.decoder.step(previous, state)
        log_probs, words = logits.log_softmax(-1).max(-1)  # (B',)
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


def _finish(
    finished: list[list[Hypothesis]],
    final: Tensor,
    active: Tensor,
    tokens: Tensor,
    origin: Tensor,
    words: Tensor,
    top_scores: Tensor,
    steps: Tensor | None,
    alpha: float,
) -> None:
    """Add the candidates marked in `final` (n, 2K) to their sentences' finished lists."""
    i, j = final.nonzero(as_tuple=True)
    if not len(i):
        return
    # One transfer per tensor, then plain Python over the (few) finished candidates.
    histories = tokens[i, origin[i, j]].tolist()
    ends_in_eos = (words[i, j] == EOS_ID).tolist()
    last_words, scores = words[i, j].tolist(), top_scores[i, j].tolist()
    sentences = active[i].tolist()
    for m, ids in enumerate(histories):
        if not ends_in_eos[m]:
            ids.append(last_words[m])
        kept = steps[i[m], j[m]] if steps is not None else None
        penalty = length_penalty(len(ids) + 1, alpha)
        hypothesis = Hypothesis(ids, scores[m] / penalty, kept, ends_in_eos[m])
        finished[sentences[m]].append(hypothesis)


def row_top_k(values: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """`values.topk(k, dim=-1)` of a wide (n, V) tensor, ranked in blocks: the same values
    (equal values may come in another order), and faster than `topk` on CPU for rows of
    thousands of words (docs/benchmarks.md has the measurement).

    Cut each row into blocks of about 100. The k blocks with the best maxima hold the k best
    values: their maxima are k values that nothing in another block beats. So rank the
    block maxima, then only the values of those k blocks.
    """
    n, width = values.shape
    divisors = (b for b in range(40, 257) if width % b == 0 and width // b >= k)
    block = min(divisors, key=lambda b: abs(b - 100), default=None)
    if block is None:  # no block size fits this width: rank whole rows
        return values.topk(k, dim=-1)
    blocks = values.view(n, width // block, block)
    best_blocks = blocks.amax(-1).topk(k, dim=-1).indices  # (n, k)
    rows = torch.arange(n, device=values.device).unsqueeze(1) * (width // block) + best_blocks
    candidates = blocks.reshape(-1, block).index_select(0, rows.flatten()).view(n, k * block)
    top, at = candidates.topk(k, dim=-1)
    return top, best_blocks.gather(1, at // block) * block + at % block


def best_extensions(logits: Tensor, scores: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]:
    """The `count` best one-word extensions of each sentence's beams, best first.

    logits (n * W, V) of the next word for W beams of n sentences; scores (n, W) the beams' log
    P. An extension scores log P(beam) + log P(word | beam). The best `count` of the W x V are
    among each beam's own best `count` words, so rank those per beam, then across the beams.
    Returns their scores, the beam each extends (origin) and the word, each (n, count).
    """
    n, width = scores.shape
    log_probs, beam_words = row_top_k(logits.float().log_softmax(-1), count)  # (n * W, count)
    candidates = (scores.view(n * width, 1) + log_probs).view(n, width * count)
    top_scores, top_ids = candidates.topk(count, dim=-1)
    return top_scores, top_ids // count, beam_words.view(n, -1).gather(1, top_ids)


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length penalty ((5 + length) / 6)^alpha; scores are divided by it."""
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    source: Tensor,
    source_lengths: Tensor,
    limits: Tensor,
    beam_size: int,
    alpha: float,
    keep_attention: bool,
    n_best: int = 1,
) -> list[list[Hypothesis]]:
    """The best `n_best` (<= beam_size) hypotheses of every sentence, best first, for a whole
    batch at once.

    All K beams of all B sentences step together as B*K rows (one row each at the first step,
    where every beam would be the same). At each step the 2K best extensions of each sentence
    are ranked: those among the first K that end (EOS, or the sentence's length limit) are
    finished, scored log P / length_penalty; the first K that do not end carry on. A sentence
    stops, and its rows leave the batch, at its length limit or once it has `n_best` finished
    hypotheses and its best running one, were it to end at the next step, would not beat the
    n-th of them (exact for alpha=0, where log P only falls; the usual early stop otherwise).
    """
    k, device = beam_size, source.device
    _, state = model.encode(source, source_lengths)
    batch = source.size(0)
    scores = torch.zeros((batch, 1), device=device)  # (sentences, beams): 1 beam to start
    tokens = torch.empty((batch, 1, 0), dtype=torch.long, device=device)
    attention = source.new_empty((batch, 1, 0, source.size(1)), dtype=torch.float)
    previous = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    active = torch.arange(batch, device=device)  # the sentence of each group of beams
    limits = limits.to(device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    n_best = min(n_best, k)
    bar = torch.full((batch,), float("-inf"), device=device)  # n-th best finished score
    rank = torch.arange(2 * k, device=device)
    for t in range(int(limits.max())):
        logits, weights, state = model.decoder.step(previous, state)
        n, width = scores.shape
        top_scores, origin, words = best_extensions(logits, scores, 2 * k)  # each (n, 2K)
        at_limit = limits[active] <= t + 1  # (n,)
        ends = (words == EOS_ID) | at_limit.unsqueeze(1)
        rows = torch.arange(n, device=device).unsqueeze(1) * width + origin  # (n, 2K) flat rows
        if keep_attention:
            steps = torch.cat([attention.flatten(0, 1)[rows], weights[rows].unsqueeze(2)], 2)
        final = ends & (rank < k)  # (n, 2K) candidates that finish now
        _finish(
            finished,
            final,
            active,
            tokens,
            origin,
            words,
            top_scores,
            steps if keep_attention else None,
            alpha,
        )
        carry = (ends.long() * 2 * k + rank).argsort(-1)[:, :k]  # first K that do not end
        scores = top_scores.gather(1, carry).masked_fill(ends.gather(1, carry), float("-inf"))
        chosen_rows = rows.gather(1, carry)  # (n, K)
        tokens = torch.cat(
            [tokens.flatten(0, 1)[chosen_rows], words.gather(1, carry)[..., None]], 2
        )
        if keep_attention:
            attention = steps.gather(1, carry[..., None, None].expand(-1, -1, *steps.shape[2:]))
        for s in active[final.any(1)].tolist():
            if len(finished[s]) >= n_best:
                bar[s] = sorted(h.score for h in finished[s])[-n_best]
        best_running = scores[:, 0] / length_penalty(t + 2, alpha)  # were it to end next
        done = at_limit | (bar[active] >= best_running)
        if done.all():
            break
        going = (~done).nonzero().squeeze(1)
        if len(going) < n:  # sentences left: their rows and their keys go
            active, scores, tokens = active[going], scores[going], tokens[going]
            attention, chosen_rows = attention[going], chosen_rows[going]
            state = state.select(chosen_rows.flatten(), going)
        else:  # hypotheses moved between the beams of each sentence (or grew from 1 to K)
            state = state.select(chosen_rows.flatten())
        previous = tokens[:, :, -1].flatten()
    return [sorted(h, key=lambda h: -h.score)[:n_best] for h in finished]
