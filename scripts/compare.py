"""Compare the attention scorers: one Hydra multirun, same seed and time budget for each, then
test BLEU/chrF, parameters, speeds, a Markdown table and one plot of the dev-BLEU curves.

    python scripts/compare.py [--minutes 4] [--out compare] [HYDRA_OVERRIDE ...]

`make compare` runs it on the default corpus; extra overrides (data.*, trainer.*) go to every run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from attnmt.infer.evaluate import evaluate_sets, processed_sets  # noqa: E402
from attnmt.infer.translate import SearchConfig, Translator  # noqa: E402
from attnmt.options import option_names  # noqa: E402
from attnmt.plot import read_metrics  # noqa: E402

SCORERS = option_names("attention")  # every scorer of configs/attention/


def train_all(out: Path, minutes: float, overrides: list[str]) -> None:
    """One multirun: a run per scorer in out/runs/NAME."""
    command = [
        sys.executable,
        "-m",
        "attnmt.cli.train",
        "-m",
        f"attention={','.join(SCORERS)}",
        f"trainer.max_time={minutes}",
        f"hydra.sweep.dir={out / 'runs'}",
        "hydra.sweep.subdir=${hydra:runtime.choices.attention}",
        *overrides,
    ]
    subprocess.run(command, check=True)


def summarise(run_dir: Path, device: torch.device) -> dict:
    """Test scores, size and speeds of one finished run."""
    records = read_metrics(run_dir / "metrics.jsonl")
    speeds = [r["tokens_per_s"] for r in records if r["kind"] == "train"]
    curve = [(r["step"], r["bleu"]) for r in records if r["kind"] == "validation"]
    loaded = Translator.load(run_dir / "best.pt", device)
    test_set = processed_sets(loaded, ["test"])
    lines = len(test_set[0].source.read_text(encoding="utf-8").splitlines())
    start = time.perf_counter()
    entry = evaluate_sets(loaded, test_set, SearchConfig(beam_size=5), run_dir / "eval")[0]
    seconds = time.perf_counter() - start
    return {
        "bleu": entry["bleu"],
        "chrf": entry["chrf"],
        "signature": entry["signature"],
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "train_tokens_per_s": round(statistics.median(speeds)) if speeds else 0,
        "decode_sent_per_s": round(lines / seconds, 1),
        "best_dev_bleu": max(b for _, b in curve),
        "curve": curve,
    }


def write_table(results: dict[str, dict], path: Path, command: str) -> None:
    rows = [
        "| scorer | test BLEU | test chrF | parameters | train tokens/s | decode sent/s (beam 5) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        rows.append(
            f"| {name} | {r['bleu']:.2f} | {r['chrf']:.2f} | {r['parameters']:,} | "
            f"{r['train_tokens_per_s']:,} | {r['decode_sent_per_s']:.1f} |"
        )
    signature = next(iter(results.values()))["signature"]
    path.write_text(
        "\n".join([*rows, "", f"BLEU signature: `{signature}`", "", f"Command: `{command}`", ""]),
        encoding="utf-8",
    )


def plot_curves(results: dict[str, dict], path: Path) -> None:
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for name, r in results.items():
        axis.plot([s for s, _ in r["curve"]], [b for _, b in r["curve"]], "o-", label=name)
    axis.set_xlabel("step")
    axis.set_ylabel("dev BLEU")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=4.0, help="training budget per scorer")
    parser.add_argument("--out", type=Path, default=Path("compare"))
    parser.add_argument("--skip-training", action="store_true", help="summarise existing runs")
    args, overrides = parser.parse_known_args()
    if not args.skip_training:
        train_all(args.out, args.minutes, overrides)
    device = torch.device("cpu")
    results = {name: summarise(args.out / "runs" / name, device) for name in SCORERS}
    command = " ".join(["python scripts/compare.py", f"--minutes {args.minutes}", *overrides])
    write_table(results, args.out / "compare.md", command)
    plot_curves(results, args.out / "dev_bleu.png")
    (args.out / "compare.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print((args.out / "compare.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
