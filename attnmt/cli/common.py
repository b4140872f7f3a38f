"""What every entry point shares: where the configs live and how user errors are reported."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar, NoReturn, TypeVar

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

from attnmt.config import in_range, to_dataclass
from attnmt.errors import AttnmtError, ConfigError
from attnmt.infer.translate import SearchConfig, Translator
from attnmt.runtime import check_dtype, check_quantize, pick_device

# The configs ship inside the package (pyproject maps configs/ to attnmt.configs), so the
# console scripts find them from any working directory.
CONFIG_PATH = "pkg://attnmt.configs"
# translate and evaluate: one flat file each, no config groups (see tool_config).
TOOLS_CONFIG_PACKAGE = "attnmt.configs.tools"

Argument = TypeVar("Argument")
Options = TypeVar("Options")

log = logging.getLogger("attnmt")


def _required(key: str) -> NoReturn:
    """`${required:KEY}`: the value of a key that a recipe cannot run without (`???` cannot
    say so in an overlay: merged over a default, it leaves the default). Resolved only where
    the command line did not give the key."""
    raise ConfigError(f"no value for {key}: give {key}=...")


OmegaConf.register_new_resolver("required", _required, replace=True)


def plain(cfg: DictConfig) -> dict[str, Any]:
    """A resolved config node as plain dicts and lists; a key at `${required:KEY}` that the
    command line did not give is `_required`'s error naming it."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except InterpolationResolutionError as error:
        cause: BaseException | None = error
        while cause is not None and not isinstance(cause, AttnmtError):
            cause = cause.__context__  # OmegaConf wraps a resolver's error, maybe twice
        if cause is None:
            raise
        raise cause from None


def user_errors(main: Callable[[Argument], Any]) -> Callable[[Argument], Any]:
    """Report an `AttnmtError` as one clear line and exit 2, instead of a traceback."""

    @functools.wraps(main)
    def wrapper(cfg: Argument) -> Any:
        try:
            return main(cfg)
        except AttnmtError as error:
            if any(isinstance(h, logging.FileHandler) for h in logging.getLogger().handlers):
                log.error("%s", error)  # into the run's log file (Hydra's apps keep one)
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)

    return wrapper


def exit_now() -> NoReturn:
    """End a tool's process at once, its output written: flush the logs and streams, exit 0.

    Python's normal shutdown tears down torch's modules and threads one by one, a noticeable
    part of a short run; once every file is closed there is nothing left to lose by skipping it.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """The keys the tools that load a model share: the checkpoint and where and how to run it
    (configs/tools/*.yaml give their defaults)."""

    ckpt: str | list[str]  # a list: the ensemble of those models
    device: str
    threads: int | None
    quantize: str | None
    dtype: str

    def __post_init__(self) -> None:
        in_range("threads", self.threads, 1, 1024)
        device = pick_device(self.device, "device")
        check_quantize(self.quantize)
        check_dtype(self.dtype, self.quantize, device)

    def load(self) -> Translator:
        """The model (or ensemble) these options name, on their device, in their precision."""
        return Translator.load(self.ckpt, self.device, self.quantize, self.dtype)


@dataclass(frozen=True, kw_only=True)
class ModelToolOptions(ModelOptions):
    """`ModelOptions` and `search`, built once from the command line's search settings
    (`SearchConfig` holds their defaults; `--help` lists them)."""

    # The SearchConfig fields this tool takes on its command line (n_best: per request in
    # the service, always 1 when scoring test sets).
    search_keys: ClassVar[tuple[str, ...]] = tuple(
        f.name for f in dataclasses.fields(SearchConfig) if f.name != "n_best"
    )

    search: SearchConfig


def help_line(setting: dataclasses.Field) -> str:
    """'key: default  # help' for a field of `SearchConfig`."""
    comment = setting.metadata.get("help")
    line = f"{f'{setting.name}: {setting.default}':<24}{f'# {comment}' if comment else ''}"
    return line.rstrip() + "\n"


def tool_config(name: str, arguments: Sequence[str], options: type[Options]) -> Options:
    """The `options` of tool `name`: configs/tools/NAME.yaml with key=value `arguments` merged
    in, each value checked against its field's type; for a tool that reads a model, its search
    settings become one `SearchConfig`.

    The tools that read a trained model have no config groups, so they take plain OmegaConf,
    which starts much sooner than Hydra with its import. `--help` prints the commented
    defaults.
    """
    tool = f"attnmt-{name}"
    text = (resources.files(TOOLS_CONFIG_PACKAGE) / f"{name}.yaml").read_text(encoding="utf-8")
    cfg = OmegaConf.create(text)
    keys = list(cfg.keys())  # (`key in cfg` is False where the value is ???)
    search_keys: tuple[str, ...] = getattr(options, "search_keys", ())
    if "--help" in arguments or "-h" in arguments:
        print(text, end="")
        if search_keys:
            print("# how to search (attnmt.infer.translate.SearchConfig):")
            settings = [f for f in dataclasses.fields(SearchConfig) if f.name in search_keys]
            print("".join(help_line(f) for f in settings), end="")
        sys.exit(0)
    keys += list(search_keys)
    for argument in arguments:
        key, equals, value = argument.partition("=")
        if not equals:
            raise ConfigError(f"{tool}: {argument!r} is not key=value (see {tool} --help)")
        if key not in keys:
            raise ConfigError(f"{tool}: no key {key!r}; its keys: {', '.join(keys)}")
        try:  # one at a time, so that a value YAML cannot read is named by its key
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([argument]))
        except (yaml.YAMLError, OmegaConfBaseException) as error:
            problem = str(error).splitlines()[0]
            raise ConfigError(f"{key}={value}: cannot read it ({problem})") from None
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"{tool} needs {' '.join(f'{key}=...' for key in missing)}")
    values = plain(cfg)
    if search_keys:
        given = {key: values.pop(key) for key in search_keys if key in values}
        values["search"] = to_dataclass(SearchConfig, given, "")
    return to_dataclass(options, values, "")


def run_tool(name: str, options: type[Options], body: Callable[[Options], None]) -> NoReturn:
    """Run tool `name` on the command line's arguments, log to stderr, then exit at once."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    user_errors(lambda arguments: body(tool_config(name, arguments, options)))(sys.argv[1:])
    exit_now()  # a short run's start-up and shutdown weigh as much as its decoding
