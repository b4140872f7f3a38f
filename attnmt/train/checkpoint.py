"""The layout of a training checkpoint (last.pt, best.pt) on top of the file format of
`attnmt.infer.checkpoint`, every RNG state as plain tensors and numbers, and the checks that decide
whether a checkpoint can continue a run: pure functions of the saved and current configs."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmt.errors import CheckpointError
from attnmt.infer.checkpoint import (
    FORMAT_VERSION,
    RunDir,
    architecture_differences,
    export_payload,
    load_checkpoint,
    save_checkpoint,
)
from attnmt.train.state import RESUMABLE_CHANGES, better


def rng_state() -> dict[str, Any]:
    """Every RNG state (python, numpy, torch, cuda) as tensors and numbers."""
    version, words, gauss = random.getstate()
    kind, keys, position, has_gauss, cached = np.random.get_state()
    return {
        "python": torch.tensor(words, dtype=torch.int64),
        "python_version": version,
        "python_gauss": gauss,
        "numpy": torch.from_numpy(keys.astype(np.int64)),
        "numpy_rest": [kind, int(position), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what `rng_state` saved."""
    words = tuple(int(x) for x in state["python"].tolist())
    random.setstate((state["python_version"], words, state["python_gauss"]))
    kind, position, has_gauss, cached = state["numpy_rest"]
    keys = state["numpy"].numpy().astype(np.uint32)
    np.random.set_state((kind, keys, position, has_gauss, cached))
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


@dataclass
class TrainingCheckpoint:
    """What a training run saves: enough to resume exactly (optimizer, schedule, scaler,
    progress, RNG) and to translate (config, model weights, tokenizers' bytes)."""

    model: dict[str, Any]
    optimizer: dict[str, Any]
    schedule: dict[str, Any]
    scaler: dict[str, Any]
    progress: dict[str, Any]
    rng: dict[str, Any]
    config: dict[str, Any]
    tokenizers: dict[str, Any]

    def payload(self) -> dict[str, Any]:
        """The plain dict written to disk."""
        return {
            "format_version": FORMAT_VERSION,
            **{f.name: getattr(self, f.name) for f in fields(self)},
        }

    @classmethod
    def read(cls, path: Path, device: str | torch.device = "cpu") -> TrainingCheckpoint:
        """A training checkpoint from `path`; an export or a file missing a part is refused."""
        saved = load_checkpoint(path, device)
        if saved.get("inference_only"):
            raise CheckpointError(
                f"{path}: an inference-only export (attnmt-export) has no optimizer or progress "
                "to resume from; resume from the run's last.pt"
            )
        missing = [f.name for f in fields(cls) if f.name not in saved]
        if missing:
            raise CheckpointError(f"{path}: not a training checkpoint (no {', '.join(missing)})")
        return cls(**{f.name: saved[f.name] for f in fields(cls)})


def resume_conflicts(
    saved: TrainingCheckpoint, config: Mapping[str, Any], tokenizers: Mapping[str, Any]
) -> list[str]:
    """Why `saved` cannot continue a run of `config` whose tokenizers are `tokenizers`: the
    architecture keys that differ, and each language whose SentencePiece model changed."""
    conflicts = architecture_differences(saved.config, config)
    for lang, entry in tokenizers.items():
        if saved.tokenizers.get(lang, {}).get("sha256") != entry["sha256"]:
            conflicts.append(
                f"the {lang} SentencePiece model differs from {entry['path']}; "
                "the data config changed (data.*)"
            )
    return conflicts


def trainer_changes(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The trainer keys a resume changes, as 'trainer.KEY OLD -> NEW', noting those that change
    how training goes on rather than only its budget or bookkeeping."""
    changes = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if old != new:
            note = "" if key in RESUMABLE_CHANGES else " (changes how training goes on)"
            changes.append(f"trainer.{key} {old!r} -> {new!r}{note}")
    return changes


class KeptBest:
    """Keeps a run's `count` best checkpoints by validation score as inference-only
    `best.step{N}.pt` files in `run_dir`, deleting the one that drops out of the top (of equal
    scores the earlier stays, as for best.pt). On resume it finds those already there."""

    def __init__(
        self,
        run_dir: Path,
        count: int,
        identity: Mapping[str, Any],
        higher_is_better: bool = True,
    ) -> None:
        self.files = RunDir(Path(run_dir))
        self.count = count
        self.identity = identity
        self.higher_is_better = higher_is_better
        self.kept: list[tuple[float, int, Path]] = []  # (score, step, file), best first
        if count:
            for path in self.files.kept_files():
                found = load_checkpoint(path, "cpu", mmap=True)["validation"]
                score = found.get("score", found.get("bleu"))  # files before "score": BLEU
                self.kept.insert(self._place(score, found["step"]), (score, found["step"], path))

    def _place(self, score: float, step: int) -> int:
        """Where the model at `step` with validation `score` goes in the best-first list:
        ahead of the first it beats, or of the first of an equal score from a later step."""
        for place, (kept_score, kept_step, _) in enumerate(self.kept):
            if better(score, kept_score, self.higher_is_better) or (
                score == kept_score and step < kept_step
            ):
                return place
        return len(self.kept)

    def offer(
        self,
        step: int,
        score: float,
        record: Mapping[str, float],
        weights: Mapping[str, torch.Tensor],
    ) -> None:
        """Keep the model at `step` (validation `score`; `record`: its figures, stored with
        it) if it is among the best `count`."""
        if not self.count or any(kept_step == step for _, kept_step, _ in self.kept):
            return  # nothing to keep, or this step is kept already (a resumed run's last)
        place = self._place(score, step)
        if place >= self.count:
            return
        path = self.files.kept(step)
        payload = export_payload({"model": dict(weights), **self.identity}, path, "float32")
        payload["validation"] = {"step": step, "score": score, **record}
        save_checkpoint(payload, path)
        self.kept.insert(place, (score, step, path))
        for _, _, dropped in self.kept[self.count :]:
            dropped.unlink(missing_ok=True)
        del self.kept[self.count :]
