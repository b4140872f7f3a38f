"""Plain config mappings into frozen dataclasses, so an unknown or missing key fails at once."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from attnmt.errors import ConfigError

T = TypeVar("T")


def to_dataclass(cls: type[T], values: Mapping[str, Any], prefix: str) -> T:
    """Build `cls` from `values`; nested dataclass fields are built from nested mappings.

    `prefix` is the config path of `values` (e.g. "data"), used to name keys in errors.
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix}: expected a mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        names = ", ".join(f"{prefix}.{key}" for key in unknown)
        raise ConfigError(f"unknown config key {names}; valid keys: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            value = to_dataclass(hint, value, f"{prefix}.{name}")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise ConfigError(f"{prefix}: {error}") from None


def to_dict(instance: Any) -> dict[str, Any]:
    """A dataclass as plain dicts and lists (what checkpoints and manifests store)."""
    return dataclasses.asdict(instance)
