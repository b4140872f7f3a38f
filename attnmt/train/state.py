"""What a training run is told (`TrainerConfig`) and where it stands (`Progress`, `Summary`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TrainerConfig:
    """The `trainer` config group; configs/trainer/default.yaml documents each key."""

    device: str = "auto"
    threads: int | None = None
    amp: bool = True
    compile: bool = False
    seed: int = 1234
    deterministic: bool = False
    batch_tokens: int = 4096
    accumulate: int = 1
    optimizer: str = "adam"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    schedule: str = "plateau"
    warmup_steps: int = 0
    min_lr: float = 1e-5
    plateau_patience: int = 2
    plateau_factor: float = 0.5
    clip_grad_norm: float | None = 1.0
    label_smoothing: float = 0.1
    max_steps: int | None = None
    max_epochs: int | None = None
    max_time: float | None = None
    log_every: int = 20
    validate_every: int = 500
    checkpoint_every: int = 500
    val_beam_size: int = 1
    val_max_length_a: float = 1.5
    val_max_length_b: int = 10
    samples: int = 3
    patience: int | None = None
    max_bad_steps: int = 10
    resume: str | None = None


# Trainer keys that change how a resumed run goes on but not what the model is.
RESUMABLE_CHANGES = (
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
    "resume",
)


@dataclass
class Progress:
    """Where a run stands; saved in every checkpoint so that resume continues exactly."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of the current epoch already used
    elapsed: float = 0.0  # seconds of training, over all runs
    best_bleu: float = -1.0
    best_step: int = 0
    validations_without_improvement: int = 0
    bad_steps_in_a_row: int = 0
    skipped_steps: int = 0


@dataclass
class Summary:
    """What a run ends with."""

    best_bleu: float
    best_checkpoint: Path | None
    steps: int
    epochs: int
    stopped_because: str
    last_checkpoint: Path | None = None

    def describe(self) -> str:
        """One line for the end of a run: the best dev BLEU and its checkpoint, or, when no
        validation ran, where the last checkpoint is."""
        if self.best_checkpoint is None:
            kept = (
                f"last checkpoint: {self.last_checkpoint}"
                if self.last_checkpoint
                else ("no checkpoint written")
            )
            return f"no validation ran ({self.stopped_because} at step {self.steps}); {kept}"
        return (
            f"best dev BLEU {self.best_bleu:.2f} ({self.stopped_because}); "
            f"best checkpoint: {self.best_checkpoint}"
        )
