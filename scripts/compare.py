"""The scorer study: every attention option trained for the same budget over several seeds,
then test BLEU/chrF (beam 5), a paired bootstrap against additive, AER on the gold set, the
attention's mean entropy and the speeds; a JSON file, a Markdown table and one plot.

    python scripts/compare.py [--variants additive dot ... guided] [--minutes 4] [--seeds 3]
                              [--guided-weight 1] [--gold data/alignments] [--out compare]
                              [HYDRA_OVERRIDE ...]

A variant is an attention option (configs/attention/; its run: `attention=VARIANT`), or
`guided`: additive attention trained with guided alignment (`attention=additive
trainer.guided_alignment=W`, W from --guided-weight). By default the study runs all of them.
Each (variant, seed) run goes to OUT/runs/VARIANT/seed{N} (`trainer.seed=N`) and is trained on
its own, one after the other. A run that finished is reused; one that was
interrupted resumes from its last.pt, so a stopped study continues where it stopped.
`make compare` runs it on the default corpus; extra overrides (data.*, trainer.*) go to every
run and come after the study's own, so they win.
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
import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from sacrebleu.metrics import BLEU  # noqa: E402
from sacrebleu.significance import PairedTest  # noqa: E402

from attnmt.data.corpus import normalize, read_lines  # noqa: E402
from attnmt.infer.evaluate import (  # noqa: E402
    GoldSet,
    alignment_error,
    bleu_tokenizer,
    evaluate_sets,
    processed_sets,
)
from attnmt.infer.score import forced_decode  # noqa: E402
from attnmt.infer.translate import SearchConfig, Translator  # noqa: E402
from attnmt.options import option_names  # noqa: E402
from attnmt.plot import read_metrics  # noqa: E402

BASELINE = "additive"  # the variant every other one is tested against
GUIDED = "guided"  # the baseline trained with guided alignment
FINISHED = "finished"  # written into a run directory once its training has ended
BEAM_SIZE = 5
BOOTSTRAP_SAMPLES = 1000


# --- training -------------------------------------------------------------------------------


def run_dir(out: Path, variant: str, seed: int) -> Path:
    return out / "runs" / variant / f"seed{seed}"


def is_finished(directory: Path) -> bool:
    """A run to reuse: its training ended (the marker) and left a best checkpoint."""
    return (directory / FINISHED).is_file() and (directory / "best.pt").is_file()


def variant_overrides(variant: str, guided_weight: float) -> list[str]:
    """What makes a variant: its attention option, or the guided baseline."""
    if variant == GUIDED:
        return [f"attention={BASELINE}", f"trainer.guided_alignment={guided_weight}"]
    return [f"attention={variant}"]


def train_command(seed: int, directory: Path, minutes: float, overrides: list[str]) -> list[str]:
    """One training run; `trainer.resume=auto` resumes an interrupted one in place. The
    variant's own overrides come first in `overrides`."""
    return [
        sys.executable,
        "-m",
        "attnmt.cli.train",
        f"trainer.seed={seed}",
        f"trainer.max_time={minutes}",
        "trainer.resume=auto",
        f"hydra.run.dir={directory}",
        *overrides,
    ]


def train_run(command: list[str], directory: Path) -> None:
    """Train to the end, then mark the run finished. On Ctrl-C the run got the signal too:
    wait for it to save its last.pt and stop, and leave it unmarked (it resumes next time)."""
    process = subprocess.Popen(command)
    try:
        status = process.wait()
    except KeyboardInterrupt:
        process.wait()
        raise
    if status:
        raise SystemExit(f"training failed (exit {status}): {' '.join(command)}")
    (directory / FINISHED).write_text(" ".join(command) + "\n", encoding="utf-8")


def check_guided_weight(directory: Path, weight: float) -> None:
    """Refuse to reuse or resume a guided run trained with another --guided-weight."""
    config = directory / ".hydra" / "config.yaml"
    if not config.is_file():
        return
    found = OmegaConf.load(config).trainer.guided_alignment
    if found != weight:
        raise SystemExit(
            f"{directory} was trained with trainer.guided_alignment={found}, not "
            f"--guided-weight {weight:g}: pass that weight, or another --out"
        )


