"""The training loop: batches, steps, validation, checkpoints, resume, stop conditions.

Everything a run writes goes to its run directory: last.pt, best.pt, metrics.jsonl,
learning_curve.png (the CLI adds config.yaml and Hydra's own files).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from attnmt.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint, tokenizer_entry
from attnmt.config import to_dataclass
from attnmt.data.dataset import Batch, ParallelData
from attnmt.data.prepare import DataConfig, prepare_dataset, spm_model_name
from attnmt.data.tokenizer import PAD_ID, load_sentencepiece
from attnmt.errors import AttnmtError, CheckpointError, ConfigError
from attnmt.model.seq2seq import Seq2Seq, build_model, parameter_summary
from attnmt.plot import attention_heatmap, learning_curve
from attnmt.runtime import keep_freed_memory, set_threads
from attnmt.train import checkpoint as ckpt
from attnmt.train import distributed
from attnmt.train.schedule import Schedule, build_optimizer
from attnmt.train.state import RESUMABLE_CHANGES, Progress, Summary, TrainerConfig
from attnmt.train.validate import Validation, validate

log = logging.getLogger(__name__)


class TrainingError(AttnmtError):
    """Training cannot go on (e.g. the loss stays NaN)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class TokenLoss(nn.Module):
    """Summed cross-entropy over a batch's real target tokens (padding never scored).

    A module of its own so that DistributedDataParallel sees the whole computation.
    """

    def __init__(self, model: Seq2Seq, label_smoothing: float) -> None:
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing

    def forward(
        self, source: Tensor, source_lengths: Tensor, previous: Tensor, target: Tensor
    ) -> Tensor:
        features, _ = self.model(source, source_lengths, previous)
        real = target != PAD_ID
        logits = self.model.logits(features[real])  # (N, V): real positions only
        return F.cross_entropy(
            logits.float(), target[real], label_smoothing=self.label_smoothing, reduction="sum"
        )


