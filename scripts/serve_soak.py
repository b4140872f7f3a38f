"""Soak test of attnmt-serve: good and abusive clients for N minutes, then a flood.

    python scripts/serve_soak.py --ckpt outputs/DATE/TIME/best.pt [--minutes 10]

Starts `attnmt-serve` (its default limits) on a free loopback port. For `--minutes` (at most
60), `--clients` threads send a mix: good requests (1 or 2 sentences, beam 5; all the clients
together stay below max_queue, so each should get 200) and bad ones: 200 MB bodies with and
without Content-Length, malformed JSON, wrong types, too many sentences, a sentence too long, a
connection that sends nothing. Then 200 MB bodies, eight at once with Content-Length and eight
chunked, while the peak RSS is watched. Then a flood phase sends full requests from 3x the
clients with no pause, past max_queue, and counts the 503s; then good requests again. Prints
one JSON line: counts by kind and status, p50/p95/p99 latency of the good requests, the burst's
statuses and peak RSS growth, the flood's counts and its slowest accepted request, and the
service's RSS after the warm-up, at its peak and at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.serve_bench import cpu_model  # noqa: E402
from tests.serve.conftest import Service  # noqa: E402

SHARED_CORPUS = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"
FIXTURE_CORPUS = REPO / "tests" / "fixtures" / "cmn-1200.txt"
HUGE = 200 * 1024 * 1024  # bytes a 200 MB body would send
PIECE = b"x" * 65_536
# kind: share of the steady phase's requests
MIX = {
    "good": 70,
    "oversized_length": 4,
    "oversized_chunked": 4,
    "malformed": 5,
    "wrong_types": 5,
    "too_many_sentences": 5,
    "too_long": 5,
    "silent": 2,
}


def sentences(side: int) -> list[str]:
    """One side (0 en, 1 zh) of the last 2,000 pairs of the shared corpus (or the fixture)."""
    corpus = SHARED_CORPUS if SHARED_CORPUS.is_file() else FIXTURE_CORPUS
    lines = corpus.read_text(encoding="utf-8").splitlines()[-2000:]
    return [line.split("\t")[side] for line in lines]


def post(port: int, body: bytes) -> tuple[str, float, dict]:
    """(status, seconds, JSON answer) of one POST /v1/translate."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", "/v1/translate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        status, payload = str(response.status), response.read()
        retry_after = response.getheader("Retry-After")
    except OSError:
        return "closed", time.perf_counter() - start, {}
    finally:
        connection.close()
    answer = json.loads(payload) if payload.startswith(b"{") else {}
    if retry_after is not None:
        answer["retry_after"] = retry_after
    return status, time.perf_counter() - start, answer


def huge_body(port: int, chunked: bool) -> str:
    """Send (up to) 200 MB; '413' if the service said so, 'closed' if it hung up first."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {HUGE}"
    head = f"POST /v1/translate HTTP/1.1\r\nHost: soak\r\n{framing}\r\n\r\n".encode()
    frame = b"%x\r\n%s\r\n" % (len(PIECE), PIECE) if chunked else PIECE
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        try:
            client.sendall(head)
            while sent < HUGE:
                client.sendall(frame)
                sent += len(PIECE)
        except OSError:
            pass
        try:
            answer = client.recv(64)
        except OSError:
            answer = b""
    if sent >= HUGE:
        return "read whole"  # a failure: the service took all 200 MB
    return answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/1.1 ") else "closed"


def silent(port: int) -> str:
    """Connect and send nothing: 'closed' when the service hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        try:
            return "closed" if client.recv(64) == b"" else "answered"
        except OSError:
            return "closed"


