"""The first optimizer steps of the default model on a corpus: each step's loss and every
parameter's gradient sum, as one JSON line, for checking that two trees train alike.

    PYTHONPATH=TREE python scripts/training_steps.py [--bf16] [--steps 4] RUN_DIR [OVERRIDE ...]

Run it with each tree's code first on PYTHONPATH and compare the outputs byte for byte; a
change that alters what training computes shows in the first step's gradients.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from attnmt.train.build import build_trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (data.raw_path=...)")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (else fp32)")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    args.run_dir.mkdir(parents=True, exist_ok=True)
    with initialize_config_module("attnmt.configs", version_base="1.3"):
        fixed = [f"trainer.amp={str(args.bf16).lower()}", f"trainer.max_steps={args.steps}"]
        cfg = compose("train", [*fixed, *args.overrides])
    trainer = build_trainer(OmegaConf.to_container(cfg, resolve=True), args.run_dir)
    trainer.model.train()
    data, c = trainer.train_data, trainer.cfg
    order = data.token_batches(c.batch_tokens, c.seed, 0)
    steps = []
    for step in range(args.steps):
        group = order[step : step + 1]
        trainer.schedule.set_step(step)
        loss = trainer._train_step([data.batch(i) for i in group], data.target_tokens(group))
        grads = {
            name: float(p.grad.double().sum())
            for name, p in trainer.model.named_parameters()
            if p.grad is not None
        }
        steps.append({"loss": loss, "grads": grads})
    print(json.dumps(steps))


if __name__ == "__main__":
    main()
