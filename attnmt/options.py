"""The swappable parts, as the config groups that ship in `attnmt.configs` describe them.

Each option of a group (e.g. `configs/attention/dot.yaml`) names its class with `_target_`;
this module is the one place that turns such a config into an object, so a new scorer is one
class and one yaml file, and there is no registry to keep in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

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


def build(config: Mapping[str, Any], key: str, **runtime: Any) -> Any:
    """Instantiate a `_target_` config; `runtime` adds what is known only now (sizes, modules).

    `key` is the config path of `config` (e.g. "attention"), named when a value is refused.
    """
    if "_target_" not in config:
        raise ConfigError(f"{key}: no _target_ naming the class to build")
    try:
        return instantiate(dict(config), **runtime, _convert_="all")
    except ConfigError:
        raise
    except Exception as error:  # Hydra wraps the class's own TypeError/ValueError
        cause = error.__cause__ or error
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(f"{key} ({config['_target_']}): {cause}") from None
