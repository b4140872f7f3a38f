"""Speed and memory of attnmt on the reference setup of ../shared/bench, printed as one JSON line.

    python scripts/benchmark.py [--kit-dir /tmp/attnmt-bench-joeynmt] [--work /tmp/attnmt-bench]

The reference model (the kit's JoeyNMT model): embeddings 256, bidirectional GRU-256 encoder,
GRU-256 decoder with additive attention, dropout 0.3, label smoothing 0.1, Adam 1e-3, batches
of 4,096 tokens, zh->en, 2 CPU threads: attnmt's default model with Bahdanau's decoder (the
recipe's until 2026-12-07, which every published comparison measured) and the kit's dropout,
batch size and learning rate (`REFERENCE`), trained for one epoch, in attnmt's default precision
(bf16 autocast on CPUs with native bf16, fp32 elsewhere; reported as train_precision). When the
kit has run, its split (--kit-dir/data) is used as given (data=splits) and SentencePiece models
with the kit's settings (unigram 4k + 4k) are trained on its train split; else the shared corpus
is split by attnmt. Keys as in the kit's report: training speed is the median target tokens
(not padding) per second over the logging windows after the first two; decoding speed is whole
test-set sentences per second for `attnmt-translate` from start to end, model loading included,
with outputs capped at 80 pieces like the kit's; the large input (--large, default the first
10,000 sentences of the train split's source side) is decoded with beam 5 the same way. Peak
RSS is the training process's. The report names the CPU and its widest vector ISA, and puts
training against this CPU's measured fp32 GEMM peak (a 2048 x 2048 matmul on the same threads;
on a CPU with native bf16 its bf16 peak too, the same matmul in bf16):
the model's matrix FLOPs per target token (forward and backward, counted by
torch.utils.flop_counter on the first training batches) times its tokens/s.

Decoding is timed --rounds times (default 3) and the median reported; `--dtype bfloat16`
decodes with bf16 weights (attnmt-translate dtype=bfloat16) on a CPU with native bf16. When the
kit's JoeyNMT model and environment are there (after `../shared/bench/joeynmt/run.sh`), each
round also times the kit's own decoding command right after attnmt's (same input, same beam,
same threads), so both medians come from the same minutes: `joeynmt_{greedy,beam5}_sent_per_s`
and the ratios `{greedy,beam5}_speedup`. Whole-process times on these shared machines drift
by 10-20% within an hour; alternating the two tools keeps the ratio honest.

One-epoch models say little (JoeyNMT's often a word or two a sentence), which flatters whoever
stops sooner. `--trained CHECKPOINT --kit-model DIR` skips training and times the same decoding
for two trained models instead, attnmt's checkpoint against JoeyNMT's model folder (such as the
one `../shared/bench/joeynmt/quality.sh MINUTES` leaves in WORKDIR/quality-MINUTES/model, beside
attnmt trained on the kit's split for the same minutes), and reports both tools' test BLEU and
mean words a sentence for each beam.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from sacrebleu.metrics import BLEU

from attnmt.config import to_dataclass
from attnmt.data.config import DataConfig
from attnmt.vocab import PAD_ID

if TYPE_CHECKING:
    from attnmt.data.dataset import Batch
    from attnmt.train.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"
THREADS = 2
BEAMS = {1: "greedy", 5: "beam5"}  # beam size -> the name of its keys in the report
# The kit's reference model where attnmt's defaults differ from it.
REFERENCE = [
    "decoder=bahdanau",
    "encoder.dropout=0.3",
    "decoder.dropout=0.3",
    "trainer.batch_tokens=4096",
    "trainer.lr=0.001",
    "trainer.warmup_steps=0",
    "trainer.schedule=plateau",
]
ISA_FLAGS = (("amx", "amx_tile"), ("avx512", "avx512f"), ("avx2", "avx2"))  # widest first


def cpu_description() -> dict[str, str]:
    """The CPU's model name, its widest vector ISA (amx / avx512 / avx2 / other), what torch
    uses of it (ATEN_CPU_CAPABILITY can cap that) and the precision attnmt trains in."""
    import torch

    from attnmt.runtime import amp_dtype, cpu_info

    fields = cpu_info()
    flags = set(fields.get("flags", "").split())
    isa = next((name for name, flag in ISA_FLAGS if flag in flags), "other")
    precision = amp_dtype(True, torch.device("cpu"))
    return {
        "cpu": " ".join(fields.get("model name", "unknown").split()),
        "cpu_isa": isa,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "train_precision": "fp32" if precision is None else str(precision).split(".")[-1],
    }


def gemm_peak_gflops(
    threads: int, size: int = 2048, repeats: int = 10, dtype: str = "float32"
) -> float:
    """The best GFLOP/s of a size x size matmul in `dtype` (float32 or bfloat16) on `threads`
    threads."""
    import torch

    torch.set_num_threads(threads)
    kind = getattr(torch, dtype)
    a, b = torch.randn(size, size, dtype=kind), torch.randn(size, size, dtype=kind)
    best = float("inf")
    for _ in range(repeats + 2):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def peak_report(threads: int, achieved: float) -> dict:
    """The fp32 GEMM peak and the share of it `achieved` GFLOP/s is; on a CPU that multiplies
    bf16 natively (AVX-512 BF16 or AMX) the bf16 peak and its share too, since bf16 training
    runs its products there."""
    from attnmt.runtime import cpu_has_bf16

    peak = gemm_peak_gflops(threads)
    report = {
        "gemm_peak_fp32_gflop_s": round(peak, 1),
        "train_share_of_gemm_peak": round(achieved / peak, 3),
    }
    if cpu_has_bf16():
        bf16 = gemm_peak_gflops(threads, dtype="bfloat16")
        report.update(
            gemm_peak_bf16_gflop_s=round(bf16, 1),
            train_share_of_bf16_peak=round(achieved / bf16, 3),
        )
    return report


def matrix_flops(trainer: Trainer, batches: list) -> tuple[int, int]:
    """The matrix FLOPs of a forward and backward pass over `batches`, and their target tokens.
    Counted in fp32 whatever the trainer's precision: the model's own products, without the
    zero rows that bf16 products take on for their fixed shapes (attnmt.model.blocks)."""
    from torch.utils.flop_counter import FlopCounterMode

    tokens = 0
    with FlopCounterMode(display=False) as counter:
        for batch in batches:
            loss, _ = trainer.objective(batch)
            loss.backward()
            tokens += int((batch.target != PAD_ID).sum())
    trainer.model.zero_grad(set_to_none=True)
    return counter.get_total_flops(), tokens


def run_trainer(run_dir: Path) -> Trainer:
    """A trainer of the run's saved config, writing into a scratch folder."""
    from attnmt.train.build import build_trainer

    config = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    return build_trainer(config, Path(tempfile.mkdtemp(prefix="attnmt-flops-")))


