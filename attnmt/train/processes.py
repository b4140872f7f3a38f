"""trainer.processes: train in one process or in several (torchrun, DistributedDataParallel).

On a CPU, N processes of cores/N threads each can beat one process of all cores (small ops
scale better across processes than across threads), or lose to it (each step all-reduces the
gradients): it depends on the CPU and the model. `trainer.processes=auto` measures both on
this machine, one short training run each (`PROBE_STEPS` steps of the run's own model and
batches), keeps two only where they are at least 5% faster (`MARGIN`), and remembers the
choice in `cache_path()` for the next run of the same kind (CPU, core count, torch, model and
batch keys). `make train` passes auto. Ranks share a step's tokens, so the recipe is the same.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from attnmt.config import override_key, to_dataclass
from attnmt.errors import ConfigError
from attnmt.files import replaced_whole
from attnmt.runtime import cpu_count, cpu_info, pick_device
from attnmt.train.state import TrainerConfig

log = logging.getLogger("attnmt")

PROBE_STEPS = 60
# Several processes are kept only when this much faster: two probes of one setting differ by
# up to ~10% on a shared machine, and each extra process holds its own copy of everything.
MARGIN = 1.05
# Overrides of each probe run: a fixed number of steps, no validation, nothing resumed.
PROBE_OVERRIDES = (
    f"trainer.max_steps={PROBE_STEPS}",
    "trainer.max_time=null",
    "trainer.max_epochs=null",
    "trainer.log_every=5",
    "trainer.validate_every=1000000",
    "trainer.checkpoint_every=1000000",
    "trainer.keep_best=0",
    "trainer.patience=null",
    "trainer.resume=null",
    # every run ends with a validation: the probe's decodes one piece a sentence
    "trainer.val_max_length_a=0",
    "trainer.val_max_length_b=1",
    "trainer.samples=0",
)
# What a measurement depends on, besides the machine (the rest of a config changes no speed).
SPEED_KEYS = ("model", "encoder", "decoder", "attention")
TRAINER_SPEED_KEYS = ("device", "threads", "amp", "compile", "batch_tokens", "accumulate")


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attnmt" / "processes.json"


def count(config: dict[str, Any], task_overrides: list[str]) -> int:
    """How many processes train this run: trainer.processes, with auto decided (and measured
    if need be) here. 1 inside a process torchrun started, and for CUDA (several GPUs: start
    torchrun yourself, README)."""
    cfg = to_dataclass(TrainerConfig, config["trainer"], "trainer")  # every key checked first
    wanted = cfg.process_count()
    if "WORLD_SIZE" in os.environ:
        return 1
    if wanted is not None:
        return wanted
    cores = cpu_count()
    if pick_device(cfg.device, "trainer.device").type == "cuda" or cores < 2:
        return 1
    key = _speed_key(config, cores)
    cache = _read_cache()
    if key not in cache:
        speeds = {n: _probe(n, task_overrides, cfg.batch_tokens) for n in (1, 2)}
        chosen = 2 if speeds[2] > MARGIN * speeds[1] else 1
        cache[key] = {"processes": chosen, "tokens_per_s": speeds}
        _write_cache(cache)
    chosen = cache[key]
    log.info(
        "trainer.processes=auto: %d (measured on this machine, target tokens/s by processes: "
        "%s; remembered in %s)",
        chosen["processes"],
        chosen["tokens_per_s"],
        cache_path(),
    )
    return int(chosen["processes"])


def shared_batches(processes: int, batch_tokens: int) -> list[str]:
    """The override that gives each of `processes` ranks its share of trainer.batch_tokens, so
    that a step takes as many tokens as one process would: the recipe is unchanged."""
    return [f"trainer.batch_tokens={max(1, batch_tokens // processes)}"] if processes > 1 else []


def run_ranks(processes: int, task_overrides: list[str], run_dir: Path, batch_tokens: int) -> int:
    """Train with `processes` ranks of torchrun into `run_dir`, each with its share of
    `batch_tokens`; their exit status. SIGINT and SIGTERM reach them through torchrun (each
    rank then stops as it would alone)."""
    shares = shared_batches(processes, batch_tokens)
    command = launcher(processes) + [*task_overrides, *shares, f"hydra.run.dir={run_dir}"]
    log.info("training on %d processes (torchrun), %s", processes, shares[0])
    ranks = subprocess.Popen(command)

    def forward(number: int, _frame: object) -> None:
        ranks.send_signal(number)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, forward)
    return ranks.wait()


def launcher(processes: int) -> list[str]:
    """The command that starts attnmt-train on `processes` ranks (torchrun for 2 or more)."""
    if processes == 1:
        return [sys.executable, "-m", "attnmt.cli.train"]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={processes}",
        "-m",
        "attnmt.cli.train",
    ]


def _probe(processes: int, task_overrides: list[str], batch_tokens: int) -> int:
    """Median target tokens/s of a PROBE_STEPS-step run on `processes` processes, each with its
    share of `batch_tokens`."""
    log.info("trainer.processes=auto: timing %d steps on %d process(es)", PROBE_STEPS, processes)
    shares = shared_batches(processes, batch_tokens)
    replaced = {override_key(o) for o in (*PROBE_OVERRIDES, *shares)} | {"trainer.processes"}
    kept = [
        o for o in task_overrides if not o.startswith("hydra.") and override_key(o) not in replaced
    ]
    with tempfile.TemporaryDirectory(prefix="attnmt-probe-") as folder:
        run_dir = Path(folder) / "run"
        command = launcher(processes) + [
            *kept,
            *PROBE_OVERRIDES,
            *shares,
            "trainer.processes=1",
            f"hydra.run.dir={run_dir}",
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise ConfigError(
                f"trainer.processes=auto: the {processes}-process trial run failed:\n"
                + result.stderr[-2000:]
            )
        lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    speeds = [r["tokens_per_s"] for r in map(json.loads, lines) if r["kind"] == "train"]
    return round(statistics.median(speeds[1:] or speeds))


def _speed_key(config: dict[str, Any], cores: int) -> str:
    described = {
        "cpu": cpu_info().get("model name", ""),
        "cores": cores,
        "torch": torch.__version__,
        "isa": torch.backends.cpu.get_cpu_capability(),
        **{k: config[k] for k in SPEED_KEYS},
        **{k: config["trainer"][k] for k in TRAINER_SPEED_KEYS},
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def _read_cache() -> dict[str, Any]:
    try:
        return json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: measure again


def _write_cache(cache: dict[str, Any]) -> None:
    path = cache_path()
    try:
        with replaced_whole(path) as out:
            out.write(json.dumps(cache, indent=1))
    except OSError as error:
        log.warning("could not remember the process count in %s: %s", path, error)
