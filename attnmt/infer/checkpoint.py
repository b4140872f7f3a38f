"""Checkpoint files: written atomically, read with `torch.load(weights_only=True)` only.

A checkpoint is a dict of tensors, numbers, strings, bytes, lists and dicts, nothing else: the
config as plain dicts, every RNG state as tensors. So it loads without unpickling arbitrary
objects, and a file holding anything else is refused rather than run.

Every checkpoint carries what inference needs, so the file alone translates wherever it is
copied: the resolved config, the model's weights, and under "tokenizers" each language's
SentencePiece model as its serialized bytes ("model"), with its sha256 and the path it was
read from. Checkpoints written before the models were embedded name only the path and sha256;
they still load where those files are. A training checkpoint adds the optimizer, schedule,
progress and RNG states (see `attnmt.train`); an export (`export_payload`) leaves them out.
"""

from __future__ import annotations

import errno
import hashlib
import pickle
import re
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from sentencepiece import SentencePieceProcessor

from attnmt.data.tokenizer import check_special_ids
from attnmt.errors import CheckpointError
from attnmt.files import replaced_whole
from attnmt.options import constructor_defaults

FORMAT_VERSION = 1
EXPORT_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

KEPT_NAME = re.compile(r"^best\.step(\d+)\.pt$")


@dataclass(frozen=True)
class RunDir:
    """A training run's folder: the one place that names the checkpoint files it holds."""

    path: Path

    @property
    def last(self) -> Path:
        """The newest training checkpoint, what a resume continues from."""
        return self.path / "last.pt"

    @property
    def best(self) -> Path:
        """The training checkpoint of the best validation so far."""
        return self.path / "best.pt"

    def kept(self, step: int) -> Path:
        """The inference-only checkpoint of `step`, kept among the best (trainer.keep_best)."""
        return self.path / f"best.step{step}.pt"

    def kept_files(self) -> list[Path]:
        """The `best.step{N}.pt` files the run kept, by step."""
        kept = [p for p in Path(self.path).iterdir() if KEPT_NAME.match(p.name)]
        return sorted(kept, key=lambda p: int(KEPT_NAME.match(p.name)[1]))  # type: ignore[index]


# The config groups that define the model's architecture; they must match on resume.
ARCHITECTURE_GROUPS = ("encoder", "decoder", "attention")


def payload_bytes(payload: Any) -> int:
    """About how many bytes `payload` takes on disk: its tensors' and byte strings' sizes."""
    if isinstance(payload, torch.Tensor):
        return payload.numel() * payload.element_size()
    if isinstance(payload, bytes):
        return len(payload)
    if isinstance(payload, Mapping):
        return sum(payload_bytes(v) for v in payload.values())
    if isinstance(payload, list | tuple):
        return sum(payload_bytes(v) for v in payload)
    return 0


def save_checkpoint(payload: Mapping[str, Any], path: Path) -> None:
    """Write `payload` to `path` so that a crash at any moment leaves the old file intact
    (`replaced_whole`). A full disk is a `CheckpointError` naming the file and the space it
    needed."""
    try:
        with replaced_whole(path, "wb") as out:
            torch.save(dict(payload), out)
    except BaseException as error:
        if _out_of_space(error):
            needed = payload_bytes(payload) / 2**20
            free = shutil.disk_usage(path.parent).free / 2**20
            kept = f"the previous {path.name} is intact" if path.exists() else "nothing written"
            raise CheckpointError(
                f"{path}: no space left on the device: the checkpoint needs about "
                f"{needed:,.1f} MB, {free:,.1f} MB are free ({kept})"
            ) from None
        raise


