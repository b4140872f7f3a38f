"""The console scripts' entry points (pyproject.toml's [project.scripts]).

Each imports its tool with Python's cycle collector paused. Importing torch makes a great
many objects that the collector tracks, nearly all of them alive until the process ends; with
the collector on, the import runs hundreds of collections over them, and later full
collections walk them again, on every start. Paused, then frozen (`gc.freeze`: later
collections skip what exists now), a tool starts sooner. `python -m attnmt.cli.TOOL` runs the
same tool without the pause.
"""

import functools
import gc
import importlib
from collections.abc import Callable

# The tools, each a module attnmt.cli.<tool> with a main(); pyproject.toml's [project.scripts]
# names each as attnmt.cli.start:<tool>.
TOOLS = (
    "prepare",
    "train",
    "translate",
    "evaluate",
    "export",
    "serve",
    "average",
    "score",
    "align",
    "distill",
)


def _start(tool: str) -> None:
    """Import attnmt.cli.<tool> with the cycle collector paused, then run its main."""
    gc.disable()
    try:
        module = importlib.import_module(f"attnmt.cli.{tool}")
    finally:
        gc.freeze()
        gc.enable()
    module.main()


def __getattr__(name: str) -> Callable[[], None]:
    """The entry point of tool `name` (`from attnmt.cli.start import train`): Python asks a
    module's __getattr__ for a name it does not define (PEP 562)."""
    if name not in TOOLS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return functools.partial(_start, name)
