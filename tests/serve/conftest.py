"""A running attnmt-serve over the tiny trained model, and a small HTTP client for it."""

from __future__ import annotations

import collections
import json
import os
import socket
import subprocess
import sysconfig
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SERVE = str(Path(sysconfig.get_path("scripts")) / "attnmt-serve")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(
    url: str,
    body: bytes | dict | None = None,
    content_type: str = "application/json",
    token: str | None = None,
):
    """(status, parsed JSON or text) of a GET, or of a POST when `body` is given."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    headers = {"Content-Type": content_type} if data is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    call = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(call, timeout=60) as response:
            status, payload, kind = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, payload, kind = error.code, error.read(), error.headers
    if kind.get_content_type() == "application/json":
        return status, json.loads(payload)
    return status, payload.decode()


class Service:
    """An attnmt-serve process on a free loopback port; `token` goes to it through the
    environment. Its log's last lines are kept in `log` (read as it comes, so a long run never
    fills the pipe)."""

    def __init__(self, checkpoint: Path | None, *overrides: str, token: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        served = [f"ckpt={checkpoint}"] if checkpoint is not None else []  # or models=...
        command = [SERVE, *served, f"port={self.port}", "device=cpu", *overrides]
        env = {k: v for k, v in os.environ.items() if k != "ATTNMT_SERVE_TOKEN"}
        if token is not None:
            env["ATTNMT_SERVE_TOKEN"] = token
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
        )
        self.log: collections.deque[str] = collections.deque(maxlen=200)
        threading.Thread(target=self.log.extend, args=(self.process.stdout,), daemon=True).start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                time.sleep(0.2)  # (the reader's last lines)
                raise RuntimeError("".join(self.log))
            try:
                if request(self.url + "/v1/health", token=token)[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("attnmt-serve did not answer within 60 s")

    def translate(self, body: dict | bytes, content_type: str = "application/json"):
        return request(self.url + "/v1/translate", body, content_type, self.token)

    def rss_mb(self, peak: bool = False) -> float:
        """The service's resident memory now (or its peak, VmHWM), in MB."""
        field = "VmHWM" if peak else "VmRSS"
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith(field))
        return int(kib) / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture(scope="session")
def service(trained_run):
    running = Service(trained_run / "best.pt", "threads=1")
    yield running
    running.stop()


def two_models(trained_run: Path) -> dict[str, Path]:
    """Two checkpoints of the tiny run with different weights, by the names `models=` gives
    them: its best, and the earliest checkpoint it kept whose weights are not the best's."""
    import torch

    from attnmt.infer.checkpoint import RunDir, load_checkpoint

    def weights(path: Path) -> dict[str, torch.Tensor]:
        return load_checkpoint(path, "cpu", mmap=True)["model"]

    best = trained_run / "best.pt"
    best_weights = weights(best)
    early = next(
        path
        for path in RunDir(trained_run).kept_files()
        if any(not torch.equal(t, best_weights[name]) for name, t in weights(path).items())
    )
    return {"best": best, "early": early}


@pytest.fixture(scope="session")
def models_service(trained_run):
    """A service of three models: the two of `two_models` and their ensemble, `both`."""
    best, early = two_models(trained_run).values()
    models = f"models={{best: {best}, early: {early}, both: [{best}, {early}]}}"
    running = Service(None, models, "threads=1")
    yield running
    running.stop()
