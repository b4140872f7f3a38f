"""What a training run is told (`TrainerConfig`) and where it stands (`Progress`, `Summary`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.config import bounded, check_ranges, in_range
from attnmt.errors import ConfigError
from attnmt.infer.checkpoint import RunDir
from attnmt.infer.translate import MAX_BEAM_SIZE, MAX_OUTPUT_LENGTH
from attnmt.runtime import pick_device
from attnmt.train.schedule import COSINE_NEEDS_BUDGET, OPTIMIZERS, SCHEDULES

MAX_PROCESSES = 1024
CUT = "cut by trainer.max_time"  # how a stop reason starts when the cap cut a step budget


@dataclass(frozen=True)
class TrainerConfig:
    """The `trainer` config group: configs/trainer/default.yaml holds every default and
    documents each key; this class is the schema, with each numeric key's range."""

    device: str
    threads: int | None = bounded(1, 1024)
    amp: bool
    compile: bool
    seed: int = bounded(0, 2**32 - 1)
    deterministic: bool
    batch_tokens: int = bounded(1, None)
    accumulate: int = bounded(1, 100_000)
    optimizer: str
    lr: float = bounded(1e-9, None)
    betas: tuple[float, float]
    weight_decay: float = bounded(0.0, None)
    schedule: str
    warmup_steps: int = bounded(0, None)
    min_lr: float = bounded(0.0, None)
    plateau_patience: int = bounded(0, None)
    plateau_factor: float = bounded(0.0, 1.0)
    clip_grad_norm: float | None = bounded(0.0, None)
    label_smoothing: float = bounded(0.0, 1.0)
    guided_alignment: float = bounded(0.0, 100.0)
    sampling_alpha: float | None = bounded(1e-6, 10.0)
    sampling_nbest_size: int = bounded(-1, 1000)
    max_steps: int | None = bounded(0, None)
    max_epochs: int | None = bounded(0, None)
    max_time: float | None = bounded(0.0, None)
    log_every: int = bounded(1, None)
    validate_every: int = bounded(1, None)
    checkpoint_every: int = bounded(1, None)
    val_beam_size: int = bounded(1, MAX_BEAM_SIZE)
    val_max_length_a: float = bounded(0.0, 100.0)
    val_max_length_b: int = bounded(1, MAX_OUTPUT_LENGTH)
    samples: int = bounded(0, None)
    patience: int | None = bounded(1, None)
    max_bad_steps: int = bounded(1, None)
    keep_best: int = bounded(0, 1000)
    resume: str | None
    init: str | None = None  # a checkpoint whose weights start a new run (attnmt.train.init)
    processes: str = "1"  # a number, or auto (attnmt.train.processes); a number arrives as text

    def __post_init__(self) -> None:
        self.process_count()  # refuses what is neither
        check_ranges(self, "trainer.")
        for beta in self.betas:
            in_range("trainer.betas", beta, 0.0, 0.999999)
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"trainer.optimizer={self.optimizer!r}: valid values are {', '.join(OPTIMIZERS)}"
            )
        if self.schedule not in SCHEDULES:
            raise ConfigError(
                f"trainer.schedule={self.schedule!r}: valid values are {', '.join(SCHEDULES)}"
            )
        if self.schedule == "cosine" and not (self.max_steps or self.max_epochs or self.max_time):
            raise ConfigError(COSINE_NEEDS_BUDGET)
        if self.sampling_nbest_size in (0, 1):
            raise ConfigError(
                f"trainer.sampling_nbest_size={self.sampling_nbest_size}: -1 samples among all "
                "segmentations, 2 or more among the best n (1 would not sample)"
            )
        pick_device(self.device, "trainer.device")

    def process_count(self) -> int | None:
        """trainer.processes as a number; None for auto."""
        if self.processes == "auto":
            return None
        if not self.processes.isdigit() or not 1 <= int(self.processes) <= MAX_PROCESSES:
            raise ConfigError(
                f"trainer.processes={self.processes!r}: use auto or a number from 1 to "
                f"{MAX_PROCESSES}"
            )
        return int(self.processes)

    def expected_steps(self, batches_per_epoch: Callable[[], int], world: int = 1) -> int | None:
        """The steps the run takes unless time or patience stops it first: max_steps, or
        max_epochs' worth (an epoch of `world` ranks drops its uneven tail), whichever is
        fewer; None without either."""
        steps = []
        if self.max_steps is not None:
            steps.append(self.max_steps)
        if self.max_epochs is not None:
            per_step = self.accumulate * world
            batches = batches_per_epoch()
            if world > 1:
                batches -= batches % per_step
            steps.append(self.max_epochs * math.ceil(batches / per_step))
        return min(steps, default=None)

    def time_left(self, elapsed: float) -> dict[str, str]:
        """The wall-clock budget left after `elapsed` seconds, for the bar, with max_time."""
        if self.max_time is None:
            return {}
        return {"time_left": f"{max(self.max_time * 60 - elapsed, 0) / 60:.1f}min"}

    def stop_reason(
        self, progress: Progress, elapsed: float, metric: str = "dev BLEU"
    ) -> str | None:
        """Why a run at `progress`, `elapsed` seconds into its training, stops now, or None;
        `metric` names the validation score that patience watches."""
        p = progress
        if self.max_steps is not None and p.step >= self.max_steps:
            return f"trainer.max_steps={self.max_steps} reached"
        if self.max_epochs is not None and p.epoch >= self.max_epochs:
            return f"trainer.max_epochs={self.max_epochs} reached"
        if self.max_time is not None and elapsed >= self.max_time * 60:
            if self.max_steps is None and self.max_epochs is None:
                return f"trainer.max_time={self.max_time} minutes reached"
            budget = (
                f"trainer.max_steps={self.max_steps}"
                if self.max_steps is not None
                else (f"trainer.max_epochs={self.max_epochs}")
            )
            return f"{CUT}={self.max_time} minutes at step {p.step}, before {budget}"
        if self.patience is not None and p.validations_without_improvement >= self.patience:
            return f"no better {metric} in {self.patience} validations (trainer.patience)"
        return None


