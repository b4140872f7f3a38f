"""The training loop, in minGPT's shape: `Trainer` is given a model, its loss, an optimizer
and schedule, the training data and a validation callback (`attnmt.train.build` wires them
from a config), and runs steps, validation, checkpoints, resume and the stop conditions.
It knows nothing of attention or translation.

Everything a run writes goes to its run directory: last.pt, best.pt (see
`attnmt.train.checkpoint`), and the records of `attnmt.train.records`."""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn
from tqdm import tqdm

from attnmt.data.dataset import Batch, ParallelData
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.infer.checkpoint import RunDir, save_checkpoint
from attnmt.runtime import amp_dtype
from attnmt.train import distributed
from attnmt.train.checkpoint import (
    KeptBest,
    TrainingCheckpoint,
    resume_conflicts,
    rng_state,
    set_rng_state,
    trainer_changes,
)
from attnmt.train.records import Records
from attnmt.train.schedule import Schedule
from attnmt.train.state import CUT, Progress, Summary, TrainerConfig, better

if TYPE_CHECKING:
    from attnmt.train.validate import Validation


class Validate(Protocol):
    """What the trainer is given to validate with: a call that scores the model, the name of
    the score that picks the best checkpoint, and which way is better."""

    metric: str  # e.g. "dev BLEU"
    higher_is_better: bool

    def __call__(self) -> Validation: ...


log = logging.getLogger(__name__)


class TrainingError(AttnmtError):
    """Training cannot go on (e.g. the loss stays NaN)."""


