"""What the fused C++ kernels (attnmt/model/native.py), the fused decoder loop and flushing
denormals save in fp32 training, measured in one process: the same batches stepped in each mode
in turn, so that a machine whose speed drifts between runs (a shared VM's does, by 10% and
more) weighs on every mode alike.

    python scripts/kernels_ab.py [--repeats 5] [--batches 30] [--threads 2] [OVERRIDE ...]

Modes, switched between steps:
  kept_denormals  all of it, but denormal floats kept on the main thread (training flushes
         them to zero, `attnmt.runtime.flush_denormals`; torch's other threads, started after
         the trainer was built, keep flushing): what flushing saves, on a model whose attention
         has gone hard (`trainer.init=` a trained dot model's checkpoint) above all;
  steps  the decoder's teacher forcing as its plain step loop under autograd (runs_fused off),
         all the kernels elsewhere: what the fused loop (`fused.bahdanau_gru_loop`) saves;
  torch  fp32's element-wise work as torch operations (what ATTNMT_NATIVE=0 runs);
  loops  the GRU gates and the additive scorer as the kernels, the loss in torch operations;
  all    the kernels everywhere, the loss's `softmax_xent` too (what training runs).

Builds the default recipe's trainer (with the overrides; `decoder=bahdanau` for the fused loop,
which is Bahdanau's decoder's, and the loop's kernels), takes its first epoch's first
--batches batches and, after a warm-up step of each mode on three of them, steps each batch
(forward, backward, Adam) once per mode, the modes in rotating order, --repeats times. Prints
milliseconds per step of each mode per repetition and in all, and each mode's time over all's
(the speedup of what training runs); the CPU (`lscpu`'s model name) with them. The model trains
as it is measured: the modes compute the same formulas, so every mode steps the same kind of
model.
"""

from __future__ import annotations

import argparse
import tempfile
import types
from pathlib import Path

import torch
from benchmark import SHARED_CORPUS, first_batches, machine_line, timed_step
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from attnmt.model import fast, native
from attnmt.train import blockwise
from attnmt.train.build import build_trainer

MODES = ("kept_denormals", "steps", "torch", "loops", "all")
RUNS_FUSED = fast.FastBahdanauDecoder.runs_fused


def switch(mode: str, library: types.ModuleType) -> None:
    """Run `mode`'s code from the next step on."""
    torch.set_flush_denormal(mode != "kept_denormals")
    plain_loop = mode == "steps"
    fast.FastBahdanauDecoder.runs_fused = (lambda *_: False) if plain_loop else RUNS_FUSED
    native.kernels = (lambda: None) if mode == "torch" else (lambda: library)
    if mode in ("torch", "loops"):  # the loss in torch operations
        blockwise.native = types.SimpleNamespace(kernels=lambda: None)
    else:
        blockwise.native = native


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the train config")
    args = parser.parse_args()
    library = native.kernels()
    if library is None:
        raise SystemExit("the fused C++ kernels do not load here (the log says why)")
    overrides = [f"data.raw_path={SHARED_CORPUS}", "trainer.amp=false"]
    overrides += [f"trainer.threads={args.threads}", "trainer.validate_every=1000000"]
    with initialize_config_module("attnmt.configs", version_base=None):
        config = compose("train", overrides=[*overrides, *args.overrides])
    config = OmegaConf.to_container(config, resolve=True)
    trainer = build_trainer(config, Path(tempfile.mkdtemp(prefix="kernels-ab-")))
    batches = first_batches(trainer, args.batches)
    trainer.model.train()

    for mode in MODES:
        switch(mode, library)
        for batch in batches[:3]:
            timed_step(trainer, batch)
    print(machine_line(args.threads) + ", fp32")
    totals = dict.fromkeys(MODES, 0.0)
    for repeat in range(args.repeats):
        seconds = dict.fromkeys(MODES, 0.0)
        for i, batch in enumerate(batches):
            for mode in MODES[i % len(MODES) :] + MODES[: i % len(MODES)]:
                switch(mode, library)
                seconds[mode] += timed_step(trainer, batch)
        for mode in MODES:
            totals[mode] += seconds[mode]
        report(f"repeat {repeat + 1}", seconds, len(batches))
    report("all", totals, len(batches) * args.repeats)


def report(label: str, seconds: dict[str, float], steps: int) -> None:
    """One line: ms per step of each mode, and each other mode's time over all's."""
    times = "  ".join(f"{mode} {1000 * seconds[mode] / steps:.1f} ms" for mode in MODES)
    gains = "  ".join(f"{m}/all {seconds[m] / seconds['all']:.3f}" for m in MODES[:-1])
    print(f"{label}: {times}  {gains}", flush=True)


if __name__ == "__main__":
    main()
