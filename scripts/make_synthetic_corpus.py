"""Write a large synthetic Tatoeba-format corpus for scaling measurements.

    python scripts/make_synthetic_corpus.py PAIRS OUT [--source ../shared/data/.../cmn.txt]

Each line joins two random pairs of the source corpus ("A. B." / "甲。乙。"), so the pairs
are realistic in length and vocabulary and nearly all distinct. Deterministic (seed 0).
"""

import argparse
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = parser.parse_args()
    rows = [line.split("\t")[:2] for line in args.source.read_text(encoding="utf-8").splitlines()]
    rng = random.Random(0)
    with open(args.out, "w", encoding="utf-8") as out:
        for _ in range(args.pairs):
            (en1, zh1), (en2, zh2) = rng.choice(rows), rng.choice(rows)
            out.write(f"{en1} {en2}\t{zh1}{zh2}\tsynthetic\n")


if __name__ == "__main__":
    main()
