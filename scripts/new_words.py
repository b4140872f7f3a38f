"""New-word recall: of the content words in the test references that no training target has
(a name, a rare noun: what users bring), the share that the output carries over; BLEU barely
moves when a few such words are lost.

    python scripts/new_words.py --train DATA/train.en --test DATA/test [--src zh --tgt en] \
        [--lexicon LEXICON_TARGETS] NAME=HYPOTHESES [NAME=HYPOTHESES ...]

--train: the training targets (English, one sentence a line); --test: the test split's stem
(TEST.zh and TEST.en, line by line); each NAME=FILE: one model's hypotheses of that split, line
by line (attnmt-evaluate's `test.hyp.en`). --lexicon: a dictionary's English side, one gloss a
line (the kept dictionary pairs' train.en), to measure the new words it covers apart.
English targets only (zh->en): the words are English words.

Words: the lowercase runs of letters of a line; anything else splits them, an apostrophe too
(don't: don, t). A content word has two letters or more and is not in FUNCTION_WORDS. Every
word is folded (`fold`) before two are compared: a new word is a content word of a reference
whose folded form no folded word of the training targets has, and the output of its sentence
carries it when one of the output's folded words is that form. A word of the lexicon covers
a new word with the same folded form.

recall = (new-word occurrences in the references whose sentence's output carries them)
       / (all new-word occurrences), in percent,

with a 95% bootstrap interval that resamples the test pairs (`ratio_interval`: 1,000 samples,
seeded). Prints one JSON line: the counts (pairs with a new word, new-word occurrences, distinct
new words and, with --lexicon, the covered ones), then per model its recall with low and high
and, with --lexicon, the same on the covered occurrences (null where there is none).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path

from attnmt.data.corpus import read_lines
from attnmt.errors import AttnmtError, DataError
from attnmt.infer.significance import ratio_interval

# The words that carry no content of their own, by kind.
FUNCTION_WORDS = frozenset(
    word
    for kind in (
        "a an the",  # articles
        "i me my mine myself you your yours yourself yourselves he him his himself she her hers "
        "herself it its itself we us our ours ourselves they them their theirs themselves this "
        "that these those who whom whose which what someone somebody something anyone anybody "
        "anything everyone everybody everything nobody nothing",  # pronouns
        "about above across after against along among around at before behind below beside "
        "between beyond by down during except for from in inside into near of off on onto out "
        "outside over past since through to toward towards under until up upon with within "
        "without",  # prepositions
        "am is are was were be been being have has had having do does did doing done will would "
        "shall should can could may might must",  # auxiliaries
        "and or but nor so yet if because although though while when where whether than as "
        "unless",  # conjunctions
        "not no never very too also just only then there here now how why again still even ever "
        "yes",  # adverbs
        "all any each every some many much more most other such own same",  # determiners
        "don doesn didn isn aren wasn weren won wouldn couldn shouldn haven hasn hadn cannot ll "
        "ve re",  # what an apostrophe leaves of a contraction (don't: don, t)
    )
    for word in kind.split()
)
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters, in any script
_VOWEL = re.compile("[aeiouy]")


def words(text: str) -> list[str]:
    """The lowercase words of `text`: its runs of letters (an apostrophe splits them)."""
    return _WORD.findall(text.lower())


def fold(word: str) -> str:
    """One form for a lowercase word's plural, third person, past and -ing forms, so that cat
    and cats, carry, carried and carries, like, liked and liking, stop and stopped meet. In
    order, each step at most once:

    1. -ies -> -y in words of five letters or more (cities: city); otherwise a final -s goes in
       words of four letters or more, unless it ends -ss, -us or -is (cats: cat; glass, bus,
       this stay);
    2. -ied -> -y in words of five letters or more (tried: try), -ied -> -ie in shorter ones
       (died: die); -eed -> -ee after a vowel (agreed: agree; need, speed stay); otherwise -ed
       or -ing goes where at least two letters with a vowel (y counts) stay (walked, walking:
       walk; red, bring, thing stay);
    3. a final e goes from words of three letters or more, unless after another e (like,
       liked: lik; agree, see stay);
    4. a final doubled consonant becomes one (stopped: stopp: stop; add, added: ad).

    No dictionary: irregular forms (went, children) stay apart, and a few words meet that
    should not (made and mad: mad), which can make a new word look seen. The same folding
    applies to the references, the outputs, the training targets and the lexicon."""
    if len(word) >= 5 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ied"):
        word = word[:-3] + "y" if len(word) >= 5 else word[:-1]
    elif word.endswith("eed"):
        if _VOWEL.search(word[:-3]):
            word = word[:-1]
    else:
        for ending in ("ed", "ing"):
            stem = word[: -len(ending)]
            if word.endswith(ending) and len(stem) >= 2 and _VOWEL.search(stem):
                word = stem
                break
    if len(word) >= 3 and word[-1] == "e" and word[-2] != "e":
        word = word[:-1]
    if len(word) >= 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


def is_content(word: str) -> bool:
    """Whether a lowercase word carries content: two letters or more, no function word."""
    return len(word) >= 2 and word not in FUNCTION_WORDS


def folded_words(lines: Sequence[str]) -> set[str]:
    """The folded form of every word of `lines`."""
    return {fold(word) for line in lines for word in words(line)}


def new_words(references: Sequence[str], seen: set[str]) -> list[list[str]]:
    """Per reference, the folded form of each occurrence of a content word that `seen` (the
    folded training words) lacks."""
    found = []
    for reference in references:
        forms = [fold(w) for w in words(reference) if is_content(w)]
        found.append([form for form in forms if form not in seen])
    return found


def recall(sought: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> dict[str, float | None]:
    """The percentage of the occurrences `sought` (folded, per sentence) whose sentence's
    hypothesis has a word of the same folded form, with its bootstrap 95% interval."""
    carried = [folded_words([hypothesis]) for hypothesis in hypotheses]
    found = [
        sum(form in output for form in forms) for forms, output in zip(sought, carried, strict=True)
    ]
    total = sum(len(forms) for forms in sought)
    interval = ratio_interval(found, [len(forms) for forms in sought])
    if not total or interval is None:
        return {"recall": None, "low": None, "high": None}
    low, high = interval
    return {
        "recall": round(100 * sum(found) / total, 2),
        "low": round(100 * low, 2),
        "high": round(100 * high, 2),
    }


def lines_of(path: Path) -> list[str]:
    """The lines of a text file (a missing one: a DataError naming it)."""
    return list(read_lines(path))


def hypotheses_of(entry: str, pairs: int, reference: Path) -> tuple[str, list[str]]:
    """A NAME=FILE argument's name and lines, which must be one per test pair."""
    name, _, file = entry.partition("=")
    if not name or not file:
        raise DataError(f"{entry}: expected NAME=FILE (a model's name, its hypotheses)")
    hypotheses = lines_of(Path(file))
    if len(hypotheses) != pairs:
        raise DataError(
            f"{file}: {len(hypotheses)} lines, but the test split has {pairs} "
            f"({reference}): one hypothesis per test pair"
        )
    return name, hypotheses


