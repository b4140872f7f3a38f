"""What every entry point shares: where the configs live and how user errors are reported."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, NoReturn, TypeVar

from omegaconf import DictConfig, OmegaConf

from attnmt.config import in_range, to_dataclass
from attnmt.errors import AttnmtError, ConfigError
from attnmt.runtime import check_quantize, pick_device
from attnmt.translate import SearchConfig

# The configs ship inside the package (pyproject maps configs/ to attnmt.configs), so the
# console scripts find them from any working directory.
CONFIG_PATH = "pkg://attnmt.configs"
# translate and evaluate: one flat file each, no config groups (see tool_config).
TOOLS_CONFIG_PACKAGE = "attnmt.configs.tools"

Argument = TypeVar("Argument")
Options = TypeVar("Options")

log = logging.getLogger("attnmt")


def plain(cfg: DictConfig) -> dict[str, Any]:
    """A resolved config node as plain dicts and lists."""
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


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
class ModelToolOptions:
    """The keys the tools that read a model share: the checkpoint, where to run
    (configs/tools/*.yaml give their defaults) and how to search (the defaults of
    `SearchConfig`, the one place they live; `--help` lists them)."""

    ckpt: str | list[str]  # a list: the ensemble of those models
    device: str
    threads: int | None
    quantize: str | None
    beam_size: int = SearchConfig.beam_size
    alpha: float = SearchConfig.alpha
    max_length_a: float = SearchConfig.max_length_a
    max_length_b: int = SearchConfig.max_length_b
    max_input_length: int = SearchConfig.max_input_length
    batch_tokens: int = SearchConfig.batch_tokens

    def __post_init__(self) -> None:
        self.search()  # impossible search settings are refused here, naming the key
        in_range("threads", self.threads, 1, 1024)
        pick_device(self.device, "device")
        check_quantize(self.quantize)

    def search(self, n_best: int = 1) -> SearchConfig:
        """The search these options ask for."""
        return SearchConfig(
            self.beam_size,
            n_best,
            self.alpha,
            self.max_length_a,
            self.max_length_b,
            self.max_input_length,
            self.batch_tokens,
        )


def default_line(cls: type, key: str) -> str:
    """'key: default  # comment' for field `key` of dataclass `cls`, from its source."""
    match = re.search(rf"^\s+{key}: [^=\n]+= ([^#\n]+?)\s*(#.*)?$", inspect.getsource(cls), re.M)
    value, comment = match.groups() if match else ("?", None)
    return f"{f'{key}: {value}':<24}{comment or ''}".rstrip() + "\n"


def tool_config(name: str, arguments: Sequence[str], options: type[Options]) -> Options:
    """The `options` of tool `name`: configs/tools/NAME.yaml with key=value `arguments` merged
    in, each value checked against its field's type.

    The tools that read a trained model have no config groups, so they take plain OmegaConf,
    which starts much sooner than Hydra with its import. `--help` prints the commented
    defaults.
    """
    tool = f"attnmt-{name}"
    text = (resources.files(TOOLS_CONFIG_PACKAGE) / f"{name}.yaml").read_text(encoding="utf-8")
    cfg = OmegaConf.create(text)
    keys = list(cfg.keys())  # (`key in cfg` is False where the value is ???)
    defaults = {  # keys whose default is the dataclass's (the search settings), not the yaml's
        f.name: f.default
        for f in dataclasses.fields(options)  # type: ignore[arg-type]
        if f.name not in keys and f.default is not dataclasses.MISSING
    }
    if "--help" in arguments or "-h" in arguments:
        print(text, end="")
        print("# how to search (attnmt.translate.SearchConfig):")
        print("".join(default_line(SearchConfig, key) for key in defaults), end="")
        sys.exit(0)
    keys += list(defaults)
    for argument in arguments:
        key, equals, _ = argument.partition("=")
        if not equals:
            raise ConfigError(f"{tool}: {argument!r} is not key=value (see {tool} --help)")
        if key not in keys:
            raise ConfigError(f"{tool}: no key {key!r}; its keys: {', '.join(keys)}")
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(arguments)))
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"{tool} needs {' '.join(f'{key}=...' for key in missing)}")
    return to_dataclass(options, plain(cfg), "")


def run_tool(name: str, options: type[Options], body: Callable[[Options], None]) -> NoReturn:
    """Run tool `name` on the command line's arguments, log to stderr, then exit at once."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    user_errors(lambda arguments: body(tool_config(name, arguments, options)))(sys.argv[1:])
    exit_now()  # a short run's start-up and shutdown weigh as much as its decoding
