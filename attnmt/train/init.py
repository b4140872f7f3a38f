"""Starting a run from a trained model (`trainer.init=PATH`): fine-tuning.

A new run, with a fresh optimizer, schedule and progress, whose model starts from the weights
of a checkpoint (a run's last.pt or best.pt, a kept best.step{N}.pt, or an attnmt-export file).
What the weights mean comes with them, so the checkpoint fixes:

- the architecture: the `encoder`, `decoder` and `attention` groups are the checkpoint's;
- the vocabulary: the new data is tokenised with the checkpoint's own SentencePiece models
  (embedded in it), which the processed folder records (`prepare_dataset(given=...)`); the
  `data.vocab` group is the checkpoint's;
- the direction: `data.src_lang` and `data.tgt_lang` must be the checkpoint's.

A command-line override of any of those keys that disagrees with the checkpoint is an error
naming it. Everything else (the data, the trainer's settings) is this run's. Where the run
directory already has a last.pt and `trainer.resume=auto`, the run resumes from it instead:
init only starts runs.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.config import override_key
from attnmt.errors import CheckpointError, ConfigError
from attnmt.infer.checkpoint import (
    ARCHITECTURE_GROUPS,
    architecture_differences,
    load_checkpoint,
    tokenizer_bytes,
)

KEY = "trainer.init"
ADOPTED = (*ARCHITECTURE_GROUPS, "data.vocab")  # what the checkpoint's config fixes
DIRECTION = ("data.src_lang", "data.tgt_lang")


@dataclass
class Start:
    """What a run starts from: the checkpoint's path, config, weights and SentencePiece
    models (serialized, by language)."""

    path: Path
    config: dict[str, Any]
    weights: dict[str, Any]
    tokenizers: dict[str, bytes]


def read_start(path: str | Path) -> Start:
    """The checkpoint named by trainer.init; a missing file or one that is not an attnmt
    checkpoint with a model is refused, naming the key."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{KEY}={path}: a folder; name a checkpoint in it, e.g. {path}/best.pt")
    if not path.is_file():
        raise ConfigError(f"{KEY}={path}: no such file")
    try:
        saved = load_checkpoint(path, "cpu", mmap=True)  # the weights, not the optimizer
    except CheckpointError as error:
        raise ConfigError(f"{KEY}={path}: {error}") from None
    missing = [part for part in ("model", "config") if part not in saved]
    if missing:
        raise ConfigError(f"{KEY}={path}: a checkpoint without {' or '.join(missing)}")
    config = saved["config"]
    langs = [lookup(config, key) for key in DIRECTION]
    try:
        tokenizers = {lang: tokenizer_bytes(saved, lang, path) for lang in langs}
    except CheckpointError as error:
        raise ConfigError(f"{KEY}={path}: {error}") from None
    return Start(path, config, saved["model"], tokenizers)


def lookup(config: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted key of a nested config (None where a part is missing)."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def overridden_keys(overrides: Collection[str]) -> list[str]:
    """The dotted keys a list of Hydra overrides sets ('attention=dot' sets the group
    'attention'; '+k=v', '++k=v' and '~k' set k)."""
    keys = (override_key(override) for override in overrides)
    return [key for key in keys if key and not key.startswith("hydra")]


def override_conflict(key: str, config: Mapping[str, Any], start: Start) -> str | None:
    """How an override of `key` disagrees with the checkpoint, or None. Architecture keys are
    compared as `architecture_differences` does (a key a class gained later counts as its
    default); data.vocab keys as they are. An override of the whole data group (data=files)
    chooses the data, whose vocabulary the checkpoint then replaces: no conflict."""
    if key == "data" or not any(
        key == fixed or key.startswith(f"{fixed}.") or fixed.startswith(f"{key}.")
        for fixed in ADOPTED
    ):
        return None
    group = key.split(".")[0]
    if group in ARCHITECTURE_GROUPS:
        differences = architecture_differences(
            {group: start.config.get(group, {})}, {group: config.get(group, {})}
        )
        found = [d for d in differences if d.startswith((f"{key}:", f"{key}."))]
        return "; ".join(found) or None
    wanted, saved = lookup(config, key), lookup(start.config, key)
    return None if wanted == saved else f"{key}: {saved!r} in the checkpoint"


def adopt(config: Mapping[str, Any], start: Start, overrides: Collection[str] = ()) -> dict:
    """`config` with the checkpoint's architecture and vocabulary (see the module). An
    override (of `overrides`, the command line's) of those keys that differs from the
    checkpoint, or another direction, is refused naming the key."""
    for key in DIRECTION:
        if lookup(config, key) != lookup(start.config, key):
            raise ConfigError(
                f"{KEY}={start.path}: a {lookup(start.config, 'data.src_lang')}->"
                f"{lookup(start.config, 'data.tgt_lang')} model, but {key}="
                f"{lookup(config, key)} (data.src_lang and data.tgt_lang must be the checkpoint's)"
            )
    for key in overridden_keys(overrides):
        if conflict := override_conflict(key, config, start):
            raise ConfigError(
                f"{key}={lookup(config, key)}: {KEY}={start.path} fixes the architecture and "
                f"vocabulary ({conflict}); leave {key} out"
            )
    adopted = copy.deepcopy(dict(config))
    for group in ARCHITECTURE_GROUPS:
        adopted[group] = copy.deepcopy(start.config[group])
    adopted["data"] = {**adopted["data"], "vocab": copy.deepcopy(start.config["data"]["vocab"])}
    return adopted
