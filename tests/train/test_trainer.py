"""Training end to end on a tiny corpus: it learns, resumes exactly, and survives crashes."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attnmt.errors import CheckpointError, ConfigError
from attnmt.infer.checkpoint import load_checkpoint
from attnmt.train import checkpoint as ckpt
from attnmt.train.build import build_trainer, validation_search
from attnmt.train.state import Summary
from attnmt.train.trainer import TrainingError
from attnmt.train.validate import Validator
from tests.conftest import compose_config, plain, tiny_train_overrides
from tests.pictures import pixels, shows_colour

REPO = Path(__file__).resolve().parents[2]


def make_trainer(corpus, tmp_path, run, *overrides):
    cfg = compose_config("train", [*tiny_train_overrides(corpus, tmp_path / "data"), *overrides])
    run_dir = tmp_path / run
    run_dir.mkdir(exist_ok=True)
    return build_trainer(plain(cfg), run_dir)


def losses(run_dir):
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]


def test_tiny_run_learns_its_training_pairs(tiny_corpus, tmp_path):
    trainer = make_trainer(
        tiny_corpus, tmp_path, "run", "trainer.max_steps=150", "trainer.validate_every=75"
    )
    summary = trainer.fit()
    assert summary.steps == 150 and summary.best_checkpoint.is_file()
    curve = tmp_path / "run" / "learning_curve.png"  # train loss, dev loss, dev BLEU drawn
    assert shows_colour(curve, "tab:blue", alpha=0.7)
    assert shows_colour(curve, "tab:orange") and shows_colour(curve, "tab:green")
    translator = trainer.validate.translator
    search = validation_search(trainer.cfg)
    result = Validator(
        translator, trainer.train_data, translator.dataset_folder, "train", search, 0
    )()
    assert result.bleu > 40, f"BLEU on its own training pairs only {result.bleu}"


def test_a_trainer_flushes_denormals_to_zero(tiny_corpus, tmp_path):
    """Hard attention's weights of e^-90 would otherwise run every product that reads them on
    the CPU's slow path (`attnmt.runtime.flush_denormals`)."""
    torch.set_flush_denormal(False)
    assert (torch.tensor([1e-39]) * 1.5).item() > 0
    make_trainer(tiny_corpus, tmp_path, "run")
    assert (torch.tensor([1e-39]) * 1.5).item() == 0


def test_resumed_run_repeats_the_uninterrupted_losses(tiny_corpus, tmp_path):
    make_trainer(tiny_corpus, tmp_path, "whole", "trainer.max_steps=12").fit()
    make_trainer(tiny_corpus, tmp_path, "split", "trainer.max_steps=5").fit()
    resumed = make_trainer(
        tiny_corpus, tmp_path, "split", "trainer.max_steps=12", "trainer.resume=auto"
    )
    assert resumed.progress.step == 5
    resumed.fit()
    assert losses(tmp_path / "split") == losses(tmp_path / "whole")


def records_but_timings(run_dir):
    """metrics.jsonl without what depends on the clock."""
    timings = {"tokens_per_s", "minutes", "seconds", "sent_per_s", "time"}
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in timings} for r in records]


def test_the_same_command_twice_gives_the_same_records(tiny_corpus, tmp_path):
    # The recipe's own schedule (cosine after a warmup, over the step budget) and its default
    # determinism and threads, in fp32; the warmup is shortened to keep the test quick.
    recipe = [
        "trainer.schedule=cosine",
        "trainer.warmup_steps=40",
        "trainer.max_steps=160",
        "trainer.validate_every=80",
        "trainer.log_every=10",
        "trainer.amp=false",
        "trainer.deterministic=false",
        "trainer.threads=null",
    ]
    for run in ("a", "b"):
        make_trainer(tiny_corpus, tmp_path, run, *recipe).fit()
    first, second = records_but_timings(tmp_path / "a"), records_but_timings(tmp_path / "b")
    assert sum(r["kind"] == "validation" for r in first) >= 2  # each epoch's end too
    assert first == second


@pytest.mark.slow
def test_compiled_decoder_step_trains_like_the_eager_one(tiny_corpus, tmp_path):
    make_trainer(tiny_corpus, tmp_path, "eager", "trainer.max_steps=3").fit()
    make_trainer(
        tiny_corpus, tmp_path, "compiled", "trainer.max_steps=3", "trainer.compile=true"
    ).fit()
    eager, compiled = losses(tmp_path / "eager"), losses(tmp_path / "compiled")
    assert [s for s, _ in compiled] == [s for s, _ in eager]
    assert [x for _, x in compiled] == pytest.approx([x for _, x in eager], rel=1e-4)


