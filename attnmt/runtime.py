"""Where computation runs: the device and the CPU thread count."""

from __future__ import annotations

import os

import torch

from attnmt.errors import ConfigError


def pick_device(name: str, key: str) -> torch.device:
    """auto takes CUDA when present; `key` is the config key that set `name`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{key}={name}: CUDA is not available on this machine")
    try:
        return torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{key}={name!r}: use auto, cpu, cuda or cuda:N") from None


def set_threads(threads: int | None) -> None:
    """Use `threads` CPU threads (None: all cores)."""
    torch.set_num_threads(threads or os.cpu_count() or 1)
