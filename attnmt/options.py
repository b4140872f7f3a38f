"""The swappable parts, as the config groups that ship in `attnmt.configs` describe them.

Each option of a group (e.g. `configs/attention/dot.yaml`) names its class with `_target_`;
this module is the one place that turns such a config into an object, so a new scorer is one
class and one yaml file, and there is no registry to keep in step.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
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


def target_class(target: str) -> type | None:
    """The class a `_target_` names ("module.Class"), or None where it names none."""
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ModuleNotFoundError, AttributeError, ValueError):
        return None


def own_inits(cls: type) -> list[Callable[..., None]]:
    """The `__init__`s of `cls` and of the attnmt bases its `**kwargs` reach, base first."""
    return [
        vars(klass)["__init__"]
        for klass in reversed(cls.__mro__)
        if "__init__" in vars(klass) and klass.__module__.startswith("attnmt.")
    ]


def constructor_hints(cls: type) -> dict[str, Any]:
    """The annotated keyword arguments of `cls` and of the bases its `**kwargs` reach."""
    hints: dict[str, Any] = {}
    for init in own_inits(cls):
        hints.update(typing.get_type_hints(init))
    hints.pop("return", None)
    return {k: v for k, v in hints.items() if v is not object}


def constructor_defaults(target: str | None) -> dict[str, Any]:
    """The keyword defaults of the class `target` names, over the bases its `**kwargs`
    reach; {} where it names none."""
    cls = target_class(target) if target else None
    defaults: dict[str, Any] = {}
    for init in own_inits(cls) if cls else []:
        parameters = inspect.signature(init).parameters.values()
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
    cls = target_class(target)
    if cls is None:
        raise ConfigError(f"{key}._target_={target!r}: no such class")
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
