"""Validation: dev loss and perplexity, and dev BLEU/chrF of the decoded dev set."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from attnmt.data.dataset import ParallelData
from attnmt.data.tokenizer import decode
from attnmt.infer.evaluate import score
from attnmt.infer.translate import SearchConfig, Translation, Translator, translate_ids
from attnmt.train.loss import TokenLoss


@dataclass
class Validation:
    """One validation's results, with a few sample translations (and their attention)."""

    loss: float
    perplexity: float
    bleu: float
    chrf: float
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # source, output, reference
    sample_translations: list[Translation] = field(default_factory=list)  # with attention

    @property
    def score(self) -> float:
        """The figure that picks the best checkpoint (`Validator.metric`)."""
        return self.bleu

    def record(self) -> dict[str, Any]:
        return {
            "dev_loss": self.loss,
            "dev_ppl": self.perplexity,
            "bleu": self.bleu,
            "chrf": self.chrf,
        }


class Validator:
    """Scores the translator's model on one split of its processed dataset; its BLEU picks
    the best checkpoint."""

    metric = "dev BLEU"
    higher_is_better = True

    def __init__(
        self,
        translator: Translator,
        data: ParallelData,
        folder: Path,
        split: str,
        search: SearchConfig,
        samples: int,
    ) -> None:
        self.translator, self.data, self.search = translator, data, search
        src, tgt = translator.src_lang, translator.tgt_lang
        self.references = (folder / f"{split}.{tgt}").read_text(encoding="utf-8").splitlines()
        self.source_lines = (folder / f"{split}.{src}").read_text(encoding="utf-8").splitlines()
        self.sources = [data.source[i] for i in range(len(data))]
        self.sample_count = min(samples, len(self.references))

    @torch.no_grad()
    def dev_loss(self) -> float:
        """Mean cross-entropy per target token, teacher-forced, without label smoothing."""
        model, device = self.translator.model, self.translator.device
        model.eval()
        loss = TokenLoss(model, label_smoothing=0.0)
        total, tokens = 0.0, 0
        for indices in self.data.token_batches(self.search.batch_tokens, seed=0, epoch=0):
            summed, count = loss(self.data.batch(indices).to(device))
            total += summed.item()
            tokens += count
        return total / tokens

    def __call__(self) -> Validation:
        """Loss, then BLEU and chrF of the search's output (greedy or beam), and the samples."""
        loss = self.dev_loss()
        model, device, target_sp = (
            self.translator.model,
            self.translator.device,
            self.translator.target_sp,
        )
        found = translate_ids(model, self.sources, self.search, device)
        hypotheses = [decode(target_sp, h[0].ids) for h in found]
        scores = score(hypotheses, self.references, self.translator.tgt_lang)
        count = self.sample_count
        samples = [(self.source_lines[i], hypotheses[i], self.references[i]) for i in range(count)]
        sources = self.sources[:count]
        with_attention = translate_ids(model, sources, self.search, device, keep_attention=True)
        return Validation(
            loss,
            math.exp(min(loss, 50)),
            scores.bleu,
            scores.chrf,
            samples,
            [self.translator.describe(s, h) for s, h in zip(sources, with_attention, strict=True)],
        )