# Trainer keys that change how a resumed run goes on but not what the model is.
RESUMABLE_CHANGES = (
    "keep_best",
    "max_steps",
    "max_epochs",
    "max_time",
    "lr",
    "schedule",
    "warmup_steps",
    "min_lr",
    "plateau_patience",
    "plateau_factor",
    "patience",
    "validate_every",
    "checkpoint_every",
    "log_every",
    "device",
    "threads",
    "processes",
    "resume",
    "init",
)


def better(score: float, than: float | None, higher_is_better: bool) -> bool:
    """Whether validation `score` beats `than` (None: no score yet, which any score beats).
    An equal score is not better: of equal scores the earlier stays best."""
    if than is None:
        return True
    return score > than if higher_is_better else score < than


@dataclass
class Progress:
    """Where a run stands; saved in every checkpoint so that resume continues exactly."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of the current epoch already used
    elapsed: float = 0.0  # seconds of training, over all runs
    best_score: float | None = None  # the validation score of best.pt; None before any
    best_step: int = 0
    validations_without_improvement: int = 0
    validated_step: int | None = None  # the step of the last validation; None before any
    bad_steps_in_a_row: int = 0
    skipped_steps: int = 0

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> Progress:
        """The progress a checkpoint saved; checkpoints before `best_score` saved `best_bleu`,
        -1 before any validation."""
        saved = dict(saved)
        if "validated_step" not in saved and saved.get("best_step") == saved.get("step"):
            saved["validated_step"] = saved["step"]  # saved before the field: its best.pt
        if "best_bleu" in saved:
            bleu = saved.pop("best_bleu")
            saved["best_score"] = bleu if bleu >= 0 else None
        return cls(**saved)


@dataclass
class Summary:
    """What a run ends with."""

    best_score: float | None
    best_checkpoint: Path | None
    steps: int
    epochs: int
    stopped_because: str
    last_checkpoint: Path | None = None
    metric: str = "dev BLEU"  # the name of best_score

    @classmethod
    def of(cls, progress: Progress, reason: str, files: RunDir, metric: str) -> Summary:
        """The summary of a run that stopped at `progress` for `reason`."""
        return cls(
            progress.best_score,
            files.best if files.best.is_file() and progress.best_score is not None else None,
            progress.step,
            progress.epoch,
            reason,
            files.last if files.last.is_file() else None,
            metric,
        )

    def describe(self) -> str:
        """One line for the end of a run: the best score and its checkpoint, or, when no
        validation ran, where the last checkpoint is."""
        if self.best_checkpoint is None:
            kept = (
                f"last checkpoint: {self.last_checkpoint}"
                if self.last_checkpoint
                else ("no checkpoint written")
            )
            return f"no validation ran ({self.stopped_because} at step {self.steps}); {kept}"
        return (
            f"best {self.metric} {self.best_score:.2f} ({self.stopped_because}); "
            f"best checkpoint: {self.best_checkpoint}"
        )