class Trainer:
    """Trains `model` by minimising `objective` (a module: batch -> its summed loss and the
    number of tokens it sums over), keeping the checkpoint that `validate` scores best."""

    def __init__(
        self,
        cfg: TrainerConfig,
        run_dir: Path,
        model: nn.Module,
        objective: nn.Module,
        optimizer: torch.optim.Optimizer,
        schedule: Schedule,
        train_data: ParallelData,
        validate: Validate,
        ranks: distributed.Ranks,
        device: torch.device,
        identity: dict[str, Any],
    ) -> None:
        """`identity`: what every checkpoint keeps beside the training state (the resolved
        config and the tokenizers), also what a resume must match."""
        self.cfg = cfg
        self.run_dir = run_dir
        self.files = RunDir(run_dir)
        self.model = model
        self.objective = objective
        self.optimizer = optimizer
        self.schedule = schedule
        self.train_data = train_data
        self.validate = validate
        self.ranks = ranks
        self.device = device
        self.identity = identity
        self.records = Records(run_dir, enabled=ranks.main)
        self.kept = KeptBest(
            run_dir, cfg.keep_best if ranks.main else 0, identity, validate.higher_is_better
        )
        self.autocast_dtype = amp_dtype(cfg.amp, device)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.autocast_dtype == torch.float16)
        self.progress = Progress()
        self.stop_signal: str | None = None
        self._resume()

    # ------------------------------------------------------------ setup

    def _resume(self) -> None:
        path = self.cfg.resume
        if path == "auto":
            path = self.files.last
            if not path.is_file():
                log.info("trainer.resume=auto: no %s yet, starting fresh", path)
                path = None
        if not path:
            self.records.start(resumed_at=None)
            return
        saved = TrainingCheckpoint.read(Path(path), self.device)
        conflicts = resume_conflicts(saved, self.identity["config"], self.identity["tokenizers"])
        if conflicts:
            raise CheckpointError(
                f"{path}: the model's architecture and data come from the checkpoint; "
                f"these conflict: {'; '.join(conflicts)}"
            )
        for change in trainer_changes(saved.config["trainer"], self.identity["config"]["trainer"]):
            log.info("resume: %s", change)
        self.model.load_state_dict(saved.model)
        self.optimizer.load_state_dict(saved.optimizer)
        self.schedule.load_state_dict(saved.schedule)
        self.scaler.load_state_dict(saved.scaler)
        p = self.progress = Progress.from_saved(saved.progress)
        set_rng_state(saved.rng)
        self.records.start(resumed_at=p.step)
        log.info("resumed from %s at step %d (epoch %d)", path, p.step, p.epoch)

    # ------------------------------------------------------------ steps

    def _train_step(self, batches: list[Batch], tokens: int) -> float:
        """One optimiser step over this rank's `batches` (gradient accumulation); `tokens` is
        the target tokens of the whole step over all ranks. Returns the loss per token."""
        self.optimizer.zero_grad(set_to_none=True)
        # DDP averages gradients over ranks: scaling by world / tokens makes the update the
        # gradient of the step's summed loss / tokens, whatever the number of ranks.
        scale, local = self.ranks.world / tokens, 0.0
        amp = self.autocast_dtype
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            no_sync = getattr(self.objective, "no_sync", contextlib.nullcontext)
            with (
                contextlib.nullcontext() if last else no_sync(),
                torch.autocast(self.device.type, dtype=amp, enabled=amp is not None),
            ):
                loss, _ = self.objective(batch.to(self.device))
            self.scaler.scale(loss * scale).backward()
            local += loss.item()
        total = distributed.total(local, self.device)
        if not math.isfinite(total):
            self.optimizer.zero_grad(set_to_none=True)
            self._count_bad_step(total)
            return total / tokens
        self.progress.bad_steps_in_a_row = 0
        if self.cfg.clip_grad_norm:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return total / tokens

    def _count_bad_step(self, loss: float) -> None:
        self.progress.skipped_steps += 1
        self.progress.bad_steps_in_a_row += 1
        log.warning("step %d: loss is %s; step skipped", self.progress.step + 1, loss)
        if self.progress.bad_steps_in_a_row >= self.cfg.max_bad_steps:
            raise TrainingError(
                f"the loss was NaN or infinite {self.progress.bad_steps_in_a_row} steps in a row "
                f"(trainer.max_bad_steps={self.cfg.max_bad_steps}); stopping. Try a lower "
                f"trainer.lr or trainer.clip_grad_norm"
            )

    # ------------------------------------------------------------ checkpoints, validation

    def _save(self, *paths: Path) -> None:
        if not self.ranks.main:
            return
        payload = TrainingCheckpoint(
            self.model.state_dict(),
            self.optimizer.state_dict(),
            self.schedule.state_dict(),
            self.scaler.state_dict(),
            asdict(self.progress),
            rng_state(),
            self.identity["config"],
            self.identity["tokenizers"],
        ).payload()
        for path in paths:
            save_checkpoint(payload, path)

    def _validate(self, closing: bool = False) -> None:
        """Rank 0 validates; every rank learns the score (for the schedule and stopping).
        A `closing` validation, the one that ends a stopped run off the validation schedule,
        keeps best.pt but leaves patience and the plateau schedule as they were, so that a
        resumed run goes on as an uninterrupted one would."""
        result = None
        if self.ranks.main:
            result = self.validate()
            self.model.train()
        score = distributed.from_main(result.score if result else 0.0, self.device)
        p = self.progress
        p.validated_step = p.step
        improved = better(score, p.best_score, self.validate.higher_is_better)
        if improved:
            p.best_score = score
            p.best_step = p.step
        if not closing:
            if improved:
                p.validations_without_improvement = 0
            else:
                p.validations_without_improvement += 1
            self.schedule.observe(improved)
        if result is not None:
            self._report(result, improved)

    def _report(self, result: Validation, improved: bool) -> None:
        """Rank 0's records of a validation: metrics, log, checkpoints, pictures."""
        p = self.progress
        self.records.validation(p.step, p.epoch, p.elapsed / 60, result, improved)
        self._save(*([self.files.last, self.files.best] if improved else [self.files.last]))
        self.kept.offer(p.step, result.score, result.record(), self.model.state_dict())
        self.records.draw(p.step, result)

    # ------------------------------------------------------------ the loop

    def _stop_reason(self, start: float) -> str | None:
        """Why to stop now, or None; when any rank stops, all do."""
        elapsed = self.progress.elapsed + time.monotonic() - start
        if self.cfg.max_time is not None and self.ranks.world > 1:
            elapsed = distributed.from_main(elapsed, self.device)  # one clock: one reason
        reason = self.stop_signal or self.cfg.stop_reason(
            self.progress, elapsed, self.validate.metric
        )
        if self.ranks.world > 1 and distributed.total(float(reason is not None), self.device):
            return reason or "another rank stopped"
        return reason

    def _set_lr(self, start: float) -> float:
        """The learning rate for the next step; a budget in minutes uses rank 0's clock."""
        elapsed = self.progress.elapsed + time.monotonic() - start
        if self.schedule.seconds and self.ranks.world > 1:
            elapsed = distributed.from_main(elapsed, self.device)
        return self.schedule.set_step(self.progress.step, elapsed)

    def _on_signal(self, number: int, _frame: Any) -> None:
        if self.stop_signal is not None:  # a second signal: stop now, without the validation
            raise KeyboardInterrupt(self.stop_signal)
        self.stop_signal = f"stopped by {signal.Signals(number).name}"

    def fit(self) -> Summary:
        """Train until a stop condition; returns the summary (also logged)."""
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            reason = self._loop()
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
            self.records.close()
        distributed.stop()
        summary = Summary.of(self.progress, reason, self.files, self.validate.metric)
        log.info("stopped: %s", summary.describe())
        return summary

    def _loop(self) -> str:
        start, p, c = time.monotonic(), self.progress, self.cfg
        self.model.train()

        bar = tqdm(
            total=self.schedule.total,  # max_steps or max_epochs' worth, if either is set
            initial=p.step,
            unit="step",
            mininterval=1.0,
            disable=not self.ranks.main,
        )
        window_tokens, window_seconds = 0, 0.0  # training time only, validation left out
        self._set_lr(start)
        reason = self._stop_reason(start)
        while reason is None:
            order = self.train_data.token_batches(c.batch_tokens, c.seed, p.epoch)
            per_step = c.accumulate * self.ranks.world
            if self.ranks.world > 1:  # every rank needs its share: drop an uneven tail
                order = order[: len(order) - len(order) % per_step]
            while p.batch_in_epoch < len(order) and reason is None:
                step_start = time.monotonic()
                group = order[p.batch_in_epoch : p.batch_in_epoch + per_step]
                mine = group[self.ranks.rank * c.accumulate : (self.ranks.rank + 1) * c.accumulate]
                batches = [self.train_data.batch(indices) for indices in mine]
                tokens = self.train_data.target_tokens(group)
                loss = self._train_step(batches, tokens)
                window_seconds += time.monotonic() - step_start
                p.step, p.batch_in_epoch = p.step + 1, p.batch_in_epoch + len(group)
                p.elapsed, start = p.elapsed + time.monotonic() - start, time.monotonic()
                lr = self._set_lr(start)
                window_tokens += tokens
                bar.update(1)
                if p.step % c.log_every == 0:
                    speed = window_tokens / max(window_seconds, 1e-9)
                    self._log_train(loss, lr, speed, batches)
                    bar.set_postfix(
                        loss=f"{loss:.3f}",
                        tok_s=f"{speed:,.0f}",
                        lr=f"{lr:.2e}",
                        **c.time_left(p.elapsed + time.monotonic() - start),
                    )
                    window_tokens, window_seconds = 0, 0.0
                if p.step % c.validate_every == 0:
                    self._validate()
                elif p.step % c.checkpoint_every == 0:
                    self._save(self.files.last)
                reason = self._stop_reason(start)
            if p.batch_in_epoch >= len(order):
                p.epoch, p.batch_in_epoch = p.epoch + 1, 0
                if p.step % c.validate_every:  # not validated at this very step already
                    self._validate()
                reason = self._stop_reason(start)
        bar.close()
        self._save(self.files.last)  # first: a signal may be followed by a kill
        if p.validated_step != p.step:  # whatever stopped the run, it ends validated
            log.info("%s: a last validation at step %d (a second signal skips it)", reason, p.step)
            self._validate(closing=True)
        cut = reason.startswith(CUT)
        self.records.write(
            {"kind": "stop", "step": p.step, "epoch": p.epoch, "reason": reason, "cut": cut}
        )
        return reason

    def _log_train(self, loss: float, lr: float, speed: float, batches: list[Batch]) -> None:
        """A metrics.jsonl line for the logging window that ends at this step."""
        p = self.progress
        record = {"kind": "train", "step": p.step, "epoch": p.epoch, "loss": loss, "lr": lr}
        padding = Batch.padding_share(batches)
        self.records.write({**record, "tokens_per_s": round(speed), "padding": padding})
