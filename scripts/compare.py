"""The scorer study: each variant trained for the same number of steps over several seeds, each
run's figures kept in a committed ledger, then a table, a plot and one verdict per variant.

    python scripts/compare.py [--variants V ...] [--baseline additive] [--steps N] [--seeds 3]
                              [--precision bf16|fp16|fp32] [--ledger docs/study/ledger]
                              [--gold data/alignments] [--out compare]
                              [--skip-training | --train-seeds S ...] [HYDRA_OVERRIDE ...]

Variants. A variant is `[DECODER+]SCORER`. SCORER is an attention option (configs/attention/;
its runs: `attention=SCORER`) or `guided[=W]`: additive attention trained with guided alignment
of weight W (`trainer.guided_alignment=W`, W 1 unless given), so `guided=0.5 guided=1` are two
variants. DECODER, when given, is a preset of DECODERS below: `bahdanau+dot` is Bahdanau's
decoder (the recipe's until the study chose Luong's without input feeding) with dot attention;
without one, the recipe's decoder. Every variant is compared with --baseline (additive), which
the study always includes.

Runs. Each (variant, seed) run trains the same step budget, --steps (default: the recipe's
`trainer.max_steps`), with early stopping and the time cap off (`trainer.max_steps=N
trainer.patience=null trainer.max_time=null trainer.seed=SEED`), in OUT/runs/VARIANT/seedSEED,
one run at a time; an interrupted run resumes from its last.pt. Extra overrides (data.*,
trainer.*) go to every run after the study's own, so they win. `make compare` runs it on the
default corpus.

The ledger (--ledger; scripts/ledger.py). A run whose model is in the ledger (its key's seed,
steps, precision, data, model code and resolved config, however its variant asked for them) is
neither trained nor evaluated: its entry's figures are used. Any other run is trained,
evaluated (dev and test BLEU/chrF with beam 5, AER on the gold set, attention entropy) and its
entry written, so a study can span days and machines; `--train-seeds 4 5` trains only those
seeds, the others come from the ledger (or are left out), so machines can share one study's
seeds out. A table holds one precision (--precision; default: what this machine trains in); runs
of another precision come from the ledger only.

Significance. Each variant against the baseline on the seeds both have, by
`attnmt.infer.significance.paired_bootstrap`: sentences and seeds resampled together. Dev
decides: a difference is significant when its dev p-value is below 0.05 / (the number of
variants compared with the baseline), Bonferroni's correction; test is reported beside it. The
output ends with one verdict line per variant.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_module  # noqa: E402
from hydra.errors import HydraException  # noqa: E402
from ledger import SPLITS, Ledger, LedgerError, RunKey  # noqa: E402  (scripts/ledger.py)
from omegaconf import OmegaConf  # noqa: E402
from omegaconf.errors import OmegaConfBaseException  # noqa: E402

from attnmt import MODEL_CODE_VERSION  # noqa: E402
from attnmt.cli.common import plain  # noqa: E402
from attnmt.config import to_dataclass  # noqa: E402
from attnmt.data.config import DataConfig  # noqa: E402
from attnmt.data.corpus import normalize, read_lines  # noqa: E402
from attnmt.data.prepare import prepare_dataset  # noqa: E402
from attnmt.errors import AttnmtError  # noqa: E402
from attnmt.infer.checkpoint import load_checkpoint  # noqa: E402
from attnmt.infer.evaluate import (  # noqa: E402
    GoldSet,
    alignment_error,
    evaluate_sets,
    processed_sets,
)
from attnmt.infer.score import forced_decode  # noqa: E402
from attnmt.infer.significance import (  # noqa: E402
    SAMPLES,
    Comparison,
    bleu_statistics,
    paired_bootstrap,
)
from attnmt.infer.translate import SearchConfig, Translator  # noqa: E402
from attnmt.options import option_names  # noqa: E402
from attnmt.plot import read_metrics  # noqa: E402
from attnmt.runtime import amp_dtype, cpu_info, pick_device  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LEDGER = REPO / "docs" / "study" / "ledger"
BASELINE = "additive"  # the variant every other one is tested against, unless --baseline
GUIDED = "guided"  # guided[=W]: additive attention trained with guided alignment of weight W
GUIDED_SCORER = "additive"
# The decoders a variant may name before its scorer (DECODER+SCORER), by their overrides.
DECODERS = {
    "bahdanau": ["decoder=bahdanau"],
    "luong": ["decoder=luong"],
    "luong-nofeed": ["decoder=luong", "decoder.input_feeding=false"],
}
FINISHED = "finished"  # written into a run directory once its training has ended
BEAM_SIZE = 5
ALPHA = 0.05  # the study's significance level, over all its variants (Bonferroni)
# Overrides that say only where files go, left out of a run's key: what the data is, the
# dataset's fingerprint says.
WHERE = ("hydra.", "data.processed_dir=", "trainer.resume=")
# Trainer settings that say only how a run computes, also left out of its key (overrides and
# config digest): the key's precision says what trainer.amp chose, and threads change no formula.
HOW = ("amp", "threads")
HOW_OVERRIDES = tuple(f"trainer.{name}=" for name in HOW)
PRECISIONS = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# The trainer's log line of its precision (attnmt.train.build), and its names there.
PRECISION_LINE = re.compile(r"training precision: (\S+)")
LOGGED_PRECISIONS = {"fp32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}
# attnmt.model.native's line: whether fp32's element-wise work ran as its C++ kernels
KERNELS_LINE = re.compile(r"fused C\+\+ GRU: (on|off)")


class StudyError(Exception):
    """What stops the study: one line, exit status 2."""


class LeftOut(Exception):
    """Why a run cannot give its key's figures; the study goes on without it."""


