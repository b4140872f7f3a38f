"""Translating many sentences: batching by length, search, and the input order restored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnmt.data.dataset import pad
from attnmt.data.tokenizer import EOS_ID
from attnmt.model.seq2seq import Seq2Seq
from attnmt.search import Hypothesis, beam_search, greedy, max_lengths


@dataclass(frozen=True)
class SearchConfig:
    """How to search: beam size (1: greedy), n-best, length limits and penalty, batch size."""

    beam_size: int = 1
    n_best: int = 1
    alpha: float = 1.0
    max_length_a: float = 1.5
    max_length_b: int = 10
    batch_tokens: int = 4096


def length_batches(lengths: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Indices grouped into batches of similar length, each within `batch_tokens`."""
    order = np.argsort(lengths, kind="stable")
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end - start + 1) * lengths[order[end]] > batch_tokens:
            batches.append(order[start:end])
            start = end
    return [b for b in batches if len(b)]


@torch.no_grad()
def translate_ids(
    model: Seq2Seq,
    sources: Sequence[np.ndarray],
    search: SearchConfig,
    device: torch.device,
    keep_attention: bool = False,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each source (ids without EOS), in input order."""
    model.eval()
    lengths = np.array([len(s) + 1 for s in sources])
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for indices in length_batches(lengths, search.batch_tokens):
        source = pad([sources[i] for i in indices], None, EOS_ID).to(device)
        source_lengths = torch.from_numpy(lengths[indices])
        limits = max_lengths(source_lengths, search.max_length_a, search.max_length_b)
        if search.beam_size == 1:
            found = [[h] for h in greedy(model, source, source_lengths, limits, keep_attention)]
        else:
            found = beam_search(
                model,
                source,
                source_lengths,
                limits,
                search.beam_size,
                search.alpha,
                keep_attention,
            )
        for index, hypotheses in zip(indices.tolist(), found, strict=True):
            for hypothesis in hypotheses:
                if hypothesis.attention is not None:  # drop the batch's padding columns
                    hypothesis.attention = hypothesis.attention[:, : lengths[index]].cpu()
            results[index] = hypotheses[: search.n_best]
    return results
