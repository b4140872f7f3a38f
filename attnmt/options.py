"""The swappable parts, as the config groups that ship in `attnmt.configs` describe them.

Each option of a group (e.g. `configs/attention/dot.yaml`) names its class with `_target_`;
this module is the one place that turns such a config into an object, so a new scorer is one
class and one yaml file, and there is no registry to keep in step.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Mapping
from importlib import resources
from typing import Any

from omegaconf import OmegaConf

from attnmt.config import checked
from attnmt.errors import ConfigError


def option_names(group: str) -> list[str]:
    """The options of a config group, e.g. option_names("attention") -> ["additive", ...]."""
    folder = resources.files("attnmt.configs") / group
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def option_config(group: str, name: str) -> dict[str, Any]:
    """The config of option `name` of `group`, as `group=name` on a command line would give."""
    names = option_names(group)
    if name not in names:
        raise ConfigError(f"{group}={name!r} is not an option; valid: {', '.join(names)}")
    text = (resources.files("attnmt.configs") / group / f"{name}.yaml").read_text("utf-8")
    return OmegaConf.to_container(OmegaConf.create(text), resolve=True)  # type: ignore[return-value]


def constructor_hints(cls: type) -> dict[str, Any]:
    """The annotated keyword arguments of `cls` and of the bases its `**kwargs` reach."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if "__init__" in vars(klass) and klass.__module__.startswith("attnmt."):
            hints.update(typing.get_type_hints(klass.__init__))
    hints.pop("return", None)
    return {k: v for k, v in hints.items() if v is not object}


def constructor_defaults(target: str | None) -> dict[str, Any]:
    """The keyword defaults of the class `target` names ("module.Class"), over the bases its
    `**kwargs` reach; {} where it names none that imports."""
    module, _, name = (target or "").rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ModuleNotFoundError, AttributeError, ValueError):
        return {}
    defaults: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if "__init__" in vars(klass) and klass.__module__.startswith("attnmt."):
            parameters = inspect.signature(klass.__init__).parameters.values()
            defaults.update({p.name: p.default for p in parameters if p.default is not p.empty})
    return defaults


def build(config: Mapping[str, Any], key: str, **runtime: Any) -> Any:
    """The object a `_target_` config names: its class called with the config's other keys
    and `runtime`, what is known only now (sizes, modules).

    `key` is the config path of `config` (e.g. "attention"), named when a value is refused.
    """
    target = config.get("_target_")
    if not isinstance(target, str):
        raise ConfigError(f"{key}: no _target_ naming the class to build")
    module, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ModuleNotFoundError, AttributeError, ValueError):
        raise ConfigError(f"{key}._target_={target!r}: no such class") from None
    hints = constructor_hints(cls)
    arguments = {
        k: checked(v, hints[k], f"{key}.{k}") if k in hints else v
        for k, v in config.items()
        if k != "_target_"
    }
    try:
        return cls(**arguments, **runtime)
    except (TypeError, ValueError) as error:  # an unknown key, or a value the class refuses
        raise ConfigError(f"{key} ({target}): {error}") from None