# --- variants -------------------------------------------------------------------------------


def variant_name(text: str) -> str:
    """The canonical name of variant `text` (`guided` is `guided=1`, `guided=0.50` is
    `guided=0.5`); argparse's error where it is none."""
    decoder, _, scorer = text.rpartition("+")
    name, equals, weight = scorer.partition("=")
    if name == GUIDED:
        try:
            value = float(weight) if equals else 1.0
        except ValueError:
            value = 0.0
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: guided=W takes a weight W > 0")
        scorer = f"{GUIDED}={value:g}"
    if (decoder and decoder not in DECODERS) or (
        name != GUIDED and (equals or scorer not in option_names("attention"))
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a variant: [DECODER+]SCORER, DECODER one of "
            f"{', '.join(DECODERS)}, SCORER an attention option "
            f"({', '.join(option_names('attention'))}) or {GUIDED}[=W]"
        )
    return f"{decoder}+{scorer}" if decoder else scorer


def variant_overrides(variant: str) -> list[str]:
    """What makes a variant: its decoder preset's overrides, then its attention option (or the
    guided scorer with its weight)."""
    decoder, _, scorer = variant.rpartition("+")
    overrides = list(DECODERS[decoder]) if decoder else []
    name, _, weight = scorer.partition("=")
    if name == GUIDED:
        return [*overrides, f"attention={GUIDED_SCORER}", f"trainer.guided_alignment={weight}"]
    return [*overrides, f"attention={scorer}"]


def run_dir(out: Path, variant: str, seed: int) -> Path:
    return out / "runs" / re.sub(r"[^A-Za-z0-9_.-]", "_", variant) / f"seed{seed}"


# --- what a run is: its config and key ------------------------------------------------------


def composed(overrides: list[str]) -> dict:
    """The resolved `train` config of `overrides` (hydra.* left out), as attnmt-train
    composes it."""
    given = [o for o in overrides if not o.startswith("hydra.")]
    try:
        with initialize_config_module(config_module="attnmt.configs", version_base="1.3"):
            return plain(compose(config_name="train", overrides=given))
    except (HydraException, OmegaConfBaseException, AttnmtError) as error:
        raise StudyError(f"cannot compose the train config: {error}") from None


