"""Every config option composes and becomes the object it describes."""

import re
import subprocess
import sys

import pytest

from attnmt.cli.common import tool_config
from attnmt.cli.evaluate import EvaluateOptions
from attnmt.cli.translate import TranslateOptions
from attnmt.config import to_dataclass
from attnmt.data.config import DataConfig
from attnmt.data.sources import Source, source_of
from attnmt.errors import ConfigError
from attnmt.options import build, option_names
from attnmt.train.state import TrainerConfig
from tests.conftest import compose_config, plain, small_data_overrides

MANDATORY = {"files": ["data.en_path=a.en", "data.zh_path=a.zh"], "splits": ["data.split_dir=d"]}


@pytest.mark.parametrize("name", option_names("data"))
def test_every_data_option_builds_a_data_config(name):
    cfg = compose_config("train", [f"data={name}", *MANDATORY.get(name, [])])
    data = to_dataclass(DataConfig, plain(cfg.data), "data")
    assert isinstance(source_of(data), Source)


def test_trainer_defaults_build_a_trainer_config():
    trainer = to_dataclass(TrainerConfig, plain(compose_config("train", []).trainer), "trainer")
    assert trainer.batch_tokens == 2048 and trainer.max_steps == 8000
    assert trainer.max_time is None and trainer.patience is None  # a step budget, no clock


@pytest.mark.parametrize("name", option_names("experiment"))
def test_every_experiment_composes_into_valid_configs(name):
    needs = ["trainer.init=model.pt"] if name == "finetune" else []  # ${required:trainer.init}
    cfg = plain(compose_config("train", [f"+experiment={name}", *needs]))
    trainer = to_dataclass(TrainerConfig, cfg["trainer"], "trainer")
    data = to_dataclass(DataConfig, cfg["data"], "data")
    assert trainer.max_steps and trainer.max_time is None and data.src_lang != data.tgt_lang


TOOLS = {"translate": TranslateOptions, "evaluate": EvaluateOptions}


@pytest.mark.parametrize("name", TOOLS)
def test_tool_configs_take_key_value_arguments(name):
    arguments = ["ckpt=x.pt", "beam_size=3", "threads=null", "max_length_a=0"]
    cfg = tool_config(name, arguments, TOOLS[name])
    assert cfg.ckpt == "x.pt" and cfg.search.beam_size == 3 and cfg.threads is None
    assert cfg.search.max_length_a == 0 and not hasattr(cfg, "encoder")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["ckpt=x.pt", "beam=3"], "no key 'beam'; its keys: ckpt, input"),
        (["ckpt=x.pt", "beam_size"], "'beam_size' is not key=value"),
        (["beam_size=3"], "attnmt-translate needs ckpt=..."),
        (["ckpt=x.pt", "beam_size=abc"], "beam_size='abc': expected int"),
        (["ckpt=x.pt", "threads=two"], "threads='two': expected int or null"),
        (["ckpt=x.pt", "beam_size=0"], "beam_size=0: must be 1 to 128"),
        (["ckpt=x.pt", "n_best=9"], "n_best=9: must be 1 to beam_size (5)"),
    ],
)
def test_tool_config_names_the_bad_argument(arguments, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        tool_config("translate", arguments, TranslateOptions)


def test_a_number_where_a_name_is_expected_becomes_the_name():
    cfg = tool_config("evaluate", ["ckpt=2024", "sets=[test]"], EvaluateOptions)
    assert cfg.ckpt == "2024" and cfg.sets == ["test"]


def test_train_config_values_of_the_wrong_type_are_named():
    trainer = plain(compose_config("train", ["trainer.max_steps=abc"]).trainer)
    with pytest.raises(ConfigError, match=re.escape("trainer.max_steps='abc': expected int")):
        to_dataclass(TrainerConfig, trainer, "trainer")


def test_tool_help_prints_the_commented_defaults(capsys):
    with pytest.raises(SystemExit) as exit_:
        tool_config("translate", ["--help"], TranslateOptions)
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "beam_size: 5            # 1: greedy" in out  # from SearchConfig, its one place
    assert "threads: null           # CPU threads; null: all cores" in out  # from the yaml


def test_prepare_cli_prints_the_summary_then_does_nothing(small_corpus, tmp_path):
    command = [
        sys.executable,
        "-m",
        "attnmt.cli.prepare",
        *small_data_overrides(small_corpus, tmp_path),
    ]
    first = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "dropped: duplicate" in first.stdout and "train pairs" in first.stdout
    assert "built:" in first.stdout
    second = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert "up to date:" in second.stdout


def test_cli_reports_bad_input_in_one_line(tmp_path):
    missing = tmp_path / "none.txt"
    command = [
        sys.executable,
        "-m",
        "attnmt.cli.prepare",
        f"data.raw_path={missing}",
        "data.url=http://127.0.0.1:9/x.zip",
        f"data.processed_dir={tmp_path}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert f"error: {missing}: corpus file not found" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"_target_": "attnmt.model.attention.Nope"},
            "attention._target_='attnmt.model.attention.Nope'",
        ),
        ({"_target_": "attnmt.nowhere.Dot"}, "no such class"),
        ({"_target_": "attnmt.model.attention.DotAttention", "size": 3}, "keyword argument 'size'"),
        ({"attn_dim": 3}, "attention: no _target_"),
    ],
)
def test_build_names_the_key_of_a_bad_option(config, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        build(config, "attention", query_dim=4, key_dim=4)


def test_train_yaml_gives_every_scorer_the_window_keys_at_the_classes_defaults():
    import inspect

    from attnmt.model.attention import Attention

    defaults = inspect.signature(Attention.__init__).parameters
    for name in option_names("attention"):
        attention = plain(compose_config("train", [f"attention={name}"]))["attention"]
        assert attention["window_size"] == defaults["window_size"].default
        expected = "local_p" if name == "local_p" else defaults["window"].default
        assert attention["window"] == expected
