"""What early stopping would have done to finished runs: for each patience (validations without
a dev BLEU better than the best by more than a minimum gain), the step where each run would
have stopped and the best dev BLEU it would have kept, against the whole run's.

    python scripts/early_stopping.py RUN [RUN ...] [--patience 3 6 10] [--min-gain 0 0.2]

A run stopped early is its whole run cut at that step: with a step budget the learning rate of
a step does not depend on when the run will stop, so the validations up to the stop are the
ones it would have made. Reads each RUN/metrics.jsonl (its `validation` records, the closing one
included). Prints a markdown table, one row per (patience, minimum gain): the runs that would
have stopped, the mean share of the steps they would have saved, and the mean and largest dev
BLEU lost (the whole run's best less the best kept).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def validations(run: Path) -> list[tuple[int, float]]:
    """(step, dev BLEU) of each validation of a run, in order."""
    path = run / "metrics.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        sys.exit(f"early_stopping.py: error: {path}: {error.strerror}")
    found = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            sys.exit(f"early_stopping.py: error: {path}:{number}: not a JSON record")
        if record.get("kind") == "validation" and "bleu" in record:
            found.append((int(record["step"]), float(record["bleu"])))
    if not found:
        sys.exit(f"early_stopping.py: error: {path}: no validation with a dev BLEU")
    return found


def stop(curve: list[tuple[int, float]], patience: int, min_gain: float) -> tuple[int, float]:
    """(the step where the run stops, the best dev BLEU kept by then): the first validation
    that makes `patience` in a row without beating the best by more than `min_gain`; the last
    validation where none does."""
    best, waited = curve[0][1], 0
    for step, bleu in curve[1:]:
        if bleu > best + min_gain:
            best, waited = bleu, 0
        else:
            best, waited = max(best, bleu), waited + 1
            if waited >= patience:
                return step, best
    return curve[-1][0], best


def table(curves: list[list[tuple[int, float]]], patiences: list[int], gains: list[float]) -> str:
    rows = [
        "| patience (validations) | minimum gain | runs stopped | steps saved "
        "| dev BLEU lost: mean | largest |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for patience in patiences:
        for gain in gains:
            stops = [stop(curve, patience, gain) for curve in curves]
            stopped = sum(
                step < curve[-1][0] for (step, _), curve in zip(stops, curves, strict=True)
            )
            saved = [
                1 - step / curve[-1][0] for (step, _), curve in zip(stops, curves, strict=True)
            ]
            lost = [
                max(b for _, b in curve) - kept
                for (_, kept), curve in zip(stops, curves, strict=True)
            ]
            rows.append(
                f"| {patience} | {gain:g} | {stopped} of {len(curves)} | "
                f"{statistics.fmean(saved):.0%} | {statistics.fmean(lost):.2f} | {max(lost):.2f} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--patience", type=int, nargs="+", default=[3, 6, 10])
    parser.add_argument("--min-gain", type=float, nargs="+", default=[0.0, 0.2])
    args = parser.parse_args()
    if min(args.patience) < 1 or min(args.min_gain) < 0:
        parser.error("--patience: at least 1; --min-gain: at least 0")
    print(table([validations(run) for run in args.runs], args.patience, args.min_gain))


if __name__ == "__main__":
    main()