def recipe_steps(overrides: list[str]) -> int:
    """The recipe's step budget, `trainer.max_steps` with the user's overrides."""
    steps = composed(overrides)["trainer"]["max_steps"]
    if steps is None:
        raise StudyError(
            "the recipe sets no trainer.max_steps: give the study's step budget as --steps N"
        )
    return steps


def config_digest(config: dict) -> str:
    """sha256 of a resolved config, less where its files go (data.processed_dir) and how it
    computes (HOW)."""
    data = {k: v for k, v in config["data"].items() if k != "processed_dir"}
    trainer = {k: v for k, v in config["trainer"].items() if k not in HOW}
    kept = {**config, "data": data, "trainer": trainer}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Dataset:
    """The processed dataset a run trains on."""

    fingerprint: str  # of everything it was built from (its manifest.json)
    folder: str
    vocab: dict[str, int]  # vocabulary size by language


def dataset_of(data: dict, known: dict[str, Dataset]) -> Dataset:
    """The dataset of a `data` config, built by attnmt-prepare's code if need be (training
    would build it anyway); `known` caches it by config."""
    text = json.dumps(data, sort_keys=True)
    if text not in known:
        folder, manifest, _ = prepare_dataset(to_dataclass(DataConfig, data, "data"))
        vocab = {lang: entry["size"] for lang, entry in manifest["vocab"].items()}
        known[text] = Dataset(manifest["fingerprint"], folder.name, vocab)
    return known[text]


def device_name(trainer: dict) -> str:
    """`cpu`, or the name of the GPU a run trains on."""
    device = pick_device(trainer["device"], "trainer.device")
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def training_precision(trainer: dict) -> str:
    """What a run trains in on this machine (attnmt.runtime.amp_dtype): bf16, fp16 or fp32."""
    return PRECISIONS[amp_dtype(trainer["amp"], pick_device(trainer["device"], "trainer.device"))]


@dataclass(frozen=True)
class Run:
    """One (variant, seed) run of the study, as this machine would train it."""

    variant: str
    seed: int
    directory: Path
    overrides: list[str]  # the training command's: the study's own, the variant's, the user's
    key: RunKey
    dataset: Dataset
    device: str


def plan_run(
    variant: str, seed: int, steps: int, extra: list[str], out: Path, known: dict[str, Dataset]
) -> Run:
    overrides = [
        f"trainer.seed={seed}",
        f"trainer.max_steps={steps}",
        "trainer.patience=null",
        "trainer.max_time=null",
        *variant_overrides(variant),
        *extra,
    ]
    config = composed(overrides)
    trainer = config["trainer"]
    if trainer["max_steps"] is None:
        raise StudyError("trainer.max_steps=null: the study trains every run for a step budget")
    dataset = dataset_of(config["data"], known)
    key = RunKey(
        variant=variant,
        seed=seed,
        steps=trainer["max_steps"],
        precision=training_precision(trainer),
        data=dataset.fingerprint,
        model_code=MODEL_CODE_VERSION,
        config=config_digest(config),
        overrides=tuple(o for o in overrides if not o.startswith((*WHERE, *HOW_OVERRIDES))),
    )
    directory = run_dir(out, variant, seed)
    return Run(variant, seed, directory, overrides, key, dataset, device_name(trainer))


# --- training -------------------------------------------------------------------------------


def train_command(run: Run) -> list[str]:
    """One training run; `trainer.resume=auto` resumes an interrupted one in place."""
    return [
        sys.executable,
        "-m",
        "attnmt.cli.train",
        "trainer.resume=auto",
        f"hydra.run.dir={run.directory}",
        *run.overrides,
    ]


def check_run_dir(run: Run) -> None:
    """Refuse to reuse or resume a run directory trained with other overrides."""
    saved = run.directory / ".hydra" / "overrides.yaml"
    if not saved.is_file():
        return
    before = [str(o) for o in OmegaConf.load(saved) if not str(o).startswith(WHERE)]
    now = [o for o in run.overrides if not o.startswith(WHERE)]
    if before != now:
        was = [o for o in before if o not in now] or ["(none)"]
        wanted = [o for o in now if o not in before] or ["(none)"]
        raise StudyError(
            f"{run.directory} was trained with {' '.join(was)}, not {' '.join(wanted)}: "
            "remove it, or give another --out"
        )


