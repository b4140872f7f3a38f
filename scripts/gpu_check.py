"""The CUDA path, checked on a GPU: a short training (AMP) and a beam-search decode, as JSON.

    python scripts/gpu_check.py [--minutes 2] [--work /tmp/attnmt-gpu] [HYDRA_OVERRIDE ...]

Meant for a lent GPU machine (one short run). It trains the default model on the shared corpus
with trainer.device=cuda and trainer.amp=true for `--minutes`, then again with
trainer.compile=true, then decodes the test split with beam 5 (the first model), and prints the
device, the AMP dtype, train target tokens/s without and with torch.compile, decode sentences/s
and the test BLEU. Without CUDA it says so and exits 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from attnmt.infer.evaluate import evaluate_sets, processed_sets
from attnmt.infer.translate import SearchConfig, Translator
from attnmt.plot import read_metrics

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/attnmt-gpu"))
    args, overrides = parser.parse_known_args()
    if not torch.cuda.is_available():
        print(json.dumps({"error": "CUDA is not available"}))
        sys.exit(1)

    def train(run_dir: Path, *extra: str) -> int:
        """Median train target tokens/s (windows after the first two) of a run."""
        command = [
            sys.executable,
            "-m",
            "attnmt.cli.train",
            f"data.raw_path={SHARED_CORPUS}",
            f"data.processed_dir={args.work / 'data'}",
            f"hydra.run.dir={run_dir}",
            "trainer.device=cuda",
            "trainer.amp=true",
            "trainer.max_steps=null",  # the minutes are the budget here, for both runs
            f"trainer.max_time={args.minutes}",
            "trainer.patience=null",
            *overrides,
            *extra,
        ]
        subprocess.run(command, check=True, cwd=REPO)
        metrics = read_metrics(run_dir / "metrics.jsonl")
        speeds = [r["tokens_per_s"] for r in metrics if r["kind"] == "train"]
        return round(statistics.median(speeds[2:] or speeds))

    run_dir = args.work / "run"
    eager = train(run_dir)
    compiled = train(args.work / "run-compiled", "trainer.compile=true")
    device = torch.device("cuda")
    loaded = Translator.load(run_dir / "best.pt", device)
    test = processed_sets(loaded, ["test"])
    lines = len(test[0].source.read_text(encoding="utf-8").splitlines())
    start = time.perf_counter()
    entry = evaluate_sets(loaded, test, SearchConfig(beam_size=5), args.work / "eval")[0]
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "amp_dtype": "bf16" if torch.cuda.is_bf16_supported() else "fp16",
                "train_tgt_tokens_per_s": eager,
                "train_tgt_tokens_per_s_compiled": compiled,
                "beam5_sent_per_s": round(lines / seconds, 1),
                "test_bleu": entry["bleu"],
                "minutes": args.minutes,
            }
        )
    )


if __name__ == "__main__":
    main()
