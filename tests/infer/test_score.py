"""Forced decoding (attnmt-score, Translator.score): the training loss's log-probabilities."""

import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.data.corpus import normalize
from attnmt.data.dataset import Batch, pad
from attnmt.infer.translate import Translator
from attnmt.train.loss import TokenLoss
from attnmt.vocab import BOS_ID, EOS_ID

SCRIPT = str(Path(sysconfig.get_path("scripts")) / "attnmt-score")
PAIRS = [
    ("我很好。", "I'm fine."),
    ("他走了。", "He left."),
    ("我们明天去公园。", "We'll go to the park tomorrow."),
    ("", "Nothing."),
    ("你好！", ""),
]


def training_loss(translator, source, target):
    """The summed training loss (label smoothing off) of one pair, batched as in training."""
    ids = [
        np.array(sp.encode(normalize(text, lang), out_type=int), dtype=np.int64)
        for sp, text, lang in (
            (translator.source_sp, source, translator.src_lang),
            (translator.target_sp, target, translator.tgt_lang),
        )
    ]
    loss = TokenLoss(translator.model, label_smoothing=0.0)
    with torch.no_grad():
        batch = Batch(
            pad([ids[0]], None, EOS_ID),
            torch.tensor([len(ids[0]) + 1]),
            pad([ids[1]], BOS_ID, None),
            pad([ids[1]], None, EOS_ID),
        )
        return float(loss(batch)[0])


def test_forced_decoding_scores_are_the_training_losss_log_probabilities(trained_run):
    translator = Translator.load(trained_run / "best.pt")
    sources, targets = zip(*PAIRS, strict=True)
    scores = translator.score(sources, targets, batch_tokens=64)  # several padded batches
    for (source, target), pair in zip(PAIRS, scores, strict=True):
        assert pair.target_pieces[-1] == "</s>"
        assert len(pair.token_log_probs) == len(pair.target_pieces)
        assert all(lp <= 0 for lp in pair.token_log_probs)
        assert pair.log_prob == pytest.approx(-training_loss(translator, source, target), 1e-4)
    alone = translator.score([PAIRS[2][0]], [PAIRS[2][1]])[0]
    assert alone.token_log_probs == pytest.approx(scores[2].token_log_probs, abs=1e-5)


def test_attnmt_score_writes_a_line_per_pair(trained_run, tmp_path):
    source, target = tmp_path / "src.zh", tmp_path / "tgt.en"
    source.write_text("".join(s + "\n" for s, _ in PAIRS), encoding="utf-8")
    target.write_text("".join(t + "\n" for _, t in PAIRS), encoding="utf-8")
    command = [SCRIPT, f"ckpt={trained_run / 'best.pt'}", f"source={source}", f"target={target}"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    expected = Translator.load(trained_run / "best.pt").score(*zip(*PAIRS, strict=True))
    assert len(lines) == len(PAIRS)
    for line, pair in zip(lines, expected, strict=True):
        total, mean, count, pieces = line.split("\t")
        assert float(total) == pytest.approx(pair.log_prob, abs=1e-3)
        assert int(count) == len(pieces.split()) == len(pair.token_log_probs)
        assert float(mean) == pytest.approx(pair.mean, abs=1e-3)


def test_attnmt_score_refuses_files_of_different_lengths(trained_run, tmp_path):
    source, target = tmp_path / "src.zh", tmp_path / "tgt.en"
    source.write_text("我很好。\n他走了。\n", encoding="utf-8")
    target.write_text("I'm fine.\n", encoding="utf-8")
    command = [SCRIPT, f"ckpt={trained_run / 'best.pt'}", f"source={source}", f"target={target}"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 2
    assert f"{source} has 2 lines but {target} has 1" in result.stderr
