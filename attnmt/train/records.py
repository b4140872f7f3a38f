"""What a run leaves to read: metrics.jsonl, TensorBoard events, the learning curve and the
attention heatmaps of validation samples, all in the run directory (rank 0 writes them)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from attnmt.plot import attention_heatmap, learning_curve
from attnmt.train.validate import Validation

log = logging.getLogger(__name__)

# metrics.jsonl keys drawn in TensorBoard, by the kind of record.
SCALARS = {
    "train": ("loss", "lr", "tokens_per_s", "padding"),
    "validation": ("dev_loss", "dev_ppl", "bleu", "chrf"),
}


class Records:
    """Appends a run's records and redraws its pictures; `enabled=False` (ranks other than 0)
    writes nothing."""

    def __init__(self, run_dir: Path, enabled: bool = True) -> None:
        self.run_dir, self.enabled = run_dir, enabled
        self.metrics_path = run_dir / "metrics.jsonl"
        self._events: Any = None

    def start(self, resumed_at: int | None) -> None:
        """A fresh run starts a new metrics.jsonl; a resumed one drops what follows its step."""
        if not self.enabled:
            return
        if resumed_at is None:
            self.metrics_path.unlink(missing_ok=True)
        else:
            self._truncate(resumed_at)

    def write(self, record: dict[str, Any]) -> None:
        """One metrics.jsonl line, and its numbers as TensorBoard scalars."""
        if not self.enabled:
            return
        with open(self.metrics_path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        events = self._event_writer()
        for key in SCALARS.get(record["kind"], ()):
            if record.get(key) is not None:
                events.add_scalar(f"{record['kind']}/{key}", record[key], record["step"])
        events.flush()

    def validation(
        self, step: int, epoch: int, minutes: float, result: Validation, improved: bool
    ) -> None:
        """A validation's metrics line (`minutes`: of training before it, earlier validations
        included), and its scores and samples in the log."""
        record = {"kind": "validation", "step": step, "epoch": epoch, "minutes": round(minutes, 3)}
        self.write({**record, **result.record()})
        log.info(
            "step %d: dev loss %.3f ppl %.2f BLEU %.2f chrF %.2f%s",
            step,
            result.loss,
            result.perplexity,
            result.bleu,
            result.chrf,
            " (best)" if improved else "",
        )
        for source, hypothesis, reference in result.samples:
            log.info("  src: %s\n  hyp: %s\n  ref: %s", source, hypothesis, reference)

    def draw(self, step: int, result: Validation) -> None:
        """The learning curve, and one attention heatmap per validation sample:
        attention/step{N}_{i}.png."""
        if not self.enabled:
            return
        learning_curve(self.metrics_path, self.run_dir / "learning_curve.png")
        folder = self.run_dir / "attention"
        folder.mkdir(exist_ok=True)
        titles = [source for source, _, _ in result.samples]
        for i, (sample, title) in enumerate(zip(result.sample_translations, titles, strict=True)):
            best = sample.hypotheses[0]
            path = folder / f"step{step:06d}_{i}.png"
            attention_heatmap(best.attention, sample.source_pieces, best.target_pieces, path, title)

    def close(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    def _event_writer(self) -> Any:
        """TensorBoard's writer for this run (`tensorboard --logdir outputs` finds it)."""
        if self._events is None:
            from torch.utils.tensorboard import SummaryWriter  # loaded only by a writing rank

            self._events = SummaryWriter(log_dir=str(self.run_dir / "tensorboard"))
        return self._events

    def _truncate(self, step: int) -> None:
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
            if record["step"] <= step and record["kind"] != "stop":  # the run goes on
                kept.append(line)
        self.metrics_path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
