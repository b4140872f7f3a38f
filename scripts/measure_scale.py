"""Time and peak memory of attnmt-prepare and of the training loader as the corpus grows.

    python scripts/measure_scale.py [--pairs 100000 500000 2000000] [--work /tmp/attnmt-scale]

For each size: a synthetic corpus (scripts/make_synthetic_corpus.py), then `attnmt-prepare` on
it (zh->en, default settings), then one epoch of training batches read from the prepared ids
(4,096-token batches, each padded into tensors as the trainer does). Each runs in its own
process; its peak RSS comes from the kernel (wait4). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measure(command: list[str]) -> tuple[float, float, str]:
    """Run `command`; return its wall-clock seconds, peak RSS in MB and standard output."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return seconds, usage.ru_maxrss / 1024, output


def read_one_epoch(folder: Path) -> None:
    """The loader's work for one epoch: every training batch, padded into tensors."""
    from attnmt.data.dataset import ParallelData

    data = ParallelData(folder, "train", "zh", "en")
    for indices in data.token_batches(4096, seed=1, epoch=0):
        data.batch(indices)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 500_000, 2_000_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/attnmt-scale"))
    parser.add_argument("--read-epoch", type=Path, help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args()
    if args.read_epoch:
        read_one_epoch(args.read_epoch)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    _, torch_mb, _ = measure([sys.executable, "-c", "import torch"])
    rows = []
    for pairs in args.pairs:
        corpus = args.work / f"synthetic-{pairs}.txt"
        if not corpus.is_file():
            script = REPO / "scripts" / "make_synthetic_corpus.py"
            subprocess.run([sys.executable, str(script), str(pairs), str(corpus)], check=True)
        name = f"synthetic{pairs}"
        prepare = [
            sys.executable,
            "-m",
            "attnmt.cli.prepare",
            f"data.raw_path={corpus}",
            "data.sha256=null",
            f"data.name={name}",
            f"data.processed_dir={args.work / 'data'}",
        ]
        for folder in (args.work / "data").glob(f"{name}.zh-en.*"):
            shutil.rmtree(folder, ignore_errors=True)  # else prepare finds it up to date
        prepare_s, prepare_mb, _ = measure(prepare)
        (folder,) = (args.work / "data").glob(f"{name}.zh-en.*")
        loader_s, loader_mb, _ = measure([sys.executable, __file__, "--read-epoch", str(folder)])
        corpus_mb = corpus.stat().st_size / 2**20
        ids_mb = sum(p.stat().st_size for p in folder.glob("train.*.npy")) / 2**20
        rows.append(
            f"| {pairs:,} | {corpus_mb:,.0f} MB | {prepare_s:,.0f} s | {prepare_mb:,.0f} MB "
            f"| {ids_mb:,.0f} MB | {loader_s:,.1f} s | {loader_mb:,.0f} MB |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    print(
        "| pairs | corpus | prepare: time | prepare: peak RSS | train ids (memory-mapped) "
        "| one epoch of batches | loader: peak RSS |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    print(f"\nPython with torch imported and nothing else: {torch_mb:,.0f} MB peak RSS. The")
    print("loader's RSS counts the pages of the memory-mapped ids it has read (page cache).")


if __name__ == "__main__":
    main()