def first_batches(trainer: Trainer, count: int) -> list:
    """The first `count` batches of the trainer's first epoch."""
    data, cfg = trainer.train_data, trainer.cfg
    order = data.token_batches(cfg.batch_tokens, cfg.seed, 0)
    return [data.batch(indices) for indices in order[:count]]


def machine_line(threads: int) -> str:
    """What a timing ran on, to print above it: the CPU, its ISA, what torch runs of it, the
    threads and torch's version."""
    import torch

    cpu = cpu_description()
    return (
        f"{cpu['cpu']} ({cpu['cpu_isa']}; torch runs {cpu['torch_cpu_capability']}), "
        f"{threads} threads, torch {torch.__version__}"
    )


def timed_step(trainer: Trainer, batch: Batch) -> float:
    """One optimizer step of `trainer` on `batch` (forward, backward, Adam): its seconds."""
    start = time.perf_counter()
    loss, _ = trainer.objective(batch)
    loss.backward()
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def data_overrides(kit_data: Path, work: Path) -> tuple[list[str], Path, Path]:
    """Overrides that select the benchmark's data, the test source and its reference."""
    if (kit_data / "train.zh").is_file():
        overrides = ["data=splits", f"data.split_dir={kit_data}", "data.name=bench"]
        return overrides, kit_data / "test.zh", kit_data / "test.en"
    overrides = [f"data.raw_path={SHARED_CORPUS}", "data.name=bench-own"]
    folder = data_folder([*overrides, f"data.processed_dir={work / 'data'}"])
    return overrides, folder / "test.zh", folder / "test.en"


