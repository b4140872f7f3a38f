"""Scoring translations with sacrebleu: BLEU (with its signature) and chrF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class Scores:
    """Corpus scores of one set of hypotheses against one reference."""

    bleu: float
    chrf: float
    signature: str


def bleu_tokenizer(lang: str) -> str:
    """sacrebleu's tokenizer for a target language: 'zh' for Chinese, '13a' otherwise."""
    return "zh" if lang == "zh" else "13a"


def score(hypotheses: Sequence[str], references: Sequence[str], tgt_lang: str) -> Scores:
    """Corpus BLEU and chrF of detokenised `hypotheses` against `references`."""
    bleu = BLEU(tokenize=bleu_tokenizer(tgt_lang))
    result = bleu.corpus_score(list(hypotheses), [list(references)])
    chrf = CHRF().corpus_score(list(hypotheses), [list(references)])
    return Scores(round(result.score, 2), round(chrf.score, 2), str(bleu.get_signature()))
