"""Dev BLEU against wall-clock minutes for training runs, side by side: a plot and a table.

    python scripts/time_to_quality.py --run "main bc20b3a=/tmp/base/outputs/.../" \
        --run "this recipe=outputs/.../" --png docs/time_to_quality.png [--minutes 10 20]

Each run directory's train.log gives the time of every validation ("step N: dev loss ...
BLEU x") counted from the log's first line, so runs of any attnmt version compare the same
way (the clock includes start-up and validation). A JoeyNMT run directory (the kit's
`quality.sh` writes WORKDIR/quality-MINUTES/train.log) is read the same way, from its
"Evaluation result (greedy): bleu: x" lines. Prints, per run, the best dev BLEU by each
of --minutes and at its end, and the first minute each run reached every other run's best.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# attnmt's log lines begin "[2026-12-04 17:05:18,123]", JoeyNMT's "2026-12-04 17:05:18,123 - ".
LINE = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})[\] ]")
VALIDATION = re.compile(
    r"step \d+: dev loss \S+ ppl \S+ BLEU (?P<attnmt>\S+)"
    r"|Evaluation result \(greedy\): bleu:\s+(?P<joeynmt>[\d.]+)"
)


def curve(run_dir: Path) -> list[tuple[float, float]]:
    """(minutes since the log began, dev BLEU) at each validation of a run."""
    start, points = None, []
    for line in (run_dir / "train.log").read_text(encoding="utf-8").splitlines():
        stamp = LINE.match(line)
        if not stamp:
            continue
        when = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f")
        start = start or when
        found = VALIDATION.search(line)
        if found:
            bleu = found.group("attnmt") or found.group("joeynmt")
            points.append(((when - start).total_seconds() / 60, float(bleu)))
    return points


def best_by(points: list[tuple[float, float]], minute: float) -> float:
    """The best dev BLEU a run had reached by `minute` (best.pt's)."""
    return max((bleu for when, bleu in points if when <= minute), default=0.0)


def first_reaching(points: list[tuple[float, float]], bleu: float) -> float | None:
    return next((when for when, b in points if b >= bleu), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run", action="append", required=True, help="LABEL=RUN_DIR (split at its last =)"
    )
    parser.add_argument("--png", type=Path)
    parser.add_argument("--title", default="dev BLEU (greedy) against training minutes")
    parser.add_argument("--minutes", type=float, nargs="*", default=[10, 20])
    args = parser.parse_args()
    runs = {}
    for item in args.run:
        label, _, path = item.rpartition("=")  # a label may hold "=", a path does not
        runs[label] = curve(Path(path))
    for label, points in runs.items():
        at = "  ".join(f"{m:g} min: {best_by(points, m):5.2f}" for m in args.minutes)
        best = max(bleu for _, bleu in points)
        print(
            f"{label}: {at}  best {best:.2f} ({len(points)} validations, the last "
            f"ending at {points[-1][0]:.1f} min)"
        )
    for label, points in runs.items():
        for other, theirs in runs.items():
            if other == label:
                continue
            target = max(bleu for _, bleu in theirs)  # its best.pt when it stopped
            when = first_reaching(points, target)
            said = f"{when:.1f} min" if when is not None else "not reached"
            print(f"{label} reaches {other}'s best {target:.2f}: {said}")
    if args.png:
        figure, axis = plt.subplots(figsize=(7, 4.2))
        for label, points in runs.items():
            axis.plot(*zip(*points, strict=True), marker=".", label=label)
        axis.set_xlabel("minutes of training (validation included)")
        axis.set_ylabel("dev BLEU")
        axis.set_title(args.title, fontsize=10)
        axis.grid(alpha=0.3)
        axis.legend()
        figure.tight_layout()
        figure.savefig(args.png, dpi=110)
        print(f"plot: {args.png}")


if __name__ == "__main__":
    main()
