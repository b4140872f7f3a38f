"""The optimiser and the learning-rate schedule: linear warmup, then constant, inverse square
root, cosine decay over the run's budget (steps, epochs or minutes), or a cut on a plateau of
dev BLEU."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from attnmt.errors import ConfigError

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
FUSED_DEVICES = ("cpu", "cuda")  # where torch has fused Adam and AdamW
SCHEDULES = ("constant", "inverse_sqrt", "cosine", "plateau")
COSINE_NEEDS_BUDGET = (
    "trainer.schedule=cosine needs trainer.max_steps, trainer.max_epochs or trainer.max_time "
    "to know its length"
)


def build_optimizer(
    params: Iterable[nn.Parameter],
    name: str,
    lr: float,
    betas: tuple[float, float],
    weight_decay: float,
) -> torch.optim.Optimizer:
    """Adam or AdamW; fused (one kernel steps all parameters, the same update) where torch has
    that for the parameters' device, else torch's per-parameter loop."""
    if name not in OPTIMIZERS:
        raise ConfigError(f"trainer.optimizer={name!r}: valid values are {', '.join(OPTIMIZERS)}")
    params = list(params)
    fused = all(p.device.type in FUSED_DEVICES for p in params) or None
    return OPTIMIZERS[name](
        params, lr=lr, betas=tuple(betas), weight_decay=weight_decay, fused=fused
    )


class Schedule:
    """The learning rate as a function of the step, and of dev BLEU for `plateau`.

    factor(step) = step / warmup during warmup; after it, 1 (constant and plateau),
    sqrt(warmup / step) (inverse_sqrt), or a cosine from 1 down to min_lr/lr at the end of the
    run's budget (cosine). The budget is `total_steps` steps (max_steps or max_epochs' worth),
    or, for a run with no step budget, `total_seconds` of training (its learning rate then
    depends on the machine's speed; given both, whichever ends first).
    plateau multiplies by `plateau_factor` after `plateau_patience` validations without a
    better dev BLEU, never below min_lr.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        kind: str,
        lr: float,
        warmup_steps: int,
        min_lr: float,
        total_steps: int | None,
        total_seconds: float | None,
        plateau_patience: int,
        plateau_factor: float,
    ) -> None:
        if kind not in SCHEDULES:
            raise ConfigError(f"trainer.schedule={kind!r}: valid values are {', '.join(SCHEDULES)}")
        if kind == "cosine" and not (total_steps or total_seconds):
            raise ConfigError(COSINE_NEEDS_BUDGET)
        self.optimizer, self.kind, self.lr = optimizer, kind, lr
        self.warmup, self.min_lr = warmup_steps, min_lr
        self.total, self.seconds = total_steps, total_seconds
        self.patience, self.factor = plateau_patience, plateau_factor
        self.plateau_scale, self.bad = 1.0, 0

    def progress(self, step: int, elapsed: float) -> float:
        """How far after warmup the run is through its budget, from 0 to 1."""
        done = 0.0
        if self.total:
            done = (step - self.warmup) / max(1, self.total - self.warmup)
        if self.seconds:
            done = max(done, elapsed / self.seconds)
        return min(1.0, max(0.0, done))

    def factor_at(self, step: int, elapsed: float = 0.0) -> float:
        if self.warmup and step < self.warmup:
            return (step + 1) / self.warmup
        if self.kind == "inverse_sqrt":
            return math.sqrt(max(self.warmup, 1) / max(step, 1))
        if self.kind == "cosine":
            progress = self.progress(step, elapsed)
            floor = self.min_lr / self.lr
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
        return self.plateau_scale

    def set_step(self, step: int, elapsed: float = 0.0) -> float:
        """Set the learning rate for optimiser step `step` (from 0), `elapsed` seconds into
        training; returns it."""
        lr = self.lr * self.factor_at(step, elapsed)
        if step >= self.warmup and self.kind != "constant":
            lr = max(lr, self.min_lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def observe(self, improved: bool) -> None:
        """Tell the plateau schedule whether a validation's score beat the best before it
        (`attnmt.train.state.better`, which knows which way is better)."""
        if improved:
            self.bad = 0
            return
        self.bad += 1
        if self.kind == "plateau" and self.bad >= self.patience:
            self.plateau_scale *= self.factor
            self.bad = 0

    def state_dict(self) -> dict[str, Any]:
        return {"plateau_scale": self.plateau_scale, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # (checkpoints before `observe` took `improved` also hold the best score: not needed)
        self.plateau_scale, self.bad = state["plateau_scale"], state["bad"]