def _out_of_space(error: BaseException) -> bool:
    """Whether `error` (or what caused it: torch.save wraps the OSError) is a full disk."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def load_checkpoint(
    path: Path, device: str | torch.device = "cpu", mmap: bool = False
) -> dict[str, Any]:
    """Read a checkpoint safely; anything but plain data, or a wrong format, is refused.

    `mmap`: map the file and read tensors only when used, for a caller that wants the model's
    weights and not the optimizer's state.
    """
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    if not zipfile.is_zipfile(path):  # what torch.save writes
        raise CheckpointError(f"{path}: not a checkpoint (torch.save writes a zip archive)")
    try:
        payload = torch.load(path, map_location=device, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"{path}: refused: it holds objects other than plain data ({error})"
        ) from None
    except (RuntimeError, EOFError, OSError) as error:
        raise CheckpointError(f"{path}: not a readable checkpoint ({error})") from None
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: not an attnmt checkpoint of format {FORMAT_VERSION}")
    return payload


def tokenizer_entry(model_file: Path) -> dict[str, Any]:
    """What a checkpoint keeps of one SentencePiece model: its bytes, sha256 and path."""
    data = Path(model_file).read_bytes()
    return {
        "model": data,
        "sha256": hashlib.sha256(data).hexdigest(),
        "path": str(Path(model_file).resolve()),
    }


def tokenizer_bytes(saved: Mapping[str, Any], lang: str, path: Path) -> bytes:
    """The serialized SentencePiece model of `lang` in checkpoint `saved` (read from `path`).

    Older checkpoints name the model's file instead: it is read from there, and refused when
    it is missing or no longer the file the model was trained with.
    """
    entry = saved.get("tokenizers", {}).get(lang)
    if entry is None:
        raise CheckpointError(f"{path}: no {lang} tokenizer in the checkpoint")
    if "model" in entry:
        return entry["model"]
    model_file = Path(entry["path"])
    data = model_file.read_bytes() if model_file.is_file() else None
    if data is None or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CheckpointError(
            f"{path}: its {lang} SentencePiece model {model_file} is missing or changed since "
            "training (this checkpoint predates self-contained files); rebuild the dataset "
            "with the training run's data config"
        )
    return data


def load_tokenizer(saved: Mapping[str, Any], lang: str, path: Path) -> SentencePieceProcessor:
    """The SentencePiece model of `lang` that checkpoint `saved` was trained with."""
    model = SentencePieceProcessor(model_proto=tokenizer_bytes(saved, lang, path))
    check_special_ids(model, f"{path} ({lang} tokenizer)")
    return model


def export_payload(saved: Mapping[str, Any], path: Path, dtype: str) -> dict[str, Any]:
    """The inference-only form of checkpoint `saved` (read from `path`): the config, the
    weights (floating-point ones cast to `dtype`) and the tokenizers' bytes; no optimizer,
    schedule, progress or RNG state."""
    if dtype not in EXPORT_DTYPES:
        raise CheckpointError(f"dtype={dtype!r}: must be one of {', '.join(EXPORT_DTYPES)}")
    cast = EXPORT_DTYPES[dtype]
    weights = {
        name: (t.to(cast) if t.is_floating_point() else t).clone()
        for name, t in saved["model"].items()
    }
    config = saved["config"]
    tokenizers = {}
    for lang in (config["data"]["src_lang"], config["data"]["tgt_lang"]):
        data = tokenizer_bytes(saved, lang, path)
        entry = saved["tokenizers"][lang]
        tokenizers[lang] = {"model": data, "sha256": entry["sha256"], "path": entry["path"]}
    return {
        "format_version": FORMAT_VERSION,
        "inference_only": True,
        "model": weights,
        "config": config,
        "tokenizers": tokenizers,
    }


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config -> {"decoder.hidden_size": 256, ...}."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def architecture_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The architecture keys whose values differ, as 'key: saved -> current'. A key that a
    class gained after the checkpoint was written counts as its default there (the model was
    built with it)."""
    groups = {}
    for group in ARCHITECTURE_GROUPS:
        config = dict(saved.get(group, {}))
        defaults = constructor_defaults(config.get("_target_"))
        for key in current.get(group, {}):
            if key not in config and key in defaults:
                config[key] = defaults[key]
        groups[group] = config
    old = flatten(groups)
    new = flatten({g: current.get(g, {}) for g in ARCHITECTURE_GROUPS})
    return [
        f"{key}: {old.get(key)!r} in the checkpoint, {new.get(key)!r} now"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