def train_run(run: Run) -> None:
    """Train to the end, then mark the run finished. On Ctrl-C the run got the signal too:
    wait for it to save its last.pt and stop, and leave it unmarked (it resumes next time)."""
    command = train_command(run)
    process = subprocess.Popen(command)
    try:
        status = process.wait()
    except KeyboardInterrupt:
        process.wait()
        raise
    if status:
        raise StudyError(f"training failed (exit {status}): {' '.join(command)}")
    if unfinished(run) is None:  # a run stopped by a signal exits 0 too: it resumes next time
        (run.directory / FINISHED).write_text(" ".join(command) + "\n", encoding="utf-8")


def unfinished(run: Run) -> str | None:
    """Why a run that ended is not the model its key names, or None: it left no best.pt, or
    stopped before its step budget."""
    if not (run.directory / "best.pt").is_file():
        return "it left no best.pt (no validation ran: see its train.log)"
    if not (run.directory / "last.pt").is_file():
        return "it left no last.pt (see its train.log)"
    step = load_checkpoint(run.directory / "last.pt")["progress"]["step"]
    if step < run.key.steps:
        return f"it stopped at step {step} of {run.key.steps} (see its train.log)"
    return None


def logged_precision(directory: Path) -> str | None:
    """What the run says it trained in (the trainer's log line), or None without it (the
    study then takes what this machine trains the run's config in)."""
    log = directory / "train.log"
    found = PRECISION_LINE.findall(log.read_text(encoding="utf-8")) if log.is_file() else []
    return LOGGED_PRECISIONS.get(found[-1]) if found else None


def logged_kernels(directory: Path) -> str | None:
    """Which code ran the run's fp32 element-wise work, by its log: "C++" (the kernels of
    attnmt.model.native) or "torch"; None where the log says neither (a bf16 run, a run from
    before the kernels). Both compute the same formulas, within rounding, as two CPUs do."""
    log = directory / "train.log"
    found = KERNELS_LINE.findall(log.read_text(encoding="utf-8")) if log.is_file() else []
    return None if not found else "C++" if found[-1] == "on" else "torch"


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


def training_minutes(directory: Path) -> float:
    """The run's clock at its last validation: minutes of training and validations."""
    records = read_metrics(directory / "metrics.jsonl")
    minutes = [r["minutes"] for r in records if r["kind"] == "validation"]
    return round(minutes[-1], 2) if minutes else 0.0


def evaluate_run(directory: Path, gold: GoldSet, device: torch.device) -> dict:
    """Dev and test BLEU/chrF with beam 5 and each sentence's BLEU statistics, the decode
    speed, AER on `gold`, the attention entropy on test, and the training speed and minutes of
    one run's best.pt."""
    translator = Translator.load(directory / "best.pt", device)
    sets = processed_sets(translator, list(SPLITS))
    lines = sum(len(list(read_lines(s.source))) for s in sets)
    start = time.perf_counter()
    scored = evaluate_sets(translator, sets, SearchConfig(beam_size=BEAM_SIZE), directory / "eval")
    seconds = time.perf_counter() - start
    figures: dict = {}
    for entry in scored:
        hypotheses = list(read_lines(Path(entry["hypotheses"])))
        references = list(read_lines(Path(entry["reference"])))
        stats = bleu_statistics(hypotheses, references, translator.tgt_lang)
        figures[entry["name"]] = {
            "bleu": entry["bleu"],
            "chrf": entry["chrf"],
            "stats": stats.tolist(),
        }
    test = sets[SPLITS.index("test")]
    alignment = alignment_error(translator, gold)
    return {
        **figures,
        "bleu_signature": scored[0]["signature"],
        "aer": round(alignment.aer, 4),
        "aer_low": round(alignment.low, 4),
        "aer_high": round(alignment.high, 4),
        "entropy": round(attention_entropy(translator, test.source, test.reference), 4),
        "minutes": training_minutes(directory),
        "train_tokens_per_s": train_speed(directory),
        "decode_sent_per_s": round(lines / seconds, 1),
    }


