"""BLEU on the test pairs whose source holds a character that no training source has: where a
dictionary (data=tatoeba_cedict) could help most, beside BLEU on the whole test split.

    python scripts/unseen_characters.py --train DATA/train.zh --test DATA/test \
        [--lexicon LEXICON_SOURCES] NAME=HYPOTHESES [NAME=HYPOTHESES ...]

--train: the training sources the model without the dictionary saw (one sentence a line);
--test: the test split's stem (TEST.zh and TEST.en beside each other, or the other direction
with --src and --tgt); each NAME=FILE: one model's hypotheses of that split, line by line
(attnmt-evaluate's `test.hyp.en`). --lexicon: the dictionary's source side, to count how many
of the unseen characters it holds. Prints one JSON line: per model, BLEU and chrF on all pairs
and on the pairs with an unseen character, and how many pairs those are.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attnmt.data.corpus import read_lines
from attnmt.infer.evaluate import score


def characters(path: Path) -> set[str]:
    """Every character of every line of `path`, spaces aside."""
    seen: set[str] = set()
    for line in read_lines(path):
        seen.update(line)
    seen.discard(" ")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--test", required=True, help="the test split's stem: STEM.zh, STEM.en")
    parser.add_argument("--src", default="zh")
    parser.add_argument("--tgt", default="en")
    parser.add_argument("--lexicon", type=Path, help="the dictionary's source side")
    parser.add_argument("hypotheses", nargs="+", metavar="NAME=FILE")
    args = parser.parse_args()
    sources = list(read_lines(Path(f"{args.test}.{args.src}")))
    references = list(read_lines(Path(f"{args.test}.{args.tgt}")))
    seen = characters(args.train)
    unseen = [set(source) - seen - {" "} for source in sources]
    rows = [i for i, missing in enumerate(unseen) if missing]
    report: dict = {
        "test_pairs": len(sources),
        "pairs_with_unseen_character": len(rows),
        "unseen_characters": len(set().union(*unseen)),
    }
    if args.lexicon:
        lexicon = characters(args.lexicon)
        report["unseen_characters_in_lexicon"] = len(set().union(*unseen) & lexicon)
    for entry in args.hypotheses:
        name, _, file = entry.partition("=")
        hypotheses = list(read_lines(Path(file))) if file else []
        if len(hypotheses) != len(sources):
            raise SystemExit(
                f"{entry}: expected NAME=FILE with {len(sources)} lines (one per test pair)"
            )
        whole = score(hypotheses, references, args.tgt)
        report[name] = {"bleu": whole.bleu, "chrf": whole.chrf}
        if rows:  # (none: no subset to score)
            part = score([hypotheses[i] for i in rows], [references[i] for i in rows], args.tgt)
            report[name].update(unseen_bleu=part.bleu, unseen_chrf=part.chrf)
    report["signature"] = whole.signature
    print(json.dumps(report))


if __name__ == "__main__":
    main()
