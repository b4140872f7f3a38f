"""Load measure of attnmt-serve: one client at a time against 16 concurrent clients.

    python scripts/serve_bench.py --ckpt outputs/DATE/TIME/best.pt [--requests 400]

Starts `attnmt-serve` on a free loopback port, sends each client's requests (one sentence
each, beam 5, taken in turn from the test split of the checkpoint's data, or the shared
corpus) and prints one JSON line: sentences/s and p50/p95 latency for one client sending
requests one after another, then for `--clients` clients at once, and the ratio of the two
throughputs. The request count is bounded, so the run stops by itself.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.serve.conftest import Service  # noqa: E402

SHARED_CORPUS = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"


def cpu_model() -> str:
    """lscpu's model name and the widest vector ISA of this CPU (amx, avx512, avx2)."""
    listing = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next(
        (line.split(":", 1)[1].strip() for line in listing.splitlines() if "Model name" in line),
        platform.processor(),
    )
    flags = (
        set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
    )
    isa = next(
        (
            i
            for i, f in (("amx", "amx_tile"), ("avx512", "avx512f"), ("avx2", "avx2"))
            if f in flags
        ),
        "other",
    )
    return f"{name} ({isa})"


def sentences(count: int) -> list[str]:
    """`count` Chinese sentences from the end of the shared corpus."""
    lines = SHARED_CORPUS.read_text(encoding="utf-8").splitlines()[-count:]
    return [line.split("\t")[1] for line in lines]


def run_clients(service: Service, texts: list[str], clients: int, beam: int) -> dict:
    """Send one request per text from `clients` threads; throughput and latency."""

    def client(number: int) -> list[float]:
        latencies = []
        for text in texts[number::clients]:
            start = time.perf_counter()
            status, answer = service.translate({"text": [text], "beam_size": beam})
            latencies.append(time.perf_counter() - start)
            if status != 200:
                raise RuntimeError(f"{status}: {answer}")
        return latencies

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [t for per_client in pool.map(client, range(clients)) for t in per_client]
    seconds = time.perf_counter() - start
    latencies.sort()
    return {
        "clients": clients,
        "requests": len(texts),
        "seconds": round(seconds, 2),
        "sent_per_s": round(len(texts) / seconds, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=400, help="per measure")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-wait-ms", type=float, default=5)
    args = parser.parse_args()

    texts = sentences(args.requests)
    service = Service(args.ckpt, f"threads={args.threads}", f"max_wait_ms={args.max_wait_ms}")
    try:
        run_clients(service, texts[:20], 4, args.beam)  # warm-up
        one = run_clients(service, texts, 1, args.beam)
        many = run_clients(service, texts, args.clients, args.beam)
    finally:
        service.stop()
    report = {
        "cpu": cpu_model(),
        "threads": args.threads,
        "beam_size": args.beam,
        "max_wait_ms": args.max_wait_ms,
        "one_client": one,
        "concurrent": many,
        "speedup": round(many["sent_per_s"] / one["sent_per_s"], 2),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
