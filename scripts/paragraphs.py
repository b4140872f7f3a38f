"""BLEU of paragraphs: what a user who pastes several sentences at once gets, translated whole
(as one input) and split into sentences (`split_sentences=True`, as the service's page does).

    python scripts/paragraphs.py --ckpt CKPT --test DATA/test [--src zh --tgt en] \
        [--beam-size 5] [--limit N] [--device cpu]

--test: the test split's stem (TEST.zh and TEST.en, line by line); --src and --tgt: its
languages, by default the checkpoint's direction (another is refused); --limit N: the first N
paragraphs only.

A paragraph joins three consecutive test pairs (1-3, 4-6, ...); a last group of one or two
pairs is dropped, so that every paragraph has three sentences. Each side is joined as its
language joins sentences (`attnmt.data.sentences.join_sentences`): Chinese with no space,
English with one. The checkpoint's Translator translates the paragraphs twice, with beam search,
all paragraphs in one call each: whole (`split_sentences=False`) and split into sentences and
joined again (`split_sentences=True`). Prints one JSON line: the number of paragraphs; for
each way its corpus BLEU and chrF against the joined references (`attnmt.infer.evaluate.score`)
and how many of its inputs were cut at max_input_length; how many sentences the split found
(three a paragraph when it finds the test pairs again); and the BLEU signature.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attnmt.data.corpus import read_lines
from attnmt.data.sentences import join_sentences
from attnmt.errors import AttnmtError, ConfigError, DataError
from attnmt.infer.evaluate import score
from attnmt.infer.translate import Paragraph, SearchConfig, Translation, Translator

SENTENCES = 3  # test pairs a paragraph


def paragraphs(lines: Sequence[str], lang: str, size: int = SENTENCES) -> list[str]:
    """Each `size` consecutive lines of language `lang` joined as one paragraph; a last group
    of fewer lines is dropped."""
    whole = len(lines) - len(lines) % size
    return [join_sentences(lines[at : at + size], lang) for at in range(0, whole, size)]


@dataclass
class Both:
    """The translations of the same paragraphs, whole and split into sentences."""

    whole: list[Translation]
    split: list[Paragraph]


def translate_both(translator: Translator, texts: Sequence[str], search: SearchConfig) -> Both:
    """Translate each paragraph of `texts` as one input, then sentence by sentence."""
    whole = translator.translate(texts, search, split_sentences=False)
    split = translator.translate(texts, search, split_sentences=True)
    return Both(whole, split)


def read_test_split(stem: str, src: str, tgt: str) -> tuple[list[str], list[str]]:
    """The sources and references of the test split STEM.SRC and STEM.TGT."""
    sources = list(read_lines(Path(f"{stem}.{src}")))
    references = list(read_lines(Path(f"{stem}.{tgt}")))
    if len(sources) != len(references):
        raise DataError(
            f"{stem}.{src} has {len(sources)} lines but {stem}.{tgt} has {len(references)}: "
            "the test split's two sides must be line by line"
        )
    return sources, references


def measure(args: argparse.Namespace) -> dict:
    """The report of the command line `args`."""
    search = SearchConfig(beam_size=args.beam_size)
    translator = Translator.load(args.ckpt, args.device)
    src, tgt = args.src or translator.src_lang, args.tgt or translator.tgt_lang
    if (src, tgt) != (translator.src_lang, translator.tgt_lang):
        raise ConfigError(
            f"--src {src} --tgt {tgt}: {args.ckpt} translates "
            f"{translator.src_lang}->{translator.tgt_lang}"
        )
    sources, references = read_test_split(args.test, src, tgt)
    texts, joined = paragraphs(sources, src), paragraphs(references, tgt)
    if args.limit is not None:
        texts, joined = texts[: args.limit], joined[: args.limit]
    if not texts:
        raise DataError(f"{args.test}.{src}: fewer than {SENTENCES} pairs, no paragraph")
    both = translate_both(translator, texts, search)
    whole = score([t.text for t in both.whole], joined, tgt)
    split = score([p.text for p in both.split], joined, tgt)
    return {
        "paragraphs": len(texts),
        "sentences_per_paragraph": SENTENCES,
        "beam_size": search.beam_size,
        "whole": {
            "bleu": whole.bleu,
            "chrf": whole.chrf,
            "truncated": sum(t.truncated for t in both.whole),
        },
        "split": {
            "bleu": split.bleu,
            "chrf": split.chrf,
            "truncated": sum(p.truncated for p in both.split),
            "sentences": sum(len(p.sentences) for p in both.split),
        },
        "signature": whole.signature,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", type=Path, required=True, help="a checkpoint or an export")
    parser.add_argument("--test", required=True, help="the test split's stem: STEM.zh, STEM.en")
    parser.add_argument("--src", help="the source language (default: the checkpoint's)")
    parser.add_argument("--tgt", help="the target language (default: the checkpoint's)")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--limit", type=int, help="the first N paragraphs only")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit {args.limit}: give 1 or more")
    try:
        report = measure(args)
    except AttnmtError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
