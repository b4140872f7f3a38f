"""The statistical baseline of the gold alignment set: eflomal's AER.

    python scripts/eflomal_baseline.py [--data DIR] [--gold data/alignments] [--json FILE]

eflomal (Östling and Tiedemann 2016) aligns the training split of the processed data with the
gold set's pairs appended (an aligner only aligns what it is given; they are not training data
for any model), at the units of `attnmt.data.units` (Chinese characters and Latin runs, 13a
words), in both directions; the two are symmetrised with grow-diag-final-and
(`attnmt.data.units.grow_diag_final_and`), as guided alignment's cache does
(`attnmt.data.guide`). Prints the AER on the gold set of each direction
and of the symmetrised links, with bootstrap 95% intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attnmt.data.guide import aligner_tokens, eflomal_links
from attnmt.data.units import grow_diag_final_and
from attnmt.errors import DataError
from attnmt.infer.align import aer
from attnmt.infer.evaluate import GoldSet

REPO = Path(__file__).resolve().parents[1]


def default_data() -> Path:
    """The newest processed folder of the gold set's direction under data/processed."""
    found = sorted(
        (REPO / "data" / "processed").glob("tatoeba.zh-en.*"), key=lambda p: p.stat().st_mtime
    )
    if not found:
        sys.exit("no data/processed/tatoeba.zh-en.*: run make data first, or pass --data DIR")
    return found[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a processed folder (default: the newest zh-en)")
    parser.add_argument("--gold", type=Path, default=REPO / "data" / "alignments")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    gold = GoldSet.read(args.gold)
    data = args.data or default_data()
    src, tgt = gold.src_lang, gold.tgt_lang
    sources = (data / f"train.{src}").read_text(encoding="utf-8").splitlines() + gold.sources
    targets = (data / f"train.{tgt}").read_text(encoding="utf-8").splitlines() + gold.targets
    try:
        forward, backward = eflomal_links(
            [aligner_tokens(s, src) for s in sources], [aligner_tokens(t, tgt) for t in targets]
        )
    except DataError as error:
        sys.exit(str(error))
    count = len(gold.pairs)
    directions = {"forward": forward[-count:], "backward": backward[-count:]}
    directions["grow-diag-final-and"] = [
        grow_diag_final_and(f, b)
        for f, b in zip(directions["forward"], directions["backward"], strict=True)
    ]
    report = {"data": str(data), "gold": gold.name, "pairs": count, "training_pairs": len(sources)}
    for name, links in directions.items():
        found = aer(links, gold.pairs)
        report[name] = {
            "aer": found.aer,
            "low": found.low,
            "high": found.high,
            "precision": found.precision,
            "recall": found.recall,
        }
        print(
            f"eflomal {name}: AER {found.aer:.3f} ({found.low:.3f}-{found.high:.3f}), "
            f"precision {found.precision:.3f}, recall {found.recall:.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