def measure(args: argparse.Namespace) -> dict:
    """The report of the command line `args`."""
    if args.tgt != "en":
        raise DataError(
            f"--tgt {args.tgt}: new-word recall counts English words; it measures English "
            "targets (--src zh --tgt en)"
        )
    sources = lines_of(Path(f"{args.test}.{args.src}"))
    reference_path = Path(f"{args.test}.{args.tgt}")
    references = lines_of(reference_path)
    if len(sources) != len(references):
        raise DataError(
            f"{args.test}.{args.src} has {len(sources)} lines but {reference_path} has "
            f"{len(references)}: the test split's two sides must be line by line"
        )
    sought = new_words(references, folded_words(lines_of(args.train)))
    report: dict = {
        "test_pairs": len(references),
        "pairs_with_new_word": sum(bool(forms) for forms in sought),
        "new_word_occurrences": sum(len(forms) for forms in sought),
        "new_words": len({form for forms in sought for form in forms}),
    }
    covered = None
    if args.lexicon:
        glosses = folded_words(lines_of(args.lexicon))
        covered = [[form for form in forms if form in glosses] for forms in sought]
        report["covered_occurrences"] = sum(len(forms) for forms in covered)
        report["covered_new_words"] = len({form for forms in covered for form in forms})
    for entry in args.hypotheses:
        name, hypotheses = hypotheses_of(entry, len(references), reference_path)
        if name in report:
            raise DataError(f"{entry}: the name {name} is taken (by a model or a count)")
        report[name] = recall(sought, hypotheses)
        if covered is not None:
            report[name].update(
                {f"covered_{key}": value for key, value in recall(covered, hypotheses).items()}
            )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True, help="the training targets")
    parser.add_argument("--test", required=True, help="the test split's stem: STEM.zh, STEM.en")
    parser.add_argument("--src", default="zh")
    parser.add_argument("--tgt", default="en", help="en: the measure counts English words")
    parser.add_argument("--lexicon", type=Path, help="a dictionary's English side")
    parser.add_argument("hypotheses", nargs="+", metavar="NAME=FILE")
    args = parser.parse_args()
    try:
        report = measure(args)
    except AttnmtError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
