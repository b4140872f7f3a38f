"""The training checkpoint's layout and the resume checks, without training."""

import pytest
import torch

from attnmt.errors import CheckpointError
from attnmt.infer.checkpoint import RunDir, save_checkpoint
from attnmt.train.checkpoint import KeptBest, TrainingCheckpoint, resume_conflicts, trainer_changes

CONFIG = {
    "encoder": {"hidden_size": 256, "bidirectional": True},
    "decoder": {"hidden_size": 256},
    "attention": {"attn_dim": 256},
    "trainer": {"lr": 0.001, "max_steps": 100, "label_smoothing": 0.1},
}
TOKENIZERS = {
    "zh": {"sha256": "a", "path": "/d/spm.zh.model"},
    "en": {"sha256": "b", "path": "/d/spm.en.model"},
}


def saved(config=CONFIG, tokenizers=TOKENIZERS):
    return TrainingCheckpoint({}, {}, {}, {}, {"step": 3}, {}, config, tokenizers)


def test_a_matching_checkpoint_has_no_conflicts():
    assert resume_conflicts(saved(), CONFIG, TOKENIZERS) == []


def test_architecture_and_tokenizer_changes_are_each_named():
    changed = {**CONFIG, "decoder": {"hidden_size": 128}, "attention": {"attn_dim": 256, "x": 1}}
    other = {**TOKENIZERS, "en": {"sha256": "c", "path": "/e/spm.en.model"}}
    conflicts = resume_conflicts(saved(), changed, other)
    assert conflicts == [
        "attention.x: None in the checkpoint, 1 now",
        "decoder.hidden_size: 256 in the checkpoint, 128 now",
        "the en SentencePiece model differs from /e/spm.en.model; the data config changed (data.*)",
    ]


def test_trainer_changes_note_what_changes_how_training_goes_on():
    new = {"lr": 0.0005, "max_steps": 200, "label_smoothing": 0.2}
    assert trainer_changes(CONFIG["trainer"], new) == [
        "trainer.label_smoothing 0.1 -> 0.2 (changes how training goes on)",
        "trainer.lr 0.001 -> 0.0005",
        "trainer.max_steps 100 -> 200",
    ]


def test_a_checkpoint_round_trips_and_an_export_or_a_partial_file_is_refused(tmp_path):
    state = saved()
    state.model = {"w": torch.ones(2)}
    save_checkpoint(state.payload(), tmp_path / "last.pt")
    again = TrainingCheckpoint.read(tmp_path / "last.pt")
    assert torch.equal(again.model["w"], torch.ones(2)) and again.progress == {"step": 3}
    save_checkpoint({**state.payload(), "inference_only": True}, tmp_path / "export.pt")
    with pytest.raises(CheckpointError, match="inference-only export"):
        TrainingCheckpoint.read(tmp_path / "export.pt")
    partial = {k: v for k, v in state.payload().items() if k not in ("optimizer", "rng")}
    save_checkpoint(partial, tmp_path / "partial.pt")
    with pytest.raises(CheckpointError, match="not a training checkpoint"):
        TrainingCheckpoint.read(tmp_path / "partial.pt")


def test_a_key_the_scorer_gained_later_counts_as_its_default_in_an_older_checkpoint():
    target = {"_target_": "attnmt.model.attention.AdditiveAttention", "attn_dim": 256}
    older = {**CONFIG, "attention": target}  # written before attention.window existed
    now = {**CONFIG, "attention": {**target, "window": None, "window_size": 4}}
    assert resume_conflicts(saved(older), now, TOKENIZERS) == []
    windowed = {**CONFIG, "attention": {**target, "window": "local_p", "window_size": 4}}
    assert resume_conflicts(saved(older), windowed, TOKENIZERS) == [
        "attention.window: None in the checkpoint, 'local_p' now"
    ]


def test_kept_best_of_a_lower_is_better_score_keeps_the_lowest_the_earlier_of_equals(tmp_path):
    identity = {
        "config": {"data": {"src_lang": "zh", "tgt_lang": "en"}},
        "tokenizers": {lang: {"model": b"spm", **entry} for lang, entry in TOKENIZERS.items()},
    }
    weights = {"w": torch.ones(3)}
    kept = KeptBest(tmp_path, 2, identity, higher_is_better=False)
    for step, loss in [(1, 5.0), (2, 3.0), (3, 4.0), (4, 9.0), (5, 3.0), (6, 4.0)]:
        kept.offer(step, loss, {}, weights)
    assert [p.name for p in RunDir(tmp_path).kept_files()] == ["best.step2.pt", "best.step5.pt"]
    again = KeptBest(tmp_path, 2, identity, higher_is_better=False)  # finds them on resume
    again.offer(7, 3.0, {}, weights)  # equal to both: the earlier stay
    assert [p.name for p in RunDir(tmp_path).kept_files()] == ["best.step2.pt", "best.step5.pt"]
    again.offer(8, 2.0, {}, weights)
    assert [p.name for p in RunDir(tmp_path).kept_files()] == ["best.step2.pt", "best.step8.pt"]