def train_all(
    out: Path,
    variants: list[str],
    seeds: list[int],
    minutes: float,
    overrides: list[str],
    guided_weight: float,
) -> None:
    """Every (variant, seed) run that has not finished yet, one at a time."""
    for variant in variants:
        for seed in seeds:
            directory = run_dir(out, variant, seed)
            if variant == GUIDED:
                check_guided_weight(directory, guided_weight)
            if is_finished(directory):
                print(f"{directory}: finished, reused")
                continue
            own = [*variant_overrides(variant, guided_weight), *overrides]
            train_run(train_command(seed, directory, minutes, own), directory)


# --- one run's figures ----------------------------------------------------------------------


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """-sum_i a_i log a_i of each attention row (target positions x source positions).
    Rows are normalised to sum to 1 first: local-p's Gaussian-weighted rows do not."""
    rows = weights / np.maximum(weights.sum(-1, keepdims=True), 1e-12)
    return -(rows * np.log(np.where(rows > 0, rows, 1.0))).sum(-1)


def encoded(translator: Translator, path: Path, target: bool) -> list[np.ndarray]:
    """The piece ids of each line of `path`, a source (or target) side, normalised as in
    training."""
    sp, lang = (
        (translator.target_sp, translator.tgt_lang)
        if target
        else (translator.source_sp, translator.src_lang)
    )
    return [
        np.array(sp.encode(normalize(line, lang), out_type=int), dtype=np.int64)
        for line in read_lines(path)
    ]


def attention_entropy(translator: Translator, source: Path, reference: Path) -> float:
    """The mean entropy over all target positions (EOS included) of the attention under
    forced decoding of the reference translations."""
    sources = encoded(translator, source, target=False)
    targets = encoded(translator, reference, target=True)
    found = forced_decode(
        translator.model, sources, targets, 4096, translator.device, keep_attention=True
    )
    entropies = np.concatenate([row_entropy(weights) for _, weights in found])
    return float(entropies.mean())


def train_speed(directory: Path) -> int:
    """The median training tokens/s of the run's logged steps."""
    records = read_metrics(directory / "metrics.jsonl")
    speeds = [r["tokens_per_s"] for r in records if r["kind"] == "train"]
    return round(statistics.median(speeds)) if speeds else 0


def evaluate_run(directory: Path, gold: GoldSet, device: torch.device) -> dict:
    """Test BLEU/chrF with beam 5 and the decode speed, AER on `gold`, attention entropy and
    training speed of one run's best.pt."""
    translator = Translator.load(directory / "best.pt", device)
    test = processed_sets(translator, ["test"])[0]
    lines = len(list(read_lines(test.source)))
    start = time.perf_counter()
    search = SearchConfig(beam_size=BEAM_SIZE)
    entry = evaluate_sets(translator, [test], search, directory / "eval")[0]
    seconds = time.perf_counter() - start
    alignment = alignment_error(translator, gold)
    return {
        "bleu": entry["bleu"],
        "chrf": entry["chrf"],
        "p_value": None,
        "aer": round(alignment.aer, 4),
        "aer_low": round(alignment.low, 4),
        "aer_high": round(alignment.high, 4),
        "entropy": round(attention_entropy(translator, test.source, test.reference), 4),
        "train_tokens_per_s": train_speed(directory),
        "decode_sent_per_s": round(lines / seconds, 1),
        "signature": entry["signature"],
        "hypotheses": entry["hypotheses"],
        "reference": entry["reference"],
        "tgt_lang": translator.tgt_lang,
    }


# --- the study ------------------------------------------------------------------------------


def paired_p_value(
    baseline: list[str], system: list[str], references: list[str], lang: str
) -> float:
    """sacrebleu's paired bootstrap (paired_bs) of `system`'s BLEU against `baseline`'s on the
    same references: the p-value of the difference."""
    test = PairedTest(
        [(BASELINE, baseline), ("system", system)],
        {"BLEU": BLEU(tokenize=bleu_tokenizer(lang))},
        [references],
        test_type="bs",
        n_samples=BOOTSTRAP_SAMPLES,
    )
    _, scores = test()
    return float(scores["BLEU"][1].p_value)


