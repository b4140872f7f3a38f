"""The console scripts' entry points (pyproject.toml's [project.scripts]).

Each imports its tool with Python's cycle collector paused. Importing torch makes a great
many objects that the collector tracks, nearly all of them alive until the process ends; with
the collector on, the import runs hundreds of collections over them, and later full
collections walk them again, on every start. Paused, then frozen (`gc.freeze`: later
collections skip what exists now), a tool starts sooner. `python -m attnmt.cli.TOOL` runs the
same tool without the pause.
"""

import gc
import importlib


def _start(tool: str) -> None:
    """Import attnmt.cli.<tool> with the cycle collector paused, then run its main."""
    gc.disable()
    try:
        module = importlib.import_module(f"attnmt.cli.{tool}")
    finally:
        gc.freeze()
        gc.enable()
    module.main()


def prepare() -> None:
    _start("prepare")


def train() -> None:
    _start("train")


def translate() -> None:
    _start("translate")


def evaluate() -> None:
    _start("evaluate")


def export() -> None:
    _start("export")


def serve() -> None:
    _start("serve")


def average() -> None:
    _start("average")


def score() -> None:
    _start("score")


def align() -> None:
    _start("align")


def distill() -> None:
    _start("distill")