def data_folder(overrides: list[str]) -> Path:
    """The processed folder that attnmt-prepare builds for these data overrides."""
    with initialize_config_module(config_module="attnmt.configs", version_base="1.3"):
        data = OmegaConf.to_container(compose("prepare", overrides).data, resolve=True)
    return to_dataclass(DataConfig, data, "data").folder


def run(command: list[str], log: Path, stdin: Path | None = None) -> float:
    """Run `command` with the benchmark's threads; return its wall-clock seconds.

    With `stdin`, the command reads that file and its stdout goes to `log` alone."""
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS)}
    with contextlib.ExitStack() as files:
        out = files.enter_context(open(log, "w", encoding="utf-8"))
        source = files.enter_context(open(stdin, "rb")) if stdin else subprocess.DEVNULL
        errors = subprocess.DEVNULL if stdin else subprocess.STDOUT
        start = time.perf_counter()
        subprocess.run(command, check=True, stdin=source, stdout=out, stderr=errors, env=env)
        return time.perf_counter() - start


def attnmt_decode(
    checkpoint: Path, source: Path, hypotheses: Path, beam: int, dtype: str = "float32"
) -> list[str]:
    """attnmt-translate on the test split with the kit's output cap, its weights in `dtype`."""
    return [
        str(Path(sysconfig.get_path("scripts")) / "attnmt-translate"),  # the script users run
        f"ckpt={checkpoint}",
        f"input={source}",
        f"output={hypotheses}",
        f"beam_size={beam}",
        f"threads={THREADS}",
        "device=cpu",
        "max_length_a=0",
        "max_length_b=80",
        f"dtype={dtype}",
    ]


def joeynmt_decode(kit: Path, work: Path, beam: int, model: Path | None = None) -> list[str] | None:
    """The kit's decoding command for `beam` (its config, beam size set as the kit sets it)
    with the model in folder `model` (default: the kit's one-epoch model), or None when the
    kit has not trained it."""
    python, config = kit / "venv" / "bin" / "python", kit / "reference.yaml"
    model = model or kit / "model"
    if not (python.is_file() and config.is_file() and (model / "best.ckpt").is_file()):
        return None
    text = re.sub(r"beam_size: .*", f"beam_size: {beam}", config.read_text(encoding="utf-8"))
    text = re.sub(r"model_dir: .*", lambda _: f'model_dir: "{model}"', text)
    copy = work / f"joeynmt.beam{beam}.yaml"
    copy.write_text(text, encoding="utf-8")
    return [str(python), "-m", "joeynmt", "translate", str(copy)]


