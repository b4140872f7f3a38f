"""Validation: dev loss and perplexity, and dev BLEU/chrF of the decoded dev set."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sentencepiece import SentencePieceProcessor

from attnmt.data.dataset import ParallelData
from attnmt.data.tokenizer import PAD_ID
from attnmt.evaluate import score
from attnmt.model.seq2seq import Seq2Seq
from attnmt.search import Hypothesis
from attnmt.translate import SearchConfig, translate_ids


@dataclass
class Validation:
    """One validation's results."""

    loss: float
    perplexity: float
    bleu: float
    chrf: float
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # source, output, reference
    sample_sources: list[np.ndarray] = field(default_factory=list)  # the samples' source ids
    sample_hypotheses: list[Hypothesis] = field(default_factory=list)  # with attention

    def record(self) -> dict[str, Any]:
        return {
            "dev_loss": self.loss,
            "dev_ppl": self.perplexity,
            "bleu": self.bleu,
            "chrf": self.chrf,
        }


@torch.no_grad()
def dev_loss(model: Seq2Seq, data: ParallelData, batch_tokens: int, device: torch.device) -> float:
    """Mean cross-entropy per target token, teacher-forced, without label smoothing."""
    model.eval()
    total, tokens = 0.0, 0
    for indices in data.token_batches(batch_tokens, seed=0, epoch=0):
        batch = data.batch(indices).to(device)
        features, _ = model(batch.source, batch.source_lengths, batch.previous)
        real = batch.target != PAD_ID
        logits = model.logits(features[real]).float()
        total += F.cross_entropy(logits, batch.target[real], reduction="sum").item()
        tokens += batch.target_tokens
    return total / tokens


def validate(
    model: Seq2Seq,
    data: ParallelData,
    folder: Path,
    split: str,
    src_lang: str,
    tgt_lang: str,
    target_sp: SentencePieceProcessor,
    cfg: Any,
    device: torch.device,
) -> Validation:
    """Loss, then BLEU and chrF of greedy (or beam, cfg.val_beam_size) output, on `split`."""
    loss = dev_loss(model, data, cfg.batch_tokens, device)
    search = SearchConfig(
        beam_size=cfg.val_beam_size,
        max_length_a=cfg.val_max_length_a,
        max_length_b=cfg.val_max_length_b,
        batch_tokens=cfg.batch_tokens,
    )
    sources = [data.source[i] for i in range(len(data))]
    found = translate_ids(model, sources, search, device)
    hypotheses = [target_sp.decode(h[0].ids) for h in found]
    references = (folder / f"{split}.{tgt_lang}").read_text(encoding="utf-8").splitlines()
    scores = score(hypotheses, references, tgt_lang)
    source_lines = (folder / f"{split}.{src_lang}").read_text(encoding="utf-8").splitlines()
    count = min(cfg.samples, len(references))
    samples = [(source_lines[i], hypotheses[i], references[i]) for i in range(count)]
    with_attention = translate_ids(model, sources[:count], search, device, keep_attention=True)
    return Validation(
        loss,
        math.exp(min(loss, 50)),
        scores.bleu,
        scores.chrf,
        samples,
        sources[:count],
        [h[0] for h in with_attention],
    )