def hypotheses(figures: dict) -> list[str]:
    return list(read_lines(Path(figures["hypotheses"])))


def add_p_values(results: dict[str, dict[int, dict]]) -> None:
    """Each variant's per-seed p-value against the baseline run of the same seed (the
    baseline's own stays None, as does a seed the baseline has no run for)."""
    baseline = results.get(BASELINE, {})
    for variant, runs in results.items():
        if variant == BASELINE:
            continue
        for seed, figures in runs.items():
            if seed not in baseline:
                continue
            references = list(read_lines(Path(figures["reference"])))
            figures["p_value"] = round(
                paired_p_value(
                    hypotheses(baseline[seed]), hypotheses(figures), references, figures["tgt_lang"]
                ),
                4,
            )


def mean(values: list[float], digits: int) -> float:
    return round(statistics.fmean(values), digits)


def spread(values: list[float]) -> float:
    """The sample standard deviation over seeds (0 with one seed)."""
    return round(statistics.stdev(values), 2) if len(values) > 1 else 0.0


def summarise(runs: dict[int, dict]) -> dict:
    """A variant's entry: means over its seeds (BLEU and chrF with their standard deviation),
    the largest of its per-seed p-values, and the per-seed figures."""
    column = {key: [r[key] for r in runs.values()] for key in next(iter(runs.values()))}
    p_values = [p for p in column["p_value"] if p is not None]
    return {
        "bleu": mean(column["bleu"], 2),
        "bleu_std": spread(column["bleu"]),
        "chrf": mean(column["chrf"], 2),
        "chrf_std": spread(column["chrf"]),
        "p_value": max(p_values) if p_values else None,
        "aer": mean(column["aer"], 4),
        "aer_low": mean(column["aer_low"], 4),
        "aer_high": mean(column["aer_high"], 4),
        "entropy": mean(column["entropy"], 4),
        "train_tokens_per_s": round(statistics.fmean(column["train_tokens_per_s"])),
        "decode_sent_per_s": mean(column["decode_sent_per_s"], 1),
        "seeds": {str(seed): figures for seed, figures in runs.items()},
    }


def evaluate_all(
    out: Path, variants: list[str], seeds: list[int], gold: GoldSet
) -> dict[str, dict[int, dict]]:
    """The figures of every run there is, by variant and seed; a missing run is skipped."""
    device = torch.device("cpu")
    results: dict[str, dict[int, dict]] = {}
    for variant in variants:
        for seed in seeds:
            directory = run_dir(out, variant, seed)
            if not (directory / "best.pt").is_file():
                print(f"{directory}: no best.pt, left out")
                continue
            results.setdefault(variant, {})[seed] = evaluate_run(directory, gold, device)
    return results


# --- reports --------------------------------------------------------------------------------


def format_p(value: float | None) -> str:
    return "baseline" if value is None else f"{value:.4f}"