def commit() -> str | None:
    """The checkout's commit (git rev-parse HEAD), or None outside a git checkout."""
    try:
        found = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return found.stdout.strip() or None


# --- the study ------------------------------------------------------------------------------

Found = tuple[Path, dict]  # a ledger entry and its file


def train_and_evaluate(run: Run, ledger: Ledger, gold: GoldSet, skip_training: bool) -> Found:
    """A run not in the ledger: trained unless it has finished, evaluated, written to the
    ledger; LeftOut where it cannot give its key's figures."""
    check_run_dir(run)
    if not (run.directory / FINISHED).is_file():
        if skip_training:
            raise LeftOut("not trained yet (--skip-training, or not in --train-seeds)")
        train_run(run)
    problem = unfinished(run)
    if problem:
        raise LeftOut(problem)
    trained = logged_precision(run.directory)
    if trained not in (None, run.key.precision):
        raise LeftOut(f"it trained in {trained}, not this machine's {run.key.precision}")
    figures = evaluate_run(run.directory, gold, torch.device("cpu"))
    facts = {
        "commit": commit(),
        "cpu": cpu_info().get("model name"),
        "device": run.device,
        "torch": torch.__version__,
        "kernels": logged_kernels(run.directory),
        "data_folder": run.dataset.folder,
        "vocab": run.dataset.vocab,
    }
    return ledger.write(run.key, {**facts, **figures})


def gather(
    runs: list[Run], ledger: Ledger, precision: str, gold: GoldSet, train: set[int]
) -> tuple[dict[str, dict[int, Found]], list[str]]:
    """Each run's ledger entry in `precision`, by variant and seed: found in the ledger, or
    (seeds in `train`) trained, evaluated and written there; and a line for each run left
    out."""
    results: dict[str, dict[int, Found]] = {}
    left_out = []
    for run in runs:
        name = f"{run.variant} seed {run.seed}"
        found = ledger.find(dataclasses.replace(run.key, precision=precision))
        if found:
            print(f"{name}: in the ledger ({found[0].name}), reused")
        elif precision != run.key.precision:
            hint = "; trainer.amp=false trains fp32" if precision == "fp32" else ""
            left_out.append(
                f"{name}: no {precision} entry in the ledger (this machine trains it in "
                f"{run.key.precision}{hint})"
            )
            continue
        else:
            try:
                found = train_and_evaluate(run, ledger, gold, run.seed not in train)
            except LeftOut as error:
                left_out.append(f"{name} ({run.directory}): {error}")
                continue
            print(f"{name}: written to the ledger ({found[0]})")
        results.setdefault(run.variant, {})[run.seed] = found
    for line in left_out:
        print(f"left out: {line}")
    return results, left_out


def mean(values: list[float], digits: int) -> float:
    return round(statistics.fmean(values), digits)


def spread(values: list[float]) -> float:
    """The sample standard deviation over seeds (0 with one seed)."""
    return round(statistics.stdev(values), 2) if len(values) > 1 else 0.0


def machine(entry: dict) -> str:
    """Where a run trained: its CPU, and its GPU if it had one."""
    cpu = entry["cpu"] or "unknown CPU"
    return cpu if entry["device"] == "cpu" else f"{cpu} with {entry['device']}"


