"""Scoring translations with sacrebleu: BLEU (with its signature) and chrF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from attnmt.data.corpus import read_lines
from attnmt.data.units import GoldPair, read_links, units
from attnmt.errors import ConfigError, DataError
from attnmt.infer.align import AER, aer, flip, read_pairs
from attnmt.infer.translate import SearchConfig, Translator


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


def processed_sets(translator: Translator, names: Sequence[str]) -> list[TestSet]:
    """The named splits (dev, test) of the dataset the checkpoint was trained on."""
    folder = translator.dataset_folder
    if names and (folder is None or not folder.is_dir()):
        raise DataError(
            f"sets={list(names)}: the checkpoint's dataset ({folder or 'unknown'}) is not on "
            "this machine; give source=FILE reference=FILE instead"
        )
    sets = []
    for name in names:
        source, reference = (
            folder / f"{name}.{translator.src_lang}",
            folder / f"{name}.{translator.tgt_lang}",
        )
        if not source.is_file():
            raise DataError(f"{source}: no split {name!r} in the checkpoint's dataset (sets=...)")
        sets.append(TestSet(name, source, reference))
    return sets


def evaluate_sets(
    translator: Translator,
    sets: Sequence[TestSet],
    search: SearchConfig,
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
        results = translator.translate(sources, search)
        hypotheses = [r.text for r in results]
        path = output_dir / f"{test_set.name}.hyp.{translator.tgt_lang}"
        path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        scores = score(hypotheses, references, translator.tgt_lang)
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


@dataclass
class GoldSet:
    """A gold word-alignment set (data/alignments/): NAME.SRC and NAME.TGT, one sentence a
    line, and NAME.SRC-TGT.gold, their sure (i-j) and possible (ipj) links at the units of
    `attnmt.infer.align`."""

    name: str
    src_lang: str
    tgt_lang: str
    sources: list[str]
    targets: list[str]
    pairs: list[GoldPair]

    @classmethod
    def read(cls, folder: Path) -> GoldSet:
        """The one gold set in `folder`, its links checked against its sentences' units."""
        found = sorted(Path(folder).glob("*.gold"))
        if len(found) != 1:
            raise DataError(f"{folder}: expected one NAME.SRC-TGT.gold file, found {len(found)}")
        path = found[0]
        name, _, langs = path.stem.rpartition(".")
        src_lang, _, tgt_lang = langs.partition("-")
        if not (name and src_lang and tgt_lang):
            raise DataError(f"{path}: name it NAME.SRC-TGT.gold (e.g. test.zh-en.gold)")
        sources, targets = read_pairs(
            path.with_name(f"{name}.{src_lang}"), path.with_name(f"{name}.{tgt_lang}")
        )
        counts = (
            [len(units(s, src_lang)) for s in sources],
            [len(units(t, tgt_lang)) for t in targets],
        )
        return cls(name, src_lang, tgt_lang, sources, targets, read_links(path, *counts))


def alignment_error(
    translator: Translator,
    gold: GoldSet,
    threshold: float | None = None,
    batch_tokens: int = 4096,
) -> AER:
    """The AER of the translator's attention alignments of the gold pairs. A model of the
    other direction aligns them the other way round; its links are flipped to be scored."""
    languages = (translator.src_lang, translator.tgt_lang)
    if languages == (gold.src_lang, gold.tgt_lang):
        links = translator.align(gold.sources, gold.targets, threshold, batch_tokens)
    elif languages == (gold.tgt_lang, gold.src_lang):
        found = translator.align(gold.targets, gold.sources, threshold, batch_tokens)
        links = [flip(pair) for pair in found]
    else:
        raise ConfigError(
            f"the model translates {languages[0]}->{languages[1]}, the gold set "
            f"{gold.name} is {gold.src_lang}-{gold.tgt_lang}"
        )
    return aer(links, gold.pairs)
