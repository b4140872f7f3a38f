"""Two CPU processes (gloo) train exactly like one process over the same global batch."""

import subprocess

import pytest
import torch

from attnmt.infer import checkpoint as ckpt
from attnmt.train.processes import launcher
from tests.conftest import tiny_train_overrides

NO_DROPOUT = ["encoder.dropout=0.0", "decoder.dropout=0.0"]


def _train(corpus, tmp_path, run_dir, processes, *overrides):
    command = [
        *launcher(processes),
        *tiny_train_overrides(corpus, tmp_path / "data"),
        *NO_DROPOUT,
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return ckpt.load_checkpoint(run_dir / "last.pt")


@pytest.mark.slow
def test_two_processes_equal_one_process_over_the_same_global_batch(tiny_corpus, tmp_path):
    # One process accumulates batches 0 and 1; two processes take one each.
    one = _train(
        tiny_corpus, tmp_path, tmp_path / "one", 1, "trainer.max_steps=1", "trainer.accumulate=2"
    )
    two = _train(
        tiny_corpus, tmp_path, tmp_path / "two", 2, "trainer.max_steps=1", "trainer.accumulate=1"
    )
    assert one["progress"]["batch_in_epoch"] == two["progress"]["batch_in_epoch"] == 2
    for name, tensor in one["model"].items():
        assert torch.allclose(tensor, two["model"][name], atol=1e-6), name


@pytest.mark.slow
def test_resume_across_process_counts(tiny_corpus, tmp_path):
    run_dir = tmp_path / "run"
    _train(tiny_corpus, tmp_path, run_dir, 1, "trainer.max_steps=2")
    two = _train(tiny_corpus, tmp_path, run_dir, 2, "trainer.max_steps=3", "trainer.resume=auto")
    assert two["progress"]["step"] == 3 and two["progress"]["batch_in_epoch"] == 4
    one = _train(tiny_corpus, tmp_path, run_dir, 1, "trainer.max_steps=4", "trainer.resume=auto")
    assert one["progress"]["step"] == 4 and one["progress"]["batch_in_epoch"] == 5
