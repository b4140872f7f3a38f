"""Checkpoint averaging: the K best kept by a run, attnmt-average, and what it refuses."""

import json
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

from attnmt.errors import CheckpointError
from attnmt.infer import checkpoint as ckpt
from attnmt.infer.average import average_checkpoints
from attnmt.infer.checkpoint import RunDir
from attnmt.infer.translate import Translator
from attnmt.train.checkpoint import KeptBest

SCRIPT = str(Path(sysconfig.get_path("scripts")) / "attnmt-average")
SENTENCES = ["我很好。", "他走了。", "我们明天去公园。"]


def outputs(path):
    results = Translator.load(path).translate(SENTENCES, beam_size=3, n_best=2)
    return [[(h.text, round(h.score, 5)) for h in r.hypotheses] for r in results]


def test_a_run_keeps_its_k_best_checkpoints_by_dev_bleu(trained_run):
    records = [
        json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()
    ]
    ranked = sorted(  # of equal BLEUs the earlier ranks first, as for best.pt
        ((r["bleu"], -r["step"]) for r in records if r["kind"] == "validation"), reverse=True
    )
    assert len(ranked) > 3
    kept = RunDir(trained_run).kept_files()
    assert sorted(int(p.name.split("step")[1][:-3]) for p in kept) == sorted(
        -step for _, step in ranked[:3]
    )
    best = ckpt.load_checkpoint(trained_run / "best.pt")
    top = ckpt.load_checkpoint(trained_run / f"best.step{-ranked[0][1]}.pt")
    assert top["inference_only"] and top["validation"]["bleu"] == ranked[0][0]
    for name, tensor in best["model"].items():
        assert torch.equal(top["model"][name], tensor), name


def test_averaging_two_copies_of_a_checkpoint_gives_that_checkpoint(trained_run, tmp_path):
    copy = tmp_path / "copy.pt"
    copy.write_bytes((trained_run / "best.pt").read_bytes())
    average_checkpoints([trained_run / "best.pt", copy], tmp_path / "avg.pt")
    averaged = ckpt.load_checkpoint(tmp_path / "avg.pt")
    original = ckpt.load_checkpoint(trained_run / "best.pt")
    for name, tensor in original["model"].items():
        assert torch.equal(averaged["model"][name], tensor), name
    assert outputs(tmp_path / "avg.pt") == outputs(trained_run / "best.pt")


def test_the_average_of_a_runs_kept_checkpoints_is_their_mean_and_translates(trained_run, tmp_path):
    output = tmp_path / "avg.pt"
    result = subprocess.run(
        [SCRIPT, f"run={trained_run}", f"output={output}"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "the mean of these 3 checkpoints" in result.stdout
    kept = [ckpt.load_checkpoint(p) for p in RunDir(trained_run).kept_files()]
    averaged = ckpt.load_checkpoint(output)
    for name, tensor in averaged["model"].items():
        if tensor.is_floating_point():
            mean = sum(k["model"][name] for k in kept) / 3
            torch.testing.assert_close(tensor, mean)
    assert len(averaged["averaged_from"]) == 3
    assert len(outputs(output)) == len(SENTENCES)


def test_averaging_checkpoints_of_different_models_is_refused(trained_run, tmp_path):
    other = ckpt.load_checkpoint(trained_run / "best.pt")
    other["config"]["decoder"]["hidden_size"] = 32
    ckpt.save_checkpoint(other, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"other.pt is not a checkpoint of .*hidden_size"):
        average_checkpoints([trained_run / "best.pt", tmp_path / "other.pt"], tmp_path / "a.pt")
    assert not (tmp_path / "a.pt").exists()


def test_attnmt_average_refuses_a_run_without_kept_checkpoints_and_its_own_output(
    trained_run, tmp_path
):
    result = subprocess.run([SCRIPT, f"run={tmp_path}", "output=x.pt"], capture_output=True)
    assert result.returncode == 2 and b"trainer.keep_best" in result.stderr
    best = trained_run / "best.pt"
    result = subprocess.run(
        [SCRIPT, f"ckpt=[{best},{trained_run / 'last.pt'}]", f"output={best}"],
        capture_output=True,
    )
    assert result.returncode == 2 and b"would be replaced" in result.stderr


def test_kept_best_keeps_the_top_k_and_finds_them_again(trained_run, tmp_path):
    saved = ckpt.load_checkpoint(trained_run / "best.pt")
    identity = {"config": saved["config"], "tokenizers": saved["tokenizers"]}
    kept = KeptBest(tmp_path, 2, identity)
    for step, bleu in [(1, 5.0), (2, 7.0), (3, 6.0), (4, 1.0), (5, 7.0)]:
        kept.offer(step, bleu, {"bleu": bleu}, saved["model"])
    assert [p.name for p in RunDir(tmp_path).kept_files()] == ["best.step2.pt", "best.step5.pt"]
    again = KeptBest(tmp_path, 2, identity)
    again.offer(6, 6.5, {"bleu": 6.5}, saved["model"])  # not among the two best: nothing written
    assert [p.name for p in RunDir(tmp_path).kept_files()] == ["best.step2.pt", "best.step5.pt"]
    KeptBest(tmp_path, 0, identity).offer(7, 99.0, {}, saved["model"])  # keep_best=0: keeps none
    assert not (tmp_path / "best.step7.pt").exists()