class Soak:
    """The clients of one run, and what they saw."""

    def __init__(self, service: Service, texts: list[str], seed: int) -> None:
        self.service, self.texts = service, texts
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.good_latencies: list[float] = []

    def one(self, kind: str, rng: random.Random) -> tuple[str, float]:
        port = self.service.port
        text = rng.choice(self.texts)
        if kind == "good":
            body = {"text": rng.sample(self.texts, rng.randint(1, 2)), "beam_size": 5}
            status, seconds, _ = post(port, json.dumps(body).encode())
            return status, seconds
        if kind in ("oversized_length", "oversized_chunked"):
            return huge_body(port, kind == "oversized_chunked"), 0.0
        if kind == "silent":
            return silent(port), 0.0
        body = {
            "malformed": b'{"text": ["' + text.encode() + b'"',
            "wrong_types": json.dumps({"text": text, "beam_size": "5"}).encode(),
            "too_many_sentences": json.dumps({"text": [text] * 33}).encode(),
            "too_long": json.dumps({"text": [text * (1 + 1000 // len(text))]}).encode(),
        }[kind]
        return post(port, body)[0], 0.0

    def steady(self, clients: int, seconds: float) -> None:
        """`clients` threads sending the MIX until `seconds` have passed."""
        deadline = time.monotonic() + seconds
        kinds, weights = list(MIX), list(MIX.values())

        def client(number: int) -> None:
            rng = random.Random(number + self.random.random())
            while time.monotonic() < deadline:
                kind = rng.choices(kinds, weights)[0]
                status, latency = self.one(kind, rng)
                with self.lock:
                    self.counts[kind, status] += 1
                    if kind == "good" and status == "200":
                        self.good_latencies.append(latency)

        run_threads(client, clients)

    def burst(self) -> dict:
        """Eight 200 MB bodies at once with Content-Length, then eight chunked: the statuses,
        and how far the service's peak RSS grew meanwhile."""
        peak_file = Path(f"/proc/{self.service.process.pid}/clear_refs")
        peak_file.write_text("5")  # the peak (VmHWM) starts again from the RSS now
        before = self.service.rss_mb(peak=True)
        statuses: Counter[str] = Counter()
        for chunked in (False, True):
            with ThreadPoolExecutor(8) as pool:
                statuses.update(
                    pool.map(lambda _, c=chunked: huge_body(self.service.port, c), range(8))
                )
        return {
            "statuses": dict(statuses),
            "peak_growth_mb": round(self.service.rss_mb(peak=True) - before, 1),
        }

    def flood(self, clients: int, seconds: float) -> dict:
        """`clients` threads sending full requests (max_sentences each) with no pause."""
        deadline = time.monotonic() + seconds
        statuses: Counter[str] = Counter()
        accepted: list[float] = []
        retry_after: set[str] = set()
        body = json.dumps({"text": self.texts[:32], "beam_size": 5}).encode()

        def client(_number: int) -> None:
            while time.monotonic() < deadline:
                status, seconds, answer = post(self.service.port, body)
                with self.lock:
                    statuses[status] += 1
                    if status == "200":
                        accepted.append(seconds)
                    if "retry_after" in answer:
                        retry_after.add(answer["retry_after"])

        run_threads(client, clients)
        return {
            "clients": clients,
            "seconds": seconds,
            "statuses": dict(statuses),
            "retry_after": sorted(retry_after),
            "accepted_p50_ms": ms(statistics.median(accepted)) if accepted else None,
            "accepted_max_ms": ms(max(accepted)) if accepted else None,
        }


def run_threads(target, count: int) -> None:
    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ms(ordered[round(share * (len(ordered) - 1))])


class RssSampler(threading.Thread):
    """The service's RSS twice a second, as (seconds since start, MB)."""

    def __init__(self, service: Service) -> None:
        super().__init__(daemon=True)
        self.service, self.samples, self.stopped = service, [], threading.Event()
        self.start_time = time.monotonic()

    def run(self) -> None:
        while not self.stopped.wait(0.5):
            self.samples.append((time.monotonic() - self.start_time, self.service.rss_mb()))

    def at(self, seconds: float) -> float:
        return next((mb for t, mb in self.samples if t >= seconds), self.samples[-1][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=10, help="steady phase, at most 60")
    parser.add_argument("--warmup", type=float, default=60, help="seconds before the first RSS")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--flood-seconds", type=float, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not 0 < args.minutes <= 60 or not 0 <= args.warmup < args.minutes * 60:
        parser.error("--minutes must be in (0, 60] and --warmup shorter than the run")

    service = Service(args.ckpt, f"threads={args.threads}")
    texts = sentences(1)  # the Chinese side: a zh -> en model
    soak, rss = Soak(service, texts, args.seed), RssSampler(service)
    rss.start()
    try:
        soak.steady(args.clients, args.minutes * 60)
        steady_end = time.monotonic() - rss.start_time
        burst = soak.burst()
        flood = soak.flood(3 * args.clients, args.flood_seconds)
        after = [post(service.port, json.dumps({"text": [t]}).encode()) for t in texts[:20]]
        time.sleep(1)
    finally:
        rss.stopped.set()
        rss.join()
        service.stop()
    good = soak.good_latencies
    by_kind: dict[str, dict[str, int]] = {}
    for (kind, status), count in sorted(soak.counts.items()):
        by_kind.setdefault(kind, {})[status] = count
    report = {
        "cpu": cpu_model(),
        "minutes": args.minutes,
        "clients": args.clients,
        "threads": args.threads,
        "steady": {
            "by_kind": by_kind,
            "good_200": len(good),
            "good_not_200": sum(
                n for (k, s), n in soak.counts.items() if k == "good" and s != "200"
            ),
            "good_p50_ms": percentile(good, 0.5),
            "good_p95_ms": percentile(good, 0.95),
            "good_p99_ms": percentile(good, 0.99),
        },
        "burst_200mb": burst,
        "flood": flood,
        "after_flood": {
            "statuses": dict(Counter(status for status, _, _ in after)),
            "p50_ms": ms(statistics.median(seconds for _, seconds, _ in after)),
        },
        "rss_mb": {
            "after_warmup": round(rss.at(args.warmup), 1),
            "peak": round(max(mb for _, mb in rss.samples), 1),
            "end_of_steady": round(rss.at(steady_end), 1),
            "end": round(rss.samples[-1][1], 1),
        },
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
