"""How far the two annotators of the gold alignment set agree: AER of one pass against the
other on the pairs both aligned (data/alignments/README.md).

    python scripts/alignment_agreement.py [--gold data/alignments]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnmt.data.units import GoldPair, read_links
from attnmt.infer.align import aer
from attnmt.infer.evaluate import GoldSet


def second_pass(path: Path) -> tuple[list[int], list[GoldPair]]:
    """The second annotator's pairs (`K<TAB>links` lines): their numbers and links."""
    numbers, lines = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        number, _, links = line.partition("\t")
        numbers.append(int(number))
        lines.append(links)
    scratch = path.with_suffix(".links.tmp")
    scratch.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    try:
        return numbers, read_links(scratch)
    finally:
        scratch.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", type=Path, default=Path("data/alignments"))
    args = parser.parse_args()
    gold = GoldSet.read(args.gold)
    numbers, second = second_pass(next(args.gold.glob("*.second")))
    first = [gold.pairs[k] for k in numbers]
    rows = [
        ("the second pass's sure links", [p.sure for p in second], "the first pass", first),
        ("the first pass's sure links", [p.sure for p in first], "the second pass", second),
        (
            "the second pass's sure and possible links",
            [p.possible for p in second],
            "the first pass",
            first,
        ),
    ]
    print(f"{len(numbers)} pairs aligned twice")
    for alignment, links, name, reference in rows:
        found = aer(links, reference)
        print(
            f"{alignment} against {name}: AER {found.aer:.3f} ({found.low:.3f}-{found.high:.3f}), "
            f"precision {found.precision:.3f}, recall {found.recall:.3f}"
        )


if __name__ == "__main__":
    main()
