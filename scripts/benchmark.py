"""Speed and memory of attnmt on the reference setup of ../shared/bench, printed as one JSON line.

    python scripts/benchmark.py [--kit-dir /tmp/attnmt-bench-joeynmt] [--work /tmp/attnmt-bench]

The reference model (the kit's JoeyNMT model): embeddings 256, bidirectional GRU-256 encoder,
GRU-256 decoder with additive attention, dropout 0.3, label smoothing 0.1, Adam 1e-3, batches
of 4,096 tokens, zh->en, 2 CPU threads: attnmt's default config, trained for one epoch. When the
kit has run, its split (--kit-dir/data) is used as given (data=splits) and SentencePiece models
with the kit's settings (unigram 4k + 4k) are trained on its train split; else the shared corpus
is split by attnmt. Keys as in the kit's report: training speed is the median target tokens
(not padding) per second over the logging windows after the first two; decoding speed is whole
test-set sentences per second for `attnmt-translate` from start to end, model loading included,
with outputs capped at 80 pieces like the kit's. Peak RSS is the training process's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sacrebleu.metrics import BLEU

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"
THREADS = 2


def data_overrides(kit_data: Path, work: Path) -> tuple[list[str], Path, Path]:
    """Overrides that select the benchmark's data, the test source and its reference."""
    if (kit_data / "train.zh").is_file():
        overrides = ["data=splits", f"data.split_dir={kit_data}", "data.name=bench"]
        return overrides, kit_data / "test.zh", kit_data / "test.en"
    overrides = [f"data.raw_path={SHARED_CORPUS}", "data.name=bench-own"]
    folder = work / "data" / "bench-own.zh-en"
    return overrides, folder / "test.zh", folder / "test.en"


def run(command: list[str], log: Path) -> float:
    """Run `command` with the benchmark's threads; return its wall-clock seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS)}
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        subprocess.run(command, check=True, stdout=out, stderr=subprocess.STDOUT, env=env)
    return time.perf_counter() - start


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kit-dir", type=Path, default=Path("/tmp/attnmt-bench-joeynmt"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/attnmt-bench"))
    parser.add_argument("--extra", nargs="*", default=[], help="more Hydra overrides for training")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    overrides, test_source, test_reference = data_overrides(args.kit_dir / "data", args.work)
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
        "trainer.log_every=20",
        "trainer.validate_every=1000000",
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
        "train_tgt_tokens_per_s": tokens_per_s,
        "train_log_windows": windows,
    }
    test_count = len(test_source.read_text(encoding="utf-8").splitlines())
    for beam in (1, 5):
        hypotheses = args.work / f"hyp.beam{beam}"
        seconds = run(
            [
                sys.executable,
                "-m",
                "attnmt.cli.translate",
                f"ckpt={run_dir / 'best.pt'}",
                f"input={test_source}",
                f"output={hypotheses}",
                f"beam_size={beam}",
                f"threads={THREADS}",
                "device=cpu",
                "max_length_a=0",
                "max_length_b=80",
            ],
            args.work / f"decode{beam}.log",
        )
        name = "greedy" if beam == 1 else "beam5"
        result[f"{name}_sent_per_s"] = round(test_count / seconds, 1)
        result[f"{name}_mean_hyp_words"] = mean_words(hypotheses)
        result[f"{name}_test_bleu"] = bleu(hypotheses, test_reference)
    result.update(decode_includes_model_load=True, peak_rss_mb=peak_rss_mb, threads=THREADS)
    joey_beam5 = args.kit_dir / "hyp.beam5"
    if joey_beam5.is_file():  # the kit's own output, scored the same way, for comparison
        result["joeynmt_beam5_test_bleu"] = bleu(joey_beam5, test_reference)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
