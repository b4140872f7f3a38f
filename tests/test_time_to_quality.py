"""scripts/time_to_quality.py reads attnmt's and JoeyNMT's training logs alike."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "time_to_quality.py"


def load_script():
    spec = importlib.util.spec_from_file_location("time_to_quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_validations_of_both_tools_are_read_with_their_minutes(tmp_path):
    script = load_script()
    attnmt, joeynmt = tmp_path / "attnmt", tmp_path / "joeynmt"
    attnmt.mkdir(), joeynmt.mkdir()
    (attnmt / "train.log").write_text(
        "[2026-12-04 17:00:00,000][attnmt][INFO] - run directory: x\n"
        "[2026-12-04 17:01:30,000][attnmt.train.records][INFO] - step 135: dev loss 3.742 "
        "ppl 42.18 BLEU 0.82 chrF 12.02 (best)\n"
        "  hyp: step 9: dev loss 1 ppl 1 BLEU 99\n"  # a sample line, no time stamp: skipped
        "[2026-12-04 17:03:00,000][attnmt.train.records][INFO] - step 270: dev loss 3.0 "
        "ppl 20.1 BLEU 4.5 chrF 16.0 (best)\n",
        encoding="utf-8",
    )
    (joeynmt / "train.log").write_text(
        "2026-12-04 17:05:18,000 - INFO - root - Hello! This is Joey-NMT (version 2.3.0).\n"
        "2026-12-04 17:07:18,000 - INFO - joeynmt.prediction - Evaluation result (greedy): "
        "bleu:   0.30, loss:   4.25, ppl:  69.88, acc:   0.23, 0.0085[sec]\n",
        encoding="utf-8",
    )
    assert script.curve(attnmt) == [(1.5, 0.82), (3.0, 4.5)]
    assert script.curve(joeynmt) == [(2.0, 0.30)]
    assert script.best_by(script.curve(attnmt), 2.0) == 0.82
    assert script.first_reaching(script.curve(attnmt), 4.0) == 3.0