def summarise(runs: dict[int, Found]) -> dict:
    """A variant's entry: means over its seeds (BLEU and chrF with their standard deviation)
    and the per-seed figures."""
    entries = {seed: entry for seed, (_, entry) in runs.items()}

    def column(*path: str) -> list[float]:
        values = []
        for entry in entries.values():
            for name in path:
                entry = entry[name]
            values.append(entry)
        return values

    return {
        "precision": next(iter(entries.values()))["key"]["precision"],
        "dev_bleu": mean(column("dev", "bleu"), 2),
        "dev_bleu_std": spread(column("dev", "bleu")),
        "bleu": mean(column("test", "bleu"), 2),
        "bleu_std": spread(column("test", "bleu")),
        "chrf": mean(column("test", "chrf"), 2),
        "chrf_std": spread(column("test", "chrf")),
        "aer": mean(column("aer"), 4),
        "aer_low": mean(column("aer_low"), 4),
        "aer_high": mean(column("aer_high"), 4),
        "entropy": mean(column("entropy"), 4),
        "train_tokens_per_s": round(statistics.fmean(column("train_tokens_per_s"))),
        "minutes": mean(column("minutes"), 1),
        "decode_sent_per_s": mean(column("decode_sent_per_s"), 1),
        "machines": sorted({machine(entry) for entry in entries.values()}),
        "seeds": {
            str(seed): {
                "ledger": str(path),
                "dev_bleu": entry["dev"]["bleu"],
                "bleu": entry["test"]["bleu"],
                "chrf": entry["test"]["chrf"],
                "aer": entry["aer"],
                "entropy": entry["entropy"],
                "minutes": entry["minutes"],
                "train_tokens_per_s": entry["train_tokens_per_s"],
                "machine": machine(entry),
                "commit": entry["commit"],
            }
            for seed, (path, entry) in runs.items()
        },
    }


def sentence_stats(runs: dict[int, Found], split: str, size: int | None) -> dict[int, np.ndarray]:
    """Each seed's per-sentence BLEU statistics of `split`; a file whose sentence count is
    not `size` (that of the others) is refused."""
    stats = {}
    for seed, (path, entry) in runs.items():
        found = np.asarray(entry[split]["stats"], dtype=np.int64).reshape(-1, 10)
        if size is not None and len(found) != size:
            raise LedgerError(f"{path}: {split} has {len(found)} sentences, the others {size}")
        stats[seed] = found
    return stats


def compare_with(runs: dict[int, Found], baseline: dict[int, Found]) -> dict[str, Comparison]:
    """A variant against the baseline, dev and test."""
    comparisons = {}
    for split in SPLITS:
        size = len(next(iter(baseline.values()))[1][split]["stats"])
        comparisons[split] = paired_bootstrap(
            sentence_stats(runs, split, size), sentence_stats(baseline, split, size)
        )
    return comparisons


def seed_text(comparison: Comparison) -> str:
    seeds = " / ".join(f"{d:+.2f}" for d in comparison.seed_differences)
    error = comparison.standard_error
    return f"seeds {seeds}" + ("" if error is None else f", standard error {error:.2f}")


def verdict(
    variant: str, baseline: str, comparisons: dict[str, Comparison] | None, compared: int
) -> str:
    """One line: the variant's BLEU difference from the baseline on dev, which decides, and on
    test, which is reported."""
    if comparisons is None:
        return f"{variant} vs {baseline}: no verdict (no seed has runs of both)"
    dev, test = comparisons["dev"], comparisons["test"]
    threshold = f"0.05/{compared}" if compared > 1 else "0.05"
    decided = (
        f"significant at 5% after Bonferroni (p {dev.p_value:.4f} < {threshold})"
        if dev.p_value < ALPHA / compared
        else f"not significant (p {dev.p_value:.4f} >= {threshold})"
    )
    return (
        f"{variant} vs {baseline}: {dev.difference:+.2f} BLEU on dev ({seed_text(dev)}): "
        f"{decided}; test {test.difference:+.2f} ({seed_text(test)}, p {test.p_value:.4f})"
    )


def run_study(
    results: dict[str, dict[int, Found]], baseline: str
) -> tuple[dict[str, dict], list[str]]:
    """Every variant's summary with its comparison against the baseline, and the verdicts."""
    study = {
        variant: {**summarise(runs), "vs_baseline": None, "verdict": None}
        for variant, runs in results.items()
    }
    others = [variant for variant in results if variant != baseline]
    verdicts = []
    for variant in others:
        runs, base = results[variant], results.get(baseline, {})
        comparisons = compare_with(runs, base) if set(runs) & set(base) else None
        line = verdict(variant, baseline, comparisons, len(others))
        study[variant]["vs_baseline"] = (
            {split: dataclasses.asdict(c) for split, c in comparisons.items()}
            if comparisons
            else None
        )
        study[variant]["verdict"] = line
        verdicts.append(line)
    return study, verdicts


