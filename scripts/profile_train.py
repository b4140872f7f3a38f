"""Where a training step's time goes: forward and backward time per module, the model's matrix
FLOPs per target token, and the share of this CPU's measured fp32 GEMM peak that training reaches
(and of its bf16 peak, on a CPU that multiplies bf16 natively).

    python scripts/profile_train.py [--steps 40] [--kit-dir DIR] [--work DIR] [OVERRIDE ...]

Trains the benchmark's reference model (scripts/benchmark.py: `REFERENCE`, the kit's split when
it is there) with attnmt's own trainer builder, on 2 threads, in the trainer's precision. After
--warmup steps it times --steps steps of the first epoch's batches: each module's forward and
backward (hooks; a module called once per target step sums its calls; the output layer with
the loss as one part; what nothing covers, such as the element-wise glue, is "the rest"), and
the optimizer. Then it counts
the matrix FLOPs of those batches and puts them against this CPU's fp32 GEMM peak, as
scripts/benchmark.py does. Prints a table and one JSON line; `ATEN_CPU_CAPABILITY=avx2
MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2` hold it to AVX2 (README, Speed).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from benchmark import (
    REFERENCE,
    THREADS,
    cpu_description,
    data_overrides,
    first_batches,
    matrix_flops,
    peak_report,
)
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from attnmt.train import loss as loss_module
from attnmt.train.build import build_trainer

# The modules timed, none inside another. Backward hooks time only modules whose input carries a
# gradient and whose output is a tensor: the others' backward lands in "backward, the rest".
MODULES = [
    "encoder.embedding",
    "encoder.rnn",
    "key_projection",
    "decoder.bridge",
    "decoder.embedding",
    "decoder.attention",
    "decoder.rnn",
    "decoder.W_o",
]
# The output layer runs inside the loss (attnmt.train.blockwise.linear_cross_entropy, which
# forms its gradients in the forward pass): timed as one function, its backward is a scaling.
OUTPUT_AND_LOSS = "output layer + loss forward"
UNTIMED_BACKWARD = (
    "encoder.embedding",
    "encoder.rnn",  # its output is a PackedSequence: hooks see no tensor
    "decoder.embedding",
    "decoder.bridge",
)


class ModuleClock:
    """Seconds of forward and backward per module, summed over calls (hooks)."""

    def __init__(self, model: torch.nn.Module, names: list[str]) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.started: dict[str, list[float]] = defaultdict(list)
        modules = dict(model.named_modules())
        for name in (n for n in names if n in modules):
            module = modules[name]
            module.register_forward_pre_hook(self._begin(f"{name} forward"))
            module.register_forward_hook(self._end(f"{name} forward"))
            if name not in UNTIMED_BACKWARD:
                module.register_full_backward_pre_hook(self._begin(f"{name} backward"))
                module.register_full_backward_hook(self._end(f"{name} backward"))
        self.on = False

    def time_function(self, owner: object, name: str, key: str) -> None:
        """Time every call of `owner.name` (a module-level function) under `key`."""
        original, begin, end = getattr(owner, name), self._begin(key), self._end(key)

        def timed(*args, **kwargs):
            begin()
            try:
                return original(*args, **kwargs)
            finally:
                end()

        setattr(owner, name, timed)

    def _begin(self, key: str):
        def hook(*_):
            if self.on:
                self.started[key].append(time.perf_counter())

        return hook

    def _end(self, key: str):
        def hook(*_):
            if self.on and self.started[key]:
                self.seconds[key] += time.perf_counter() - self.started[key].pop()

        return hook


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit-dir", type=Path, default=Path("/tmp/attnmt-bench-joeynmt"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/attnmt-profile"))
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the train config")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    data, _, _ = data_overrides(args.kit_dir / "data", args.work)
    overrides = [*data, f"data.processed_dir={args.work / 'data'}", *REFERENCE, *args.overrides]
    overrides += [f"trainer.threads={THREADS}", "trainer.validate_every=1000000"]
    with initialize_config_module("attnmt.configs", version_base=None):
        config = OmegaConf.to_container(compose("train", overrides=overrides), resolve=True)
    trainer = build_trainer(config, Path(tempfile.mkdtemp(prefix="run-", dir=args.work)))
    model = trainer.model
    batches = first_batches(trainer, args.warmup + args.steps)
    clock = ModuleClock(model, MODULES)
    clock.time_function(loss_module, "linear_cross_entropy", OUTPUT_AND_LOSS)
    model.train()
    totals: dict[str, float] = defaultdict(float)
    amp = trainer.autocast_dtype
    for i, batch in enumerate(batches):
        clock.on = i >= args.warmup
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=amp, enabled=amp is not None):
            loss, _ = trainer.objective(batch)
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        if clock.on:
            totals["forward (all)"] += forward - start
            totals["backward (all)"] += backward - forward
            totals["optimizer"] += time.perf_counter() - backward
    timed, clock.on = batches[args.warmup :], False
    flops, tokens = matrix_flops(trainer, timed)
    step_seconds = sum(totals.values())
    achieved = flops / step_seconds / 1e9
    parts = dict(sorted(clock.seconds.items()))
    for phase in ("forward", "backward"):
        timed_parts = sum(v for k, v in parts.items() if k.split()[-1] == phase)
        parts[f"{phase}, the rest"] = totals[f"{phase} (all)"] - timed_parts
    rows = {**totals, **parts}
    print(f"{len(timed)} steps, {tokens:,} target tokens, {step_seconds:.2f} s")
    for key, seconds in rows.items():
        print(f"{key:32s} {1000 * seconds / len(timed):8.1f} ms/step {seconds / step_seconds:6.1%}")
    report = {
        **cpu_description(),
        "train_tgt_tokens_per_s": round(tokens / step_seconds),
        "mflop_per_tgt_token": round(flops / tokens / 1e6, 2),
        "achieved_gflop_s": round(achieved, 1),
        **peak_report(THREADS, achieved),
        "ms_per_step": {k: round(1000 * s / len(timed), 2) for k, s in rows.items()},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
