"""Every key of every tool, given an odd value, either works or is one ConfigError naming it.

Property-based (hypothesis): keys drawn from each tool's config, values from 0, negatives,
huge numbers, the wrong type and the empty string. What a tool does with its config before
any work (composing it, typing it, checking ranges, building the model) runs in-process.
"""

import dataclasses
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmt.cli.align import AlignOptions
from attnmt.cli.average import AverageOptions
from attnmt.cli.common import tool_config
from attnmt.cli.distill import DistillOptions
from attnmt.cli.evaluate import EvaluateOptions
from attnmt.cli.export import ExportOptions
from attnmt.cli.score import ScoreOptions
from attnmt.cli.serve import ServeOptions
from attnmt.cli.translate import TranslateOptions
from attnmt.config import to_dataclass
from attnmt.data.config import DataConfig
from attnmt.data.sources import source_of
from attnmt.errors import ConfigError
from attnmt.model.build import build_model
from attnmt.options import option_names
from attnmt.train.state import TrainerConfig
from tests.conftest import compose_config, plain

ODD_VALUES = st.one_of(
    st.sampled_from(["0", "-1", "1000000000000", "-1000000000000", "abc", "''", "0.5", "-0.5"]),
    st.integers(-(10**15), 10**15).map(str),
    st.floats(-1e9, 1e9, allow_nan=False).map(lambda x: f"{x:.6f}"),
)
TOOLS = {
    "translate": (TranslateOptions, ["ckpt=x.pt"]),
    "evaluate": (EvaluateOptions, ["ckpt=x.pt"]),
    "export": (ExportOptions, ["ckpt=x.pt", "output=y.pt"]),
    "serve": (ServeOptions, ["ckpt=x.pt"]),
    "score": (ScoreOptions, ["ckpt=x.pt", "source=s.txt", "target=t.txt"]),
    "average": (AverageOptions, ["ckpt=[a.pt,b.pt]", "output=y.pt"]),
    "align": (AlignOptions, ["ckpt=x.pt", "source=s.txt", "target=t.txt"]),
    "distill": (DistillOptions, ["ckpt=x.pt", "output=d"]),
}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def leaf_keys(node, prefix=""):
    """Every settable key of a composed config (not the _target_ that names a class)."""
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from leaf_keys(value, f"{name}.")
        elif key != "_target_":
            yield name


def assert_works_or_names(key, check):
    try:
        check()
    except ConfigError as error:
        assert re.search(rf"(^|\W){re.escape(key)}\W", str(error)), (key, str(error))


def train_check(overrides):
    config = plain(compose_config("train", overrides))
    to_dataclass(TrainerConfig, config["trainer"], "trainer")
    source_of(to_dataclass(DataConfig, config["data"], "data"))
    build_model(config, 60, 50)


TRAIN_KEYS = [
    k
    for k in leaf_keys(plain(compose_config("train", [])))
    if k.split(".")[0] in ("trainer", "data", "model", "encoder", "decoder", "attention")
]


@FAST
@given(key=st.sampled_from(TRAIN_KEYS), value=ODD_VALUES)
def test_train_keys(key, value):
    assert_works_or_names(key, lambda: train_check([f"{key}={value}"]))


@FAST
@given(key=st.sampled_from(["attn_dim", "heads"]), value=ODD_VALUES)
def test_multihead_attention_keys(key, value):
    overrides = ["attention=multihead", f"attention.{key}={value}"]
    assert_works_or_names(f"attention.{key}", lambda: train_check(overrides))


def test_the_window_keys_are_among_the_drawn_train_keys():
    assert {"attention.window", "attention.window_size"} <= set(TRAIN_KEYS)


@FAST
@given(
    scorer=st.sampled_from(option_names("attention")),
    key=st.sampled_from(["window", "window_size"]),
    value=ODD_VALUES,
)
def test_window_keys_with_every_scorer(scorer, key, value):
    # Drawn here too, every time, with the window on (its size matters only then).
    overrides = [f"attention={scorer}", "attention.window=local_p", f"attention.{key}={value}"]
    assert_works_or_names(f"attention.{key}", lambda: train_check(overrides))


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_keys(tool):
    options, required = TOOLS[tool]
    # The yaml's keys, and the search's (SearchConfig's fields, beam_size=..., each its own key).
    keys = [f.name for f in dataclasses.fields(options) if f.name != "search"]
    keys += getattr(options, "search_keys", ())

    @FAST
    @given(key=st.sampled_from(keys), value=ODD_VALUES)
    def check(key, value):
        arguments = [a for a in required if not a.startswith(f"{key}=")] + [f"{key}={value}"]
        assert_works_or_names(key, lambda: tool_config(tool, arguments, options))

    check()


def test_the_dtype_key_is_drawn_for_the_tools_that_load_a_model():
    for tool in ("translate", "evaluate", "serve", "align"):
        assert "dtype" in {f.name for f in dataclasses.fields(TOOLS[tool][0])}, tool


@pytest.mark.parametrize("tool", ["translate", "evaluate", "serve", "align"])
def test_bfloat16_with_int8_names_dtype(tool):
    options, required = TOOLS[tool]
    arguments = [*required, "dtype=bfloat16", "quantize=int8", "device=cpu"]
    with pytest.raises(ConfigError, match=r"^dtype=bfloat16 with quantize=int8"):
        tool_config(tool, arguments, options)


SEARCH_TOOLS = [tool for tool in TOOLS if getattr(TOOLS[tool][0], "search_keys", ())]


def test_the_search_keys_are_drawn_for_the_tools_that_search():
    assert {"translate", "evaluate", "serve"} <= set(SEARCH_TOOLS)
    assert "coverage_penalty" in TranslateOptions.search_keys


MODELS_SHAPES = [
    "{value}",
    "{{a: {value}}}",
    "{{{value}: x.pt}}",
    "{{a: [x.pt, {value}]}}",
    "{{a: x.pt, b: {value}}}",
    "[{value}]",
    "{{a: {value}",
]


@FAST
@given(shape=st.sampled_from(MODELS_SHAPES), value=ODD_VALUES, with_ckpt=st.booleans())
def test_serve_models_key(shape, value, with_ckpt):
    # Odd values at the top of models=, as a name, as a file, in an ensemble, and broken YAML;
    # with ckpt= too, the error names both keys.
    arguments = [f"models={shape.format(value=value)}", *(["ckpt=x.pt"] if with_ckpt else [])]
    assert_works_or_names("models", lambda: tool_config("serve", arguments, ServeOptions))


@FAST
@given(tool=st.sampled_from(SEARCH_TOOLS), value=ODD_VALUES)
def test_coverage_penalty_key(tool, value):
    options, required = TOOLS[tool]
    arguments = [*required, f"coverage_penalty={value}"]
    assert_works_or_names("coverage_penalty", lambda: tool_config(tool, arguments, options))