def _train_command(corpus, tmp_path, run_dir, *overrides):
    return [
        sys.executable,
        "-m",
        "attnmt.cli.train",
        *tiny_train_overrides(corpus, tmp_path / "data"),
        f"hydra.run.dir={run_dir}",
        *overrides,
    ]


def _wait_for(path, process, seconds=60):
    deadline = time.monotonic() + seconds
    while not path.is_file():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_live_run_keeps_its_directory_and_a_sigkilled_one_resumes_exactly(tiny_corpus, tmp_path):
    whole = tmp_path / "whole"
    subprocess.run(
        _train_command(tiny_corpus, tmp_path, whole, "trainer.max_steps=40"),
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    killed = tmp_path / "killed"
    # Unbounded, so it is still running when killed right after its first checkpoint.
    command = _train_command(tiny_corpus, tmp_path, killed, "trainer.checkpoint_every=5")
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _wait_for(killed / "last.pt", process)
    second = subprocess.run(command, capture_output=True, cwd=tmp_path)  # into a live run
    assert second.returncode == 2
    assert f"{killed}: another attnmt-train (pid {process.pid})".encode() in second.stderr
    process.kill()  # SIGKILL: no handler runs
    process.wait()
    saved_step = load_checkpoint(killed / "last.pt")["progress"]["step"]
    assert 0 < saved_step < 40
    resume = [*command, "trainer.max_steps=40", "trainer.resume=auto"]
    subprocess.run(resume, check=True, capture_output=True, cwd=tmp_path)
    assert losses(killed) == losses(whole)


def test_sigterm_saves_a_checkpoint_and_exits_cleanly(tiny_corpus, tmp_path):
    run_dir = tmp_path / "run"
    command = _train_command(tiny_corpus, tmp_path, run_dir, "trainer.max_steps=100000")
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _wait_for(run_dir / "metrics.jsonl", process)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert b"stopped by SIGTERM" in out + err
    step = load_checkpoint(run_dir / "last.pt")["progress"]["step"]
    assert step > 0
    # it still ends validated, with a best checkpoint of that step
    assert load_checkpoint(run_dir / "best.pt")["progress"]["best_step"] == step
    assert b"best dev BLEU" in out


def test_the_runs_config_records_the_processes_and_threads_it_ran_with(tiny_corpus, tmp_path):
    for threads in ("1", "2"):
        trainer = make_trainer(tiny_corpus, tmp_path, f"run{threads}", f"trainer.threads={threads}")
        ran_with = trainer.identity["config"]["trainer"]
        assert ran_with["processes"] == "1" and ran_with["threads"] == int(threads)
    auto = make_trainer(tiny_corpus, tmp_path, "auto", "trainer.threads=null")
    assert isinstance(auto.identity["config"]["trainer"]["threads"], int)


def test_a_cap_cuts_a_step_budget_says_so_and_still_ends_validated(tiny_corpus, tmp_path):
    trainer = make_trainer(
        tiny_corpus,
        tmp_path,
        "run",
        "trainer.max_steps=100000",
        "trainer.max_time=0.002",
        "trainer.schedule=cosine",
    )
    assert trainer.schedule.seconds is None  # the cap never shapes the learning rate
    assert trainer.schedule.total == 100000
    summary = trainer.fit()
    assert summary.stopped_because.startswith("cut by trainer.max_time=0.002 minutes at step ")
    assert summary.best_checkpoint is not None and summary.best_checkpoint.is_file()
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[-2]["kind"] == "validation" and records[-2]["step"] == summary.steps
    assert records[-1] == {
        "kind": "stop",
        "step": summary.steps,
        "epoch": summary.epochs,
        "reason": summary.stopped_because,
        "cut": True,
    }


def test_rng_state_round_trips():
    state = ckpt.rng_state()
    expected = (torch.rand(3), __import__("random").random(), __import__("numpy").random.rand())
    ckpt.set_rng_state(state)
    again = (torch.rand(3), __import__("random").random(), __import__("numpy").random.rand())
    assert torch.equal(expected[0], again[0]) and expected[1:] == again[1:]


def test_nan_loss_steps_are_skipped_then_stop_the_run(tiny_corpus, tmp_path):
    trainer = make_trainer(
        tiny_corpus, tmp_path, "run", "trainer.max_steps=50", "trainer.max_bad_steps=3"
    )
    with torch.no_grad():
        trainer.model.decoder.output.bias.fill_(float("nan"))
    with pytest.raises(TrainingError, match="NaN or infinite 3 steps in a row"):
        trainer.fit()
    assert trainer.progress.skipped_steps == 3
    assert torch.isnan(trainer.model.decoder.output.bias).all()  # no update from a NaN step


def test_resume_with_another_architecture_names_the_keys(tiny_corpus, tmp_path):
    make_trainer(tiny_corpus, tmp_path, "run", "trainer.max_steps=1").fit()
    with pytest.raises(CheckpointError, match=r"decoder.hidden_size: 128 in the checkpoint, 96"):
        make_trainer(tiny_corpus, tmp_path, "run", "trainer.resume=auto", "decoder.hidden_size=96")


def test_validation_draws_attention_heatmaps(trained_run):
    pictures = sorted((trained_run / "attention").glob("step*_*.png"))
    # heatmaps, not blank: viridis's darkest and brightest ends stand for weights 0 and 1
    assert pictures and all(pixels(p).std() > 0.05 for p in pictures)


def test_an_empty_dev_split_is_refused_naming_the_key(tiny_corpus, tmp_path):
    with pytest.raises(ConfigError, match=r"data.dev_size=0: the dev split is empty"):
        make_trainer(tiny_corpus, tmp_path, "run", "data.dev_size=0")


def test_a_half_written_metrics_line_does_not_stop_a_resume(tiny_corpus, tmp_path):
    make_trainer(tiny_corpus, tmp_path, "run", "trainer.max_steps=2").fit()
    with open(tmp_path / "run" / "metrics.jsonl", "a", encoding="utf-8") as out:
        out.write('{"kind": "train", "st')  # killed mid-write
    make_trainer(tiny_corpus, tmp_path, "run", "trainer.max_steps=4", "trainer.resume=auto").fit()
    assert [step for step, _ in losses(tmp_path / "run")] == [1, 2, 3, 4]


def test_a_run_without_validation_says_so_and_names_last_pt(tmp_path):
    summary = Summary(-1.0, None, 3, 0, "stopped by SIGTERM", tmp_path / "last.pt")
    assert summary.describe() == (
        f"no validation ran (stopped by SIGTERM at step 3); last checkpoint: {tmp_path / 'last.pt'}"
    )
    validated = Summary(20.5, tmp_path / "best.pt", 9, 1, "trainer.max_steps=9 reached")
    assert validated.describe().startswith("best dev BLEU 20.50 (trainer.max_steps=9 reached)")


def test_max_epochs_ends_the_run_at_an_epoch_boundary(tiny_corpus, tmp_path):
    summary = make_trainer(tiny_corpus, tmp_path, "run", "trainer.max_epochs=1").fit()
    assert summary.stopped_because == "trainer.max_epochs=1 reached" and summary.epochs == 1
    assert summary.best_checkpoint is not None  # validated at the epoch's end


def test_the_run_writes_tensorboard_scalars(trained_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(trained_run / "tensorboard"))
    events.Reload()
    losses = [e.value for e in events.Scalars("train/loss")]
    records = [json.loads(x) for x in (trained_run / "metrics.jsonl").read_text().splitlines()]
    assert losses == pytest.approx([r["loss"] for r in records if r["kind"] == "train"])
    assert [e.step for e in events.Scalars("validation/bleu")] == [
        r["step"] for r in records if r["kind"] == "validation"
    ]


@pytest.mark.parametrize("variant", [["attention=coverage"], ["attention.window=local_p"]])
def test_the_attention_variants_train_and_translate(tiny_corpus, tmp_path, variant):
    from attnmt.infer.translate import Translator

    summary = make_trainer(tiny_corpus, tmp_path, "run", "trainer.max_steps=3", *variant).fit()
    assert summary.steps == 3
    translator = Translator.load(tmp_path / "run" / "last.pt")
    [result] = translator.translate(
        ["我们明天去公园。"], beam_size=3, n_best=2, coverage_penalty=0.5, attention=True
    )
    assert len(result.hypotheses) == 2
    for candidate in result.hypotheses:
        rows, columns = candidate.attention.shape
        assert rows == len(candidate.target_pieces) and columns == len(result.source_pieces)
        assert (candidate.attention.sum(-1) <= 1 + 1e-5).all()