def decode_speeds(
    checkpoint: Path,
    source: Path,
    kit: Path,
    work: Path,
    rounds: int,
    beams: dict[int, str] = BEAMS,
    suffix: str = "",
    dtype: str = "float32",
    kit_model: Path | None = None,
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Median sentences/s of attnmt (its weights in `dtype`; and of the kit's JoeyNMT, its model
    in `kit_model`, timed alternately) per beam, and every round's seconds; `suffix` ends the
    name of each beam's keys."""
    count = len(source.read_text(encoding="utf-8").splitlines())
    speeds: dict[str, float] = {}
    seconds: dict[str, list[float]] = {}
    for beam, beam_name in beams.items():
        name = beam_name + suffix
        attnmt = attnmt_decode(checkpoint, source, work / f"hyp.{name}", beam, dtype)
        joeynmt = joeynmt_decode(kit, work, beam, kit_model)
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(run(attnmt, work / f"decode.{name}.log"))
            if joeynmt:
                theirs.append(run(joeynmt, work / f"joeynmt.hyp.{name}", stdin=source))
        our_median = statistics.median(ours)
        speeds[f"{name}_sent_per_s"] = round(count / our_median, 1)
        seconds[f"{name}_seconds"] = [round(x, 2) for x in ours]
        if theirs:
            their_median = statistics.median(theirs)
            speeds[f"joeynmt_{name}_sent_per_s"] = round(count / their_median, 1)
            speeds[f"{name}_speedup"] = round(their_median / our_median, 2)
            seconds[f"joeynmt_{name}_seconds"] = [round(x, 2) for x in theirs]
    return speeds, seconds


def large_input(train_source: Path, work: Path, count: int) -> Path:
    """The first `count` sentences of the train split's source side: a large input, where the
    start-up weighs little."""
    with open(train_source, encoding="utf-8") as lines:
        head = [line for _, line in zip(range(count), lines, strict=False)]
    if len(head) < count:
        raise SystemExit(f"{train_source}: {len(head):,} lines, fewer than --large {count:,}")
    path = work / f"large{count}.zh"
    path.write_text("".join(head), encoding="utf-8")
    return path


def train_speed(metrics: Path) -> tuple[int, int]:
    """Median target tokens/s over the logging windows after the first two, and the count."""
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    speeds = [r["tokens_per_s"] for r in records if r["kind"] == "train"]
    return round(statistics.median(speeds[2:] or speeds)), len(speeds)


def mean_words(path: Path) -> float:
    lines = path.read_text(encoding="utf-8").splitlines()
    return round(sum(len(line.split()) for line in lines) / max(1, len(lines)), 2)


def bleu(hypotheses: Path, reference: Path) -> float:
    hyp = hypotheses.read_text(encoding="utf-8").splitlines()
    ref = reference.read_text(encoding="utf-8").splitlines()
    return round(BLEU().corpus_score(hyp, [ref]).score, 2)


def large_speeds(
    checkpoint: Path, test_source: Path, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """`decode_speeds` with beam 5 on the large input (--large sentences of the train split)."""
    large = large_input(test_source.parent / "train.zh", args.work, args.large)
    suffix = f"_{args.large // 1000}k" if args.large % 1000 == 0 else f"_{args.large}"
    return decode_speeds(
        checkpoint,
        large,
        args.kit_dir,
        args.work,
        args.large_rounds,
        {5: "beam5"},
        suffix,
        args.dtype,
        args.kit_model,
    )


def trained_report(
    args: argparse.Namespace, test_source: Path, test_reference: Path
) -> dict[str, object]:
    """--trained: both tools' decoding of their trained models, timed as `main` times the
    one-epoch ones, with each tool's test BLEU and words a sentence; no training."""
    if joeynmt_decode(args.kit_dir, args.work, 5, args.kit_model) is None:
        raise SystemExit(f"--kit-model {args.kit_model}: no best.ckpt (or no kit environment)")
    result: dict[str, object] = {
        "system": "attnmt-0.1.0",
        **cpu_description(),
        "attnmt_checkpoint": str(args.trained),
        "joeynmt_model": str(args.kit_model),
        "decode_dtype": args.dtype,
    }
    speeds, seconds = decode_speeds(
        args.trained,
        test_source,
        args.kit_dir,
        args.work,
        args.rounds,
        dtype=args.dtype,
        kit_model=args.kit_model,
    )
    result.update(speeds)
    if args.large:
        large, large_seconds = large_speeds(args.trained, test_source, args)
        result.update(large)
        seconds.update(large_seconds)
    for name in BEAMS.values():
        for prefix, outputs in (("", "hyp"), ("joeynmt_", "joeynmt.hyp")):
            hypotheses = args.work / f"{outputs}.{name}"
            result[f"{prefix}{name}_mean_hyp_words"] = mean_words(hypotheses)
            result[f"{prefix}{name}_test_bleu"] = bleu(hypotheses, test_reference)
    result.update(seconds, decode_rounds=args.rounds, large_rounds=args.large_rounds)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kit-dir", type=Path, default=Path("/tmp/attnmt-bench-joeynmt"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/attnmt-bench"))
    parser.add_argument("--extra", nargs="*", default=[], help="more Hydra overrides for training")
    parser.add_argument("--rounds", type=int, default=3, help="decoding runs per beam, median")
    parser.add_argument(
        "--large", type=int, default=10_000, help="sentences of the large beam-5 input (0: none)"
    )
    parser.add_argument("--large-rounds", type=int, default=1, help="its decoding runs, median")
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="attnmt's decoding weights (attnmt-translate dtype=); bfloat16 needs a CPU with "
        "native bf16",
    )
    parser.add_argument(
        "--trained",
        type=Path,
        help="decode only: this attnmt checkpoint against JoeyNMT's model in --kit-model",
    )
    parser.add_argument(
        "--kit-model",
        type=Path,
        help="with --trained: JoeyNMT's trained model folder (e.g. KIT_DIR/quality-20/model)",
    )
    args = parser.parse_args()
    if (args.trained is None) != (args.kit_model is None):
        parser.error("--trained and --kit-model go together: the two trained models")
    if args.trained and not args.trained.is_file():
        parser.error(f"--trained {args.trained}: no such checkpoint")
    args.work.mkdir(parents=True, exist_ok=True)
    overrides, test_source, test_reference = data_overrides(args.kit_dir / "data", args.work)
    if args.trained:
        print(json.dumps(trained_report(args, test_source, test_reference)))
        return
    run_dir = args.work / "run"
    train = [
        sys.executable,
        "-m",
        "attnmt.cli.train",
        *overrides,
        f"data.processed_dir={args.work / 'data'}",
        f"hydra.run.dir={run_dir}",
        "trainer.device=cpu",
        f"trainer.threads={THREADS}",
        "trainer.max_epochs=1",
        "trainer.log_every=5",  # an epoch of 4,096-token batches is ~70 steps
        "trainer.validate_every=1000000",
        *REFERENCE,
        *args.extra,
    ]
    if (run_dir / "last.pt").exists():
        for name in ("last.pt", "best.pt", "metrics.jsonl"):
            (run_dir / name).unlink(missing_ok=True)
    run(train, args.work / "train.log")
    peak_rss_mb = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    tokens_per_s, windows = train_speed(run_dir / "metrics.jsonl")
    result = {
        "system": "attnmt-0.1.0",
        **cpu_description(),
        "train_tgt_tokens_per_s": tokens_per_s,
        "train_log_windows": windows,
    }
    speeds, seconds = decode_speeds(
        run_dir / "best.pt", test_source, args.kit_dir, args.work, args.rounds, dtype=args.dtype
    )
    flops, tokens = matrix_flops(trainer := run_trainer(run_dir), first_batches(trainer, 10))
    achieved = tokens_per_s * flops / tokens / 1e9
    result.update(
        speeds,
        train_mflop_per_tgt_token=round(flops / tokens / 1e6, 2),
        train_gflop_s=round(achieved, 1),
        **peak_report(THREADS, achieved),
    )
    if args.large:
        speeds, large_seconds = large_speeds(run_dir / "best.pt", test_source, args)
        result.update(speeds)
        seconds.update(large_seconds)
    for name in BEAMS.values():
        hypotheses = args.work / f"hyp.{name}"
        result[f"{name}_mean_hyp_words"] = mean_words(hypotheses)
        result[f"{name}_test_bleu"] = bleu(hypotheses, test_reference)
    result.update(
        decode_includes_model_load=True,
        decode_dtype=args.dtype,
        peak_rss_mb=peak_rss_mb,
        threads=THREADS,
    )
    joey_beam5 = args.kit_dir / "hyp.beam5"
    if joey_beam5.is_file():  # the kit's own output, scored the same way, for comparison
        result["joeynmt_beam5_test_bleu"] = bleu(joey_beam5, test_reference)
    result.update(seconds, decode_rounds=args.rounds, large_rounds=args.large_rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
