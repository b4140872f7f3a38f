"""Forced decoding: the log-probability a model gives a given target for a given source.

The decoder is fed the reference (teacher forcing, as in training) and each target piece's
log P(y_t | y_<t, x) is read off the output distribution, EOS included. With label smoothing
off, minus their sum is exactly the training loss of that pair. Uses: filtering a noisy
corpus, checking a translation, rescoring an n-best list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnmt.data.dataset import chunk_by_tokens, pad
from attnmt.infer.ensemble import Ensemble
from attnmt.model.seq2seq import Seq2Seq
from attnmt.vocab import BOS_ID, EOS_ID


@dataclass
class PairScore:
    """One pair's log-probabilities under the model: per target piece (EOS last) and total."""

    target_pieces: list[str]
    token_log_probs: list[float]

    @property
    def log_prob(self) -> float:
        """log P(target | source): the sum over the target's pieces and EOS."""
        return float(sum(self.token_log_probs))

    @property
    def mean(self) -> float:
        """The per-piece mean, comparable across lengths."""
        return self.log_prob / len(self.token_log_probs)


def forced_log_probs(
    model: Seq2Seq | Ensemble,
    sources: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    batch_tokens: int,
    device: torch.device,
) -> list[np.ndarray]:
    """Each target's per-piece log-probabilities (EOS last) given its source (ids without
    EOS), in input order, batched by length up to `batch_tokens` padded tokens. An ensemble
    gives its members' mean."""
    return [lp for lp, _ in forced_decode(model, sources, targets, batch_tokens, device)]


@torch.no_grad()
def forced_decode(
    model: Seq2Seq | Ensemble,
    sources: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    batch_tokens: int,
    device: torch.device,
    keep_attention: bool = False,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """`forced_log_probs`, and with `keep_attention` each pair's attention weights as well:
    (target pieces + EOS) x (source pieces + EOS), an ensemble's the mean of its members'."""
    model.eval()
    sizes = np.array([max(len(s), len(t)) + 1 for s, t in zip(sources, targets, strict=True)])
    results: list[tuple[np.ndarray, np.ndarray | None]] = [(np.zeros(0), None)] * len(sources)
    for indices in chunk_by_tokens(np.argsort(sizes, kind="stable"), sizes, batch_tokens):
        source = pad([sources[i] for i in indices], None, EOS_ID).to(device)
        lengths = torch.tensor([len(sources[i]) + 1 for i in indices])
        chosen = [targets[i] for i in indices]
        previous = pad(chosen, BOS_ID, None).to(device)
        target = pad(chosen, None, EOS_ID).to(device)
        members = model.members if isinstance(model, Ensemble) else [model]
        outputs = [m(source, lengths, previous) for m in members]  # (features, weights) each
        log_probs = torch.stack(
            [
                m.logits(features).float().log_softmax(-1)
                for m, (features, _) in zip(members, outputs, strict=True)
            ]
        ).mean(0)
        picked = log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1).cpu().numpy()
        weights = None
        if keep_attention:
            weights = torch.stack([w.float() for _, w in outputs]).mean(0).cpu().numpy()
        for row, index in enumerate(indices.tolist()):
            rows, columns = len(targets[index]) + 1, len(sources[index]) + 1
            kept = None if weights is None else weights[row, :rows, :columns]
            results[index] = (picked[row, :rows], kept)
    return results
