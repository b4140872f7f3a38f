"""scripts/unseen_characters.py picks the test pairs with a character no training source has."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "unseen_characters.py"


def test_only_pairs_with_an_unseen_character_make_the_subset(tmp_path):
    (tmp_path / "train.zh").write_text("我爱你。\n他很好。\n", encoding="utf-8")
    (tmp_path / "test.zh").write_text("我爱他。\n猫很好。\n狗爱你。\n", encoding="utf-8")
    (tmp_path / "test.en").write_text("I love him.\nThe cat is fine.\nThe dog loves you.\n")
    (tmp_path / "lexicon.zh").write_text("猫\n", encoding="utf-8")
    # Right only where every character was seen: lower on the subset (pairs 2 and 3).
    (tmp_path / "hyp").write_text("I love him.\nHe is fine.\nHe loves you.\n")
    (tmp_path / "ref").write_text("I love him.\nThe cat is fine.\nThe dog loves you.\n")
    command = [sys.executable, str(SCRIPT), "--train", str(tmp_path / "train.zh")]
    command += ["--test", str(tmp_path / "test"), "--lexicon", str(tmp_path / "lexicon.zh")]
    done = subprocess.run(
        [*command, f"m={tmp_path / 'hyp'}", f"r={tmp_path / 'ref'}"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["pairs_with_unseen_character"] == 2
    assert report["unseen_characters"] == 2  # 猫, 狗
    assert report["unseen_characters_in_lexicon"] == 1
    assert report["r"]["unseen_bleu"] == 100.0
    assert report["m"]["unseen_bleu"] < report["m"]["bleu"] < 100.0


def test_a_hypothesis_file_of_another_length_is_refused(tmp_path):
    (tmp_path / "train.zh").write_text("我\n", encoding="utf-8")
    (tmp_path / "test.zh").write_text("我\n你\n", encoding="utf-8")
    (tmp_path / "test.en").write_text("I\nyou\n")
    (tmp_path / "hyp").write_text("I\n")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--train", str(tmp_path / "train.zh")]
        + ["--test", str(tmp_path / "test"), f"m={tmp_path / 'hyp'}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "expected NAME=FILE with 2 lines" in done.stderr
