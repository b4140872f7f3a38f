"""How fast each variant of the scorer study trains, measured in one process: the same batches
stepped by every variant in turn, so that a machine whose speed drifts (a shared VM's does, by
10% and more between runs) weighs on every variant alike. The study's own runs train beside
other work, so their minutes say little; this is the quiet figure beside them.

    python scripts/variant_speed.py [--variants V ...] [--repeats 3] [--batches 20]
                                    [--threads 2] [OVERRIDE ...]

Builds the default recipe's trainer once per variant (`compare.py`'s variants and their
overrides; default: the study's), fp32 unless the overrides say otherwise, takes the first
--batches batches of each one's first epoch (the same sentences for every variant: the data and
seed are the same; guided variants' batches also carry their guides) and, after a warm-up step
of each variant on three of them, steps each batch (forward, backward, Adam) once per variant,
the variants in rotating order, --repeats times. Prints, per variant: milliseconds per step,
target tokens a second, the time over the baseline's (additive), and the minutes the recipe's
step budget takes at that rate (training steps only: validations come on top); the CPU with
them. Stop other work first: the figures are of the whole machine.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmark import SHARED_CORPUS, first_batches, machine_line, timed_step
from compare import BASELINE, default_variants, variant_name, variant_overrides
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from attnmt.train.build import build_trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", type=variant_name, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the train config")
    args = parser.parse_args()
    variants = list(dict.fromkeys([BASELINE, *(args.variants or default_variants())]))
    common = [f"data.raw_path={SHARED_CORPUS}", "trainer.amp=false"]
    common += [f"trainer.threads={args.threads}", "trainer.validate_every=1000000"]
    trainers = {}
    with initialize_config_module("attnmt.configs", version_base=None):
        for variant in variants:
            overrides = [*common, *variant_overrides(variant), *args.overrides]
            config = OmegaConf.to_container(compose("train", overrides=overrides), resolve=True)
            folder = Path(tempfile.mkdtemp(prefix="variant-speed-"))
            trainers[variant] = build_trainer(config, folder)
    budget = trainers[BASELINE].cfg.max_steps
    batches = {variant: first_batches(t, args.batches) for variant, t in trainers.items()}

    for variant, trainer in trainers.items():
        trainer.model.train()
        for batch in batches[variant][:3]:
            timed_step(trainer, batch)
    print(machine_line(args.threads) + f", {args.batches} batches")
    seconds = dict.fromkeys(variants, 0.0)
    for repeat in range(args.repeats):
        for i in range(args.batches):
            shift = (repeat * args.batches + i) % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                seconds[variant] += timed_step(trainers[variant], batches[variant][i])
    steps = args.batches * args.repeats
    print("| variant | ms a step | target tokens/s | time / additive | minutes for the budget |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for variant in variants:
        per_step = seconds[variant] / steps
        tokens = sum(batch.target_tokens for batch in batches[variant])
        rate = tokens * args.repeats / seconds[variant]
        ratio = seconds[variant] / seconds[BASELINE]
        minutes = per_step * budget / 60
        budget_time = f"{minutes:.1f} ({budget:,} steps)"
        print(f"| {variant} | {1000 * per_step:.1f} | {rate:,.0f} | {ratio:.3f} | {budget_time} |")


if __name__ == "__main__":
    main()
