"""The console scripts' entry points (attnmt.cli)."""

import gc
import importlib
from pathlib import Path

import pytest
import tomllib

import attnmt.cli.start
import attnmt.cli.translate

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_every_console_script_names_a_function():
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    tools = (
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
    assert set(scripts) == {f"attnmt-{t}" for t in tools}
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target


def test_a_name_that_is_no_tool_is_no_entry_point():
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        attnmt.cli.start.nope  # noqa: B018
    with pytest.raises(ImportError):
        from attnmt.cli.start import nope  # noqa: F401


def test_a_tool_runs_with_the_collector_on_and_its_imports_frozen(monkeypatch):
    seen = {}

    def main():
        seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count())

    monkeypatch.setattr(attnmt.cli.translate, "main", main)
    try:
        attnmt.cli.start.translate()
    finally:
        gc.unfreeze()
    assert seen["enabled"] and seen["frozen"] > 0
