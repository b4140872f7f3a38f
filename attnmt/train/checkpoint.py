"""What a training checkpoint adds to the file format of `attnmt.checkpoint`: every RNG
state as plain tensors and numbers, and the resume checks on the architecture."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

# The config groups that define the model's architecture; they must match on resume.
ARCHITECTURE_GROUPS = ("encoder", "decoder", "attention")


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
    """The architecture keys whose values differ, as 'key: saved -> current'."""
    old = flatten({g: saved.get(g, {}) for g in ARCHITECTURE_GROUPS})
    new = flatten({g: current.get(g, {}) for g in ARCHITECTURE_GROUPS})
    return [
        f"{key}: {old.get(key)!r} in the checkpoint, {new.get(key)!r} now"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