class Trainer:
    """Trains the model of a resolved config, writing into `run_dir`."""

    def __init__(self, config: dict[str, Any], run_dir: Path) -> None:
        self.config, self.run_dir = config, run_dir
        self.cfg = to_dataclass(TrainerConfig, config["trainer"], "trainer")
        self.data_cfg = to_dataclass(DataConfig, config["data"], "data")
        self.ranks, self.device = distributed.start(self.cfg.device)
        set_threads(self.cfg.threads)
        keep_freed_memory()
        torch.use_deterministic_algorithms(self.cfg.deterministic)
        seed_everything(self.cfg.seed)
        vocab = self._open_data()
        src, tgt = self.data_cfg.src_lang, self.data_cfg.tgt_lang
        self.model: Seq2Seq = build_model(config, vocab[src]["size"], vocab[tgt]["size"]).to(
            self.device
        )
        log.info("model parameters:\n%s", parameter_summary(self.model))
        if self.cfg.compile:
            # The decoder's one-step function runs T times per batch: compiled once (any batch
            # size, dynamic=True), its many small element-wise ops become a few fused kernels.
            decoder = self.model.decoder
            decoder.features_step = torch.compile(decoder.features_step, dynamic=True)
        self.objective: nn.Module = TokenLoss(self.model, self.cfg.label_smoothing)
        if self.ranks.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.objective = DistributedDataParallel(self.objective, device_ids=ids)
        self.optimizer = build_optimizer(
            self.model.parameters(),
            self.cfg.optimizer,
            self.cfg.lr,
            self.cfg.betas,
            self.cfg.weight_decay,
        )
        self.schedule = Schedule(
            self.optimizer,
            self.cfg.schedule,
            self.cfg.lr,
            self.cfg.warmup_steps,
            self.cfg.min_lr,
            self.cfg.max_steps,
            self.cfg.plateau_patience,
            self.cfg.plateau_factor,
        )
        self.autocast_dtype = self._amp_dtype()
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.autocast_dtype == torch.float16)
        self.progress = Progress()
        self.stop_signal: str | None = None
        self.metrics_path = run_dir / "metrics.jsonl"
        self._resume()

    # ------------------------------------------------------------ setup

    def _open_data(self) -> dict[str, Any]:
        """Prepare the dataset (rank 0 builds it, the others wait and find it ready), open its
        train and dev splits and tokenizers; return the manifest's vocabulary sizes."""
        if not self.ranks.main:
            distributed.barrier()
        self.folder, manifest, _ = prepare_dataset(self.data_cfg)
        if self.ranks.main:
            distributed.barrier()
        src, tgt = self.data_cfg.src_lang, self.data_cfg.tgt_lang
        self.train_data = ParallelData(self.folder, "train", src, tgt)
        self.dev_data = ParallelData(self.folder, "dev", src, tgt)
        if not len(self.dev_data):
            raise ConfigError(
                f"data.dev_size={self.data_cfg.dev_size}: the dev split is empty, and training "
                "validates on it (dev BLEU picks best.pt); set data.dev_size to 1 or more"
            )
        self.tokenizers = {
            lang: self.folder / spm_model_name(self.data_cfg, lang) for lang in (src, tgt)
        }
        # The models never change during a run: read them once, into every checkpoint.
        self.tokenizer_entries = {lang: tokenizer_entry(p) for lang, p in self.tokenizers.items()}
        self.source_sp = load_sentencepiece(self.tokenizers[src])
        self.target_sp = load_sentencepiece(self.tokenizers[tgt])
        return manifest["vocab"]

    def _amp_dtype(self) -> torch.dtype | None:
        if not self.cfg.amp or self.device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def _resume(self) -> None:
        path = self.cfg.resume
        if path == "auto":
            path = self.run_dir / "last.pt"
            if not path.is_file():
                log.info("trainer.resume=auto: no %s yet, starting fresh", path)
                return
        if not path:
            self.metrics_path.unlink(missing_ok=True)
            return
        saved = load_checkpoint(Path(path), self.device)
        if saved.get("inference_only"):
            raise CheckpointError(
                f"trainer.resume={path}: an inference-only export (attnmt-export) has no "
                "optimizer or progress to resume from; resume from the run's last.pt"
            )
        differences = ckpt.architecture_differences(saved["config"], self.config)
        if differences:
            raise CheckpointError(
                f"{path}: the model's architecture comes from the checkpoint; "
                f"these keys conflict: {'; '.join(differences)}"
            )
        for lang, entry in self.tokenizer_entries.items():
            if saved["tokenizers"][lang]["sha256"] != entry["sha256"]:
                raise CheckpointError(
                    f"{path}: the {lang} SentencePiece model differs from "
                    f"{entry['path']}; the data config changed (data.*)"
                )
        old = saved["config"]["trainer"]
        for key in sorted(set(old) | set(self.config["trainer"])):
            if old.get(key) != self.config["trainer"].get(key):
                note = "" if key in RESUMABLE_CHANGES else " (changes how training goes on)"
                log.info(
                    "resume: trainer.%s %r -> %r%s",
                    key,
                    old.get(key),
                    self.config["trainer"].get(key),
                    note,
                )
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.schedule.load_state_dict(saved["schedule"])
        self.scaler.load_state_dict(saved["scaler"])
        self.progress = Progress(**saved["progress"])
        ckpt.set_rng_state(saved["rng"])
        if self.ranks.main:
            self._truncate_metrics(self.progress.step)
        log.info(
            "resumed from %s at step %d (epoch %d)", path, self.progress.step, self.progress.epoch
        )

    def _truncate_metrics(self, step: int) -> None:
        """Drop records written after the checkpoint, which the resumed run writes again."""
        if not self.metrics_path.is_file():
            return
        kept = []
        lines = self.metrics_path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # cut short by a kill mid-write: written again
                log.warning("%s:%d: an unfinished record, dropped", self.metrics_path, number)
                continue
            if record["step"] <= step:
                kept.append(line)
        self.metrics_path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")

    # ------------------------------------------------------------ steps

    def _train_step(self, batches: list[Batch], tokens: int) -> float:
        """One optimiser step over this rank's `batches` (gradient accumulation); `tokens` is
        the target tokens of the whole step over all ranks. Returns the loss per token."""
        self.optimizer.zero_grad(set_to_none=True)
        # DDP averages gradients over ranks: scaling by world / tokens makes the update the
        # gradient of the step's summed loss / tokens, whatever the number of ranks.
        scale, local = self.ranks.world / tokens, 0.0
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            no_sync = getattr(self.objective, "no_sync", contextlib.nullcontext)
            with (
                contextlib.nullcontext() if last else no_sync(),
                torch.autocast(
                    self.device.type,
                    dtype=self.autocast_dtype,
                    enabled=self.autocast_dtype is not None,
                ),
            ):
                batch = batch.to(self.device)
                loss = self.objective(
                    batch.source, batch.source_lengths, batch.previous, batch.target
                )
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

    # ------------------------------------------------------------ records

    def _record(self, record: dict[str, Any]) -> None:
        if not self.ranks.main:
            return
        with open(self.metrics_path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")

    def _payload(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(),
            "progress": asdict(self.progress),
            "rng": ckpt.rng_state(),
            "config": self.config,
            "tokenizers": self.tokenizer_entries,
        }

    def _save(self, *names: str) -> None:
        if not self.ranks.main:
            return
        payload = self._payload()
        for name in names:
            save_checkpoint(payload, self.run_dir / name)

    def _validate(self) -> None:
        """Rank 0 validates; every rank learns the dev BLEU (for the schedule and stopping)."""
        result = None
        if self.ranks.main:
            d = self.data_cfg
            result = validate(
                self.model,
                self.dev_data,
                self.folder,
                "dev",
                d.src_lang,
                d.tgt_lang,
                self.target_sp,
                self.cfg,
                self.device,
            )
            self.model.train()
        bleu = distributed.from_main(result.bleu if result else 0.0, self.device)
        p = self.progress
        improved = bleu > p.best_bleu
        if improved:
            p.best_bleu, p.best_step, p.validations_without_improvement = bleu, p.step, 0
        else:
            p.validations_without_improvement += 1
        self.schedule.observe(bleu)
        if result is not None:
            self._report(result, improved)

    def _report(self, result: Validation, improved: bool) -> None:
        """Rank 0's records of a validation: metrics, log, checkpoints, pictures."""
        p = self.progress
        self._record({"kind": "validation", "step": p.step, "epoch": p.epoch, **result.record()})
        log.info(
            "step %d: dev loss %.3f ppl %.2f BLEU %.2f chrF %.2f%s",
            p.step,
            result.loss,
            result.perplexity,
            result.bleu,
            result.chrf,
            " (best)" if improved else "",
        )
        for source, hypothesis, reference in result.samples:
            log.info("  src: %s\n  hyp: %s\n  ref: %s", source, hypothesis, reference)
        self._save(*(["last.pt", "best.pt"] if improved else ["last.pt"]))
        learning_curve(self.metrics_path, self.run_dir / "learning_curve.png")
        self._plot_attention(result)

    def _plot_attention(self, result: Validation) -> None:
        """Heatmaps of the sample dev sentences: attention/step{N}_{i}.png."""
        folder = self.run_dir / "attention"
        folder.mkdir(exist_ok=True)
        for i, (ids, hypothesis) in enumerate(
            zip(result.sample_sources, result.sample_hypotheses, strict=True)
        ):
            source = [self.source_sp.id_to_piece(int(t)) for t in ids] + ["</s>"]
            target = [self.target_sp.id_to_piece(t) for t in hypothesis.ids]
            target += ["</s>"] * (hypothesis.attention.shape[0] - len(target))
            path = folder / f"step{self.progress.step:06d}_{i}.png"
            attention_heatmap(
                hypothesis.attention.numpy(), source, target, path, result.samples[i][0]
            )

    # ------------------------------------------------------------ the loop

    def _stop_reason(self, start: float) -> str | None:
        """Why to stop now, or None; when any rank stops, all do."""
        reason = self._local_stop_reason(start)
        if self.ranks.world > 1 and distributed.total(float(reason is not None), self.device):
            return reason or "another rank stopped"
        return reason

    def _local_stop_reason(self, start: float) -> str | None:
        p, c = self.progress, self.cfg
        if self.stop_signal:
            return self.stop_signal
        if c.max_steps is not None and p.step >= c.max_steps:
            return f"trainer.max_steps={c.max_steps} reached"
        if c.max_epochs is not None and p.epoch >= c.max_epochs:
            return f"trainer.max_epochs={c.max_epochs} reached"
        if c.max_time is not None and p.elapsed + time.monotonic() - start >= c.max_time * 60:
            return f"trainer.max_time={c.max_time} minutes reached"
        if c.patience is not None and p.validations_without_improvement >= c.patience:
            return f"no better dev BLEU in {c.patience} validations (trainer.patience)"
        return None

    def _on_signal(self, number: int, _frame: Any) -> None:
        self.stop_signal = f"stopped by {signal.Signals(number).name}"

    def fit(self) -> Summary:
        """Train until a stop condition; returns the summary (also logged)."""
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            reason = self._loop()
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
        distributed.stop()
        best, last = self.run_dir / "best.pt", self.run_dir / "last.pt"
        summary = Summary(
            self.progress.best_bleu,
            best if best.is_file() and self.progress.best_step else None,
            self.progress.step,
            self.progress.epoch,
            reason,
            last if last.is_file() else None,
        )
        log.info("stopped: %s", summary.describe())
        return summary

    def _loop(self) -> str:
        start, p, c = time.monotonic(), self.progress, self.cfg
        self.model.train()
        bar = tqdm(
            total=self._expected_steps(),
            initial=p.step,
            unit="step",
            mininterval=1.0,
            disable=not self.ranks.main,
        )
        window_tokens, window_seconds = 0, 0.0  # training time only, validation left out
        self.schedule.set_step(p.step)
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
                p.step += 1
                p.batch_in_epoch += len(group)
                lr = self.schedule.set_step(p.step)
                window_tokens += tokens
                bar.update(1)
                if p.step % c.log_every == 0:
                    speed = window_tokens / max(window_seconds, 1e-9)
                    self._log_train(loss, lr, speed, batches)
                    bar.set_postfix(
                        loss=f"{loss:.3f}",
                        tok_s=f"{speed:,.0f}",
                        lr=f"{lr:.2e}",
                        **self._time_left(start),
                    )
                    window_tokens, window_seconds = 0, 0.0
                if p.step % c.validate_every == 0:
                    self._validate()
                elif p.step % c.checkpoint_every == 0:
                    self._save("last.pt")
                p.elapsed += time.monotonic() - start
                start = time.monotonic()
                reason = self._stop_reason(start)
            if p.batch_in_epoch >= len(order):
                p.epoch, p.batch_in_epoch = p.epoch + 1, 0
                if p.step % c.validate_every:  # not validated at this very step already
                    self._validate()
                reason = self._stop_reason(start)
        bar.close()
        self._save("last.pt")
        return reason

    def _log_train(self, loss: float, lr: float, speed: float, batches: list[Batch]) -> None:
        """A metrics.jsonl line for the logging window that ends at this step."""
        p = self.progress
        self._record(
            {
                "kind": "train",
                "step": p.step,
                "epoch": p.epoch,
                "loss": loss,
                "lr": lr,
                "tokens_per_s": round(speed),
                "padding": self._padding(batches),
            }
        )

    def _expected_steps(self) -> int | None:
        """The step count the bar counts to (for its ETA): max_steps, or max_epochs' worth."""
        c = self.cfg
        if c.max_steps is not None:
            return c.max_steps
        if c.max_epochs is not None:
            batches = len(self.train_data.token_batches(c.batch_tokens, c.seed, 0))
            return c.max_epochs * math.ceil(batches / c.accumulate)
        return None

    def _time_left(self, start: float) -> dict[str, str]:
        """The wall-clock budget left, for the bar, when trainer.max_time is set."""
        if self.cfg.max_time is None:
            return {}
        left = self.cfg.max_time * 60 - self.progress.elapsed - (time.monotonic() - start)
        return {"time_left": f"{max(left, 0) / 60:.1f}min"}

    @staticmethod
    def _padding(batches: list[Batch]) -> float:
        """The share of padding in the batches' source and target tensors."""
        cells = sum(b.source.numel() + b.target.numel() for b in batches)
        real = sum(int(b.source_lengths.sum()) + b.target_tokens for b in batches)
        return round(1 - real / cells, 4)
