"""What every entry point shares: where the configs live and how user errors are reported."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from omegaconf import DictConfig, OmegaConf

from attnmt.errors import AttnmtError

# The configs ship inside the package (pyproject maps configs/ to attnmt.configs), so the
# console scripts find them from any working directory.
CONFIG_PATH = "pkg://attnmt.configs"
# translate and evaluate read a trained model and take no model groups, so that their own keys
# (attention=FILE) are never mistaken for a config group.
TOOLS_CONFIG_PATH = "pkg://attnmt.configs.tools"

log = logging.getLogger("attnmt")


def plain(cfg: DictConfig) -> dict[str, Any]:
    """A resolved config node as plain dicts and lists."""
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def user_errors(main: Callable[[DictConfig], Any]) -> Callable[[DictConfig], Any]:
    """Report an `AttnmtError` as one clear line and exit 2, instead of a traceback."""

    @functools.wraps(main)
    def wrapper(cfg: DictConfig) -> Any:
        try:
            return main(cfg)
        except AttnmtError as error:
            log.error("%s", error)
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)

    return wrapper


def exit_now() -> NoReturn:
    """End a tool's process at once, its output written: flush the logs and streams, exit 0.

    Python's normal shutdown tears down torch's modules and threads one by one, about 0.3 s of
    nothing (as much as decoding 300 sentences); once every file is closed there is nothing left
    to lose by skipping it.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