def write_table(study: dict[str, dict], path: Path, notes: list[str]) -> None:
    rows = [
        "| variant | seeds | test BLEU | test chrF | p (BLEU vs additive) | AER (95% interval) | "
        "attention entropy | train tokens/s | decode sent/s (beam 5) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in study.items():
        rows.append(
            f"| {name} | {len(r['seeds'])} | {r['bleu']:.2f} ± {r['bleu_std']:.2f} | "
            f"{r['chrf']:.2f} ± {r['chrf_std']:.2f} | {format_p(r['p_value'])} | "
            f"{r['aer']:.3f} ({r['aer_low']:.3f}-{r['aer_high']:.3f}) | {r['entropy']:.3f} | "
            f"{r['train_tokens_per_s']:,} | {r['decode_sent_per_s']:.1f} |"
        )
    path.write_text("\n".join([*rows, "", *notes, ""]), encoding="utf-8")


def study_notes(study: dict[str, dict], gold: GoldSet, command: str) -> list[str]:
    """What the table's columns mean, under it."""
    compared = len([name for name in study if name != BASELINE])
    seeds = next(iter(study.values()))["seeds"].values()
    return [
        "Means over seeds, ± the standard deviation. p: sacrebleu's paired bootstrap "
        f"({BOOTSTRAP_SAMPLES} samples) of the variant's test BLEU against {BASELINE}'s, run per "
        "seed (same seed, both variants); the largest of those p-values is shown. "
        f"Several variants ({compared}) are compared with the baseline, so a difference is "
        f"significant at 5% overall only below 0.05/{max(compared, 1)} (Bonferroni).",
        f"AER: on the gold set {gold.name} ({len(gold.pairs)} pairs), the mean over seeds of "
        "each run's AER and of its bootstrap 95% interval.",
        "Attention entropy: the mean over target positions of -sum_i a_i log a_i (nats) in "
        "forced decoding of the test split; rows that do not sum to 1 (local_p) are normalised "
        "first.",
        f"BLEU signature: `{next(iter(seeds))['signature']}`",
        "",
        f"Command: `{command}`",
    ]


def plot_study(study: dict[str, dict], path: Path) -> None:
    """Test BLEU (± std over seeds) and AER (with its mean 95% interval) per variant."""
    names = list(study)
    positions = np.arange(len(names))
    figure, (bleu_axis, aer_axis) = plt.subplots(1, 2, figsize=(11, 4.5))
    bleu_axis.bar(
        positions,
        [study[n]["bleu"] for n in names],
        yerr=[study[n]["bleu_std"] for n in names],
        capsize=4,
    )
    bleu_axis.set_ylabel("test BLEU (beam 5), mean ± std over seeds")
    aer = np.array([study[n]["aer"] for n in names])
    errors = np.array(
        [aer - [study[n]["aer_low"] for n in names], [study[n]["aer_high"] for n in names] - aer]
    )
    aer_axis.bar(positions, aer, yerr=errors, capsize=4, color="tab:orange")
    aer_axis.set_ylabel("AER on the gold set (lower is better)")
    for axis in (bleu_axis, aer_axis):
        axis.set_xticks(positions, names, rotation=30, ha="right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def parse_args() -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    options = [*option_names("attention"), GUIDED]
    parser.add_argument(
        "--variants",
        nargs="+",
        default=options,
        choices=options,
        help=f"attention options (configs/attention/) and {GUIDED}; default: all of them. "
        "Before any Hydra override",
    )
    parser.add_argument(
        "--guided-weight",
        type=float,
        default=1.0,
        help=f"trainer.guided_alignment of the {GUIDED} variant",
    )
    parser.add_argument("--minutes", type=float, default=4.0, help="training budget per run")
    parser.add_argument("--seeds", type=int, default=3, help="runs per variant: seeds 1..N")
    parser.add_argument("--gold", type=Path, default=Path("data/alignments"), help="gold set")
    parser.add_argument("--out", type=Path, default=Path("compare"))
    parser.add_argument("--skip-training", action="store_true", help="evaluate existing runs")
    return parser.parse_known_args()


def main() -> None:
    args, overrides = parse_args()
    seeds = list(range(1, args.seeds + 1))
    gold = GoldSet.read(args.gold)
    if not args.skip_training:
        train_all(args.out, args.variants, seeds, args.minutes, overrides, args.guided_weight)
    results = evaluate_all(args.out, args.variants, seeds, gold)
    if not results:
        raise SystemExit(f"no runs with a best.pt under {args.out / 'runs'}")
    add_p_values(results)
    study = {variant: summarise(runs) for variant, runs in results.items()}
    command = " ".join(
        [
            "python scripts/compare.py",
            f"--variants {' '.join(args.variants)}",
            f"--minutes {args.minutes:g} --seeds {args.seeds}",
            *([f"--guided-weight {args.guided_weight:g}"] if GUIDED in args.variants else []),
            *overrides,
        ]
    )
    write_table(study, args.out / "compare.md", study_notes(study, gold, command))
    plot_study(study, args.out / "compare.png")
    (args.out / "compare.json").write_text(json.dumps(study, indent=2) + "\n", encoding="utf-8")
    print((args.out / "compare.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
