"""Checkpoint averaging: the element-wise mean of several checkpoints' weights.

The checkpoints of one run near its end sit close together in weight space; their mean is
usually a better model than any of them (Vaswani et al. 2017 average the last checkpoints;
Popel and Bojar 2018 measure it). A run with `trainer.keep_best=K` keeps its K best
checkpoints by dev BLEU as `best.step{N}.pt` (`attnmt.infer.checkpoint.RunDir.kept_files`);
`attnmt-average` averages those, or any checkpoints of one model, into a new self-contained
file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnmt.errors import CheckpointError
from attnmt.infer.checkpoint import (
    architecture_differences,
    export_payload,
    load_checkpoint,
    save_checkpoint,
)


def same_model(
    first: Mapping[str, Any], other: Mapping[str, Any], names: tuple[Path, Path]
) -> None:
    """Refuse `other` unless it has `first`'s architecture and tokenizers."""
    differences = architecture_differences(first["config"], other["config"])
    for lang, entry in first["tokenizers"].items():
        if other["tokenizers"].get(lang, {}).get("sha256") != entry["sha256"]:
            differences.append(f"the {lang} SentencePiece model differs")
    if differences:
        raise CheckpointError(
            f"{names[1]} is not a checkpoint of {names[0]}'s model: {'; '.join(differences)}"
        )


def average_checkpoints(paths: Sequence[Path], output: Path) -> dict[str, Any]:
    """Write the mean of the checkpoints at `paths` (one model's) to `output`, inference-only,
    and return what was written. Means are taken in float32 whatever the files' dtype."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0], "cpu", mmap=True)
    total = {k: t.float().clone() for k, t in first["model"].items() if t.is_floating_point()}
    for path in paths[1:]:
        saved = load_checkpoint(path, "cpu", mmap=True)
        same_model(first, saved, (paths[0], path))
        for name, tensor in total.items():
            tensor.add_(saved["model"][name].float())
    for tensor in total.values():
        tensor.div_(len(paths))
    payload = export_payload({**first, "model": {**first["model"], **total}}, paths[0], "float32")
    payload["averaged_from"] = [str(p) for p in paths]
    save_checkpoint(payload, output)
    return payload
