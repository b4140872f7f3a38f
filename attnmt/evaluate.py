"""Scoring translations with sacrebleu: BLEU (with its signature) and chrF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from sacrebleu.metrics import BLEU, CHRF

from attnmt.data.corpus import read_lines
from attnmt.errors import DataError
from attnmt.translate import LoadedModel, SearchConfig, translate_lines


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


@dataclass(frozen=True)
class TestSet:
    """A source file to translate and the reference to score against."""

    name: str
    source: Path
    reference: Path


def processed_sets(loaded: LoadedModel, names: Sequence[str]) -> list[TestSet]:
    """The named splits (dev, test) of the dataset the checkpoint was trained on."""
    folder = loaded.dataset_folder
    sets = []
    for name in names:
        source, reference = (
            folder / f"{name}.{loaded.src_lang}",
            folder / f"{name}.{loaded.tgt_lang}",
        )
        if not source.is_file():
            raise DataError(f"{source}: no split {name!r} in the checkpoint's dataset (sets=...)")
        sets.append(TestSet(name, source, reference))
    return sets


def evaluate_sets(
    loaded: LoadedModel,
    sets: Sequence[TestSet],
    search: SearchConfig,
    device: torch.device,
    max_input_length: int,
    output_dir: Path,
) -> list[dict]:
    """Translate each set, write its hypotheses, and score them; one report entry per set."""
    output_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for test_set in sets:
        sources = list(read_lines(test_set.source))
        references = list(read_lines(test_set.reference))
        if len(sources) != len(references):
            raise DataError(
                f"line counts differ: {test_set.source} has {len(sources)} lines, "
                f"{test_set.reference} has {len(references)}"
            )
        results = translate_lines(loaded, sources, search, device, max_input_length)
        hypotheses = [r.texts[0] for r in results]
        path = output_dir / f"{test_set.name}.hyp.{loaded.tgt_lang}"
        path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        scores = score(hypotheses, references, loaded.tgt_lang)
        entries.append(
            {
                "name": test_set.name,
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "signature": scores.signature,
                "hypotheses": str(path),
                "reference": str(test_set.reference),
            }
        )
    return entries
