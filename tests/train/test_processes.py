"""trainer.processes: a number of training processes, or auto (measured once, remembered)."""

import json
import os
import subprocess
import sys

import pytest

from attnmt.errors import ConfigError
from attnmt.infer import checkpoint as ckpt
from attnmt.runtime import cpu_count
from attnmt.train import processes
from tests.conftest import compose_config, plain, tiny_train_overrides


def _config(*overrides: str) -> dict:
    return plain(compose_config("train", ["trainer.device=cpu", *overrides]))


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(processes, "cpu_count", lambda: 4)
    return tmp_path / "cache"


def test_a_number_is_taken_as_it_is(cache_home):
    assert processes.count(_config(), []) == 1
    assert processes.count(_config("trainer.processes=3"), []) == 3


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "2000"])
def test_a_bad_value_is_refused_naming_the_key(cache_home, value):
    with pytest.raises(ConfigError, match=r"trainer\.processes"):
        processes.count(_config(f"trainer.processes={value}"), [])


def test_ranks_share_a_step_s_tokens():
    assert processes.shared_batches(1, 2048) == []
    assert processes.shared_batches(2, 2048) == ["trainer.batch_tokens=1024"]
    assert processes.shared_batches(3, 2) == ["trainer.batch_tokens=1"]


def test_inside_torchrun_each_rank_is_one_process(cache_home, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert processes.count(_config("trainer.processes=auto"), []) == 1


def test_auto_measures_once_and_remembers_the_faster(cache_home, monkeypatch):
    probed = []

    def probe(count, overrides, batch_tokens):
        probed.append(count)
        return {1: 900, 2: 1000}[count]

    monkeypatch.setattr(processes, "_probe", probe)
    assert processes.count(_config("trainer.processes=auto"), []) == 2
    assert processes.count(_config("trainer.processes=auto"), []) == 2
    assert probed == [1, 2]  # the second run read the cache
    # another model is another measurement
    assert processes.count(_config("trainer.processes=auto", "encoder.hidden_size=32"), []) == 2
    assert probed == [1, 2, 1, 2]
    saved = json.loads(processes.cache_path().read_text())
    assert len(saved) == 2 and all(e["processes"] == 2 for e in saved.values())


def test_auto_keeps_one_process_unless_two_are_clearly_faster(cache_home, monkeypatch):
    monkeypatch.setattr(processes, "_probe", lambda count, *_: {1: 1000, 2: 1040}[count])
    assert processes.count(_config("trainer.processes=auto"), []) == 1


def test_auto_on_one_core_does_not_measure(cache_home, monkeypatch):
    monkeypatch.setattr(processes, "cpu_count", lambda: 1)
    monkeypatch.setattr(processes, "_probe", lambda *_: pytest.fail("measured"))
    assert processes.count(_config("trainer.processes=auto"), []) == 1


def _train(corpus, tmp_path, run_dir, *overrides):
    command = [
        sys.executable,
        "-m",
        "attnmt.cli.train",
        *tiny_train_overrides(corpus, tmp_path / "data"),
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
def test_two_processes_train_one_run(tiny_corpus, tmp_path):
    _train(tiny_corpus, tmp_path, tmp_path / "two", "trainer.processes=2", "trainer.max_steps=1")
    saved = ckpt.load_checkpoint(tmp_path / "two" / "last.pt")
    assert saved["progress"]["batch_in_epoch"] == 2  # each rank took one batch of the step


@pytest.mark.slow
@pytest.mark.skipif(cpu_count() < 2, reason="auto measures only where there are 2+ cores")
def test_auto_measures_both_then_trains(tiny_corpus, tmp_path):
    first = _train(
        tiny_corpus, tmp_path, tmp_path / "a", "trainer.processes=auto", "trainer.max_steps=2"
    )
    assert "timing 60 steps on 2 process(es)" in first.stdout
    (entry,) = json.loads((tmp_path / "cache" / "attnmt" / "processes.json").read_text()).values()
    assert set(entry["tokens_per_s"]) == {"1", "2"} and min(entry["tokens_per_s"].values()) > 0
    second = _train(
        tiny_corpus, tmp_path, tmp_path / "b", "trainer.processes=auto", "trainer.max_steps=2"
    )
    assert "timing" not in second.stdout and f"auto: {entry['processes']}" in second.stdout
    saved = ckpt.load_checkpoint(tmp_path / "b" / "last.pt")
    assert saved["progress"]["step"] == 2