# --- reports --------------------------------------------------------------------------------


def difference_cell(entry: dict, split: str) -> str:
    """The BLEU difference from the baseline with its interval and p-value."""
    if entry["vs_baseline"] is None:
        return "-"
    c = entry["vs_baseline"][split]
    return f"{c['difference']:+.2f} ({c['low']:+.2f} to {c['high']:+.2f}), p {c['p_value']:.4f}"


def write_report(
    study: dict[str, dict], baseline: str, path: Path, notes: list[str], verdicts: list[str]
) -> None:
    """The table, the notes under it, and the verdicts last."""
    machines = sorted({m for entry in study.values() for m in entry["machines"]})
    letters = {m: chr(ord("A") + i) for i, m in enumerate(machines)}
    rows = [
        "| variant | seeds | dev BLEU | test BLEU | test chrF | dev BLEU vs baseline | "
        "test BLEU vs baseline | AER (95% interval) | attention entropy | train tokens/s | "
        "minutes per run | decode sent/s (beam 5) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in study.items():
        where = ", ".join(letters[m] for m in r["machines"])
        dev, test = (
            ("baseline", "baseline")
            if name == baseline
            else (difference_cell(r, "dev"), difference_cell(r, "test"))
        )
        rows.append(
            f"| {name} | {len(r['seeds'])} | {r['dev_bleu']:.2f} ± {r['dev_bleu_std']:.2f} | "
            f"{r['bleu']:.2f} ± {r['bleu_std']:.2f} | {r['chrf']:.2f} ± {r['chrf_std']:.2f} | "
            f"{dev} | {test} | "
            f"{r['aer']:.3f} ({r['aer_low']:.3f}-{r['aer_high']:.3f}) | {r['entropy']:.3f} | "
            f"{r['train_tokens_per_s']:,} | {r['minutes']:.1f} ({where}) | "
            f"{r['decode_sent_per_s']:.1f} |"
        )
    legend = "Trained on " + "; ".join(f"{letters[m]}: {m}" for m in machines) + "."
    header = (
        "Verdicts (dev decides, test reported; paired bootstrap over sentences and seeds, "
        "Bonferroni over the variants compared):"
    )
    text = [*rows, "", legend, *notes, "", header, *verdicts]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")


def study_notes(
    study: dict[str, dict], baseline: str, gold: GoldSet, command: str, left_out: list[str]
) -> list[str]:
    """What the table's columns mean, under it."""
    compared = max(len(study) - 1, 1)
    return [
        f"Precision {next(iter(study.values()))['precision']} (a table holds one: --precision). "
        "Means over seeds, ± the standard deviation; every run trained the same steps. "
        f"vs baseline: the BLEU difference from {baseline} (seed-averaged corpus BLEU), its 95% "
        f"interval and p-value by a paired bootstrap ({SAMPLES:,} samples) that draws the "
        "sentences and the seeds both have with replacement, the same draws for both "
        f"(attnmt/infer/significance.py). {compared} variant(s) compared with the baseline: a "
        f"difference is significant at 5% overall below p = 0.05/{compared} (Bonferroni).",
        f"AER: on the gold set {gold.name} ({len(gold.pairs)} pairs), the mean over seeds of "
        "each run's AER and of its bootstrap 95% interval.",
        "Attention entropy: the mean over target positions of -sum_i a_i log a_i (nats) in "
        "forced decoding of the test split; rows that do not sum to 1 (local_p) are normalised "
        "first. Minutes per run: the run's clock at its last validation (training and "
        "validations), on the machine the letter names.",
        *[f"Left out: {line}" for line in left_out],
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


def default_variants() -> list[str]:
    """The study's variants unless --variants: every attention option and guided alignment
    at two weights with the recipe's decoder, and additive with Bahdanau's decoder."""
    return [*option_names("attention"), "bahdanau+additive", "guided=0.5", "guided=1"]


def parse_args() -> tuple[argparse.ArgumentParser, argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--variants",
        nargs="+",
        type=variant_name,
        default=None,
        help="[DECODER+]SCORER or guided[=W] (see the module's docstring); default: "
        f"{' '.join(default_variants())}. Before any Hydra override",
    )
    parser.add_argument("--baseline", type=variant_name, default=BASELINE)
    parser.add_argument("--steps", type=int, help="the step budget of every run")
    parser.add_argument("--seeds", type=int, default=3, help="runs per variant: seeds 1..N")
    parser.add_argument(
        "--precision",
        choices=sorted(set(PRECISIONS.values())),
        help="the precision of the table's runs; default: what this machine trains in",
    )
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the ledger's folder")
    parser.add_argument("--gold", type=Path, default=Path("data/alignments"), help="gold set")
    parser.add_argument("--out", type=Path, default=Path("compare"))
    parser.add_argument("--skip-training", action="store_true", help="train nothing")
    parser.add_argument(
        "--train-seeds",
        type=int,
        nargs="+",
        help="train only these seeds (of 1..--seeds), the others from the ledger: a study "
        "shared out among machines",
    )
    # gone: the study counts steps, and a guided variant names its weight
    parser.add_argument("--minutes", help=argparse.SUPPRESS)
    parser.add_argument("--guided-weight", help=argparse.SUPPRESS)
    args, overrides = parser.parse_known_args()
    if args.minutes is not None:
        parser.error("--minutes: the study counts steps, not minutes: --steps N")
    if args.guided_weight is not None:
        parser.error("--guided-weight: name the weight in the variant, e.g. guided=0.5 guided=1")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps: at least 1")
    if args.seeds < 1:
        parser.error("--seeds: at least 1")
    if args.train_seeds and not set(args.train_seeds) <= set(range(1, args.seeds + 1)):
        parser.error(f"--train-seeds: seeds of 1..{args.seeds} (--seeds {args.seeds})")
    return parser, args, overrides


def command_line(args: argparse.Namespace, variants: list[str], overrides: list[str]) -> str:
    return " ".join(
        [
            "python scripts/compare.py",
            f"--variants {' '.join(variants)}",
            *([f"--baseline {args.baseline}"] if args.baseline != BASELINE else []),
            f"--steps {args.steps} --seeds {args.seeds}",
            *overrides,
        ]
    )


def study(args: argparse.Namespace, overrides: list[str]) -> None:
    ledger = Ledger.read(args.ledger)
    gold = GoldSet.read(args.gold)
    chosen = args.variants or default_variants()
    variants = [args.baseline, *dict.fromkeys(v for v in chosen if v != args.baseline)]
    args.steps = args.steps or recipe_steps(overrides)
    known: dict[str, Dataset] = {}
    runs = [
        plan_run(variant, seed, args.steps, overrides, args.out, known)
        for variant in variants
        for seed in range(1, args.seeds + 1)
    ]
    precision = args.precision or runs[0].key.precision
    train = set() if args.skip_training else set(args.train_seeds or range(1, args.seeds + 1))
    results, left_out = gather(runs, ledger, precision, gold, train)
    if not results:
        raise StudyError(
            f"no {precision} runs to report: none in the ledger {args.ledger}, none trained"
        )
    report, verdicts = run_study(results, args.baseline)
    command = command_line(args, variants, overrides)
    args.out.mkdir(parents=True, exist_ok=True)
    notes = study_notes(report, args.baseline, gold, command, left_out)
    write_report(report, args.baseline, args.out / "compare.md", notes, verdicts)
    plot_study(report, args.out / "compare.png")
    (args.out / "compare.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print((args.out / "compare.md").read_text(encoding="utf-8"), end="")


def main() -> None:
    parser, args, overrides = parse_args()
    try:
        study(args, overrides)
    except (StudyError, LedgerError, AttnmtError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")


if __name__ == "__main__":
    main()
