"""Plain config mappings into frozen dataclasses, so an unknown or missing key fails at once;
and the paths config keys name for writing, checked before any work."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from attnmt.errors import ConfigError

T = TypeVar("T")


def to_dataclass(cls: type[T], values: Mapping[str, Any], prefix: str) -> T:
    """Build `cls` from `values`; nested dataclass fields are built from nested mappings, and
    a value of the wrong type (trainer.max_steps=abc) is refused.

    `prefix` is the config path of `values` (e.g. "data"), used to name keys in errors.
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix}: expected a mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        names = ", ".join(f"{prefix}.{key}" for key in unknown)
        raise ConfigError(f"unknown config key {names}; valid keys: {', '.join(sorted(fields))}")
    required = [
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in values]
    if missing:
        names = ", ".join(f"{prefix}.{key}" if prefix else key for key in missing)
        raise ConfigError(f"missing config key {names}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in values.items():
        hint, key = hints[name], f"{prefix}.{name}" if prefix else name
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, hint):  # (one already built passes as it is)
                value = to_dataclass(hint, value, key)
        else:
            value = checked(value, hint, key)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise ConfigError(f"{prefix}: {error}") from None


def checked(value: Any, hint: Any, key: str) -> Any:
    """`value` if a field typed `hint` can take it (a number where a string is expected becomes
    the string: data.name=2024), else a ConfigError naming `key`."""
    options = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    if str in options and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if any(_fits(value, option) for option in options):
        return value
    expected = " or ".join(
        "null" if o is type(None) else getattr(o, "__name__", str(o)) for o in options
    )
    raise ConfigError(f"{key}={value!r}: expected {expected}")


def _fits(value: Any, hint: Any) -> bool:
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):  # an int is a fine float; a bool is neither
        allowed = int if hint is int else int | float
        return isinstance(value, allowed) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    origin = typing.get_origin(hint) or hint
    if origin in (list, tuple):
        return isinstance(value, list | tuple)
    if origin is dict:
        return isinstance(value, Mapping)
    return True  # other types (paths, objects) are the class's to check


def output_path(value: str | Path, key: str, folder: bool = False) -> Path:
    """Where `key` writes (a file, or a folder when `folder`), made ready before any work: its
    folder is created and must be writable, so a typo fails at once, not after translating.
    """
    path = Path(value)
    where = path if folder else path.parent
    if not folder and path.is_dir():
        raise ConfigError(f"{key}={value}: is a folder; give a file name")
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"{key}={value}: cannot create {where} ({error.strerror})") from None
    if not os.access(where, os.W_OK):
        raise ConfigError(f"{key}={value}: {where} is not writable")
    return path


def bounded(
    low: float | None = None,
    high: float | None = None,
    *,
    default: Any = dataclasses.MISSING,
    help: str = "",
) -> Any:
    """A dataclass field whose value must lie in [low, high] (None: open on that side), with
    its default (if any) and a line of help; `check_ranges` enforces the range and `--help`
    prints the help. So a key's default, range and meaning sit on its field, in one place."""
    return dataclasses.field(default=default, metadata={"range": (low, high), "help": help})


def check_ranges(instance: Any, prefix: str = "") -> None:
    """Refuse any field of dataclass `instance` outside the range its `bounded` declares,
    naming the key as `prefix + name`."""
    for f in dataclasses.fields(instance):
        if "range" in f.metadata:
            low, high = f.metadata["range"]
            in_range(f"{prefix}{f.name}", getattr(instance, f.name), low, high)


def to_dict(instance: Any) -> dict[str, Any]:
    """A dataclass as plain dicts and lists (what checkpoints and manifests store)."""
    return dataclasses.asdict(instance)


def in_range(
    key: str, value: float | None, low: float | None = None, high: float | None = None
) -> None:
    """Refuse `value` of config key `key` outside [low, high] with a ConfigError naming the key;
    None (an unset optional key) passes."""
    if value is None:
        return
    if (low is None or value >= low) and (high is None or value <= high):
        return
    if low is not None and high is not None:
        raise ConfigError(f"{key}={value}: must be {low} to {high}")
    bound = f"at least {low}" if low is not None else f"at most {high}"
    raise ConfigError(f"{key}={value}: must be {bound}")


def override_key(override: str) -> str:
    """The key a Hydra command-line override sets: 'attention=dot' -> 'attention' (a group),
    '+k=v', '++k=v' and '~k' -> 'k', 'group@package=option' -> 'group'."""
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0]
