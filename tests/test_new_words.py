"""scripts/new_words.py: the share of the references' new words (no training target has them)
that each output carries, folded forms meeting, and on the subset a lexicon covers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "new_words.py"


def load_script():
    return conftest.load_script("new_words")


def main(monkeypatch, capsys, *arguments: str) -> tuple[int, str, str]:
    return conftest.run_script_main("new_words", monkeypatch, capsys, *arguments)


@pytest.mark.parametrize(
    "forms",
    [
        ["cat", "cats"],
        ["box", "boxes"],
        ["city", "cities"],
        ["carry", "carries", "carried", "carrying"],
        ["walk", "walks", "walked", "walking"],
        ["like", "likes", "liked", "liking"],
        ["stop", "stops", "stopped", "stopping"],
        ["agree", "agrees", "agreed"],
        ["need", "needs", "needed"],
        ["glass", "glasses"],
    ],
)
def test_the_forms_of_a_word_fold_together(forms):
    fold = load_script().fold
    assert len({fold(form) for form in forms}) == 1


def test_words_that_only_look_inflected_stay_apart():
    fold = load_script().fold
    assert [fold(w) for w in ["red", "bring", "thing", "bus", "this", "speed"]] == [
        "red",
        "bring",
        "thing",
        "bus",
        "this",
        "speed",
    ]
    assert fold("cats") != fold("cattle")


def test_words_are_lowercase_letter_runs_split_at_apostrophes():
    script = load_script()
    assert script.words("Don't feed Tom's 2 cats!") == ["don", "t", "feed", "tom", "s", "cats"]
    content = [w for w in script.words("Don't feed Tom's 2 cats!") if script.is_content(w)]
    assert content == ["feed", "tom", "cats"]


@pytest.fixture
def split(tmp_path) -> Path:
    """Training targets, a four-pair test split with five new words (cat, dog, home, carry,
    box; like, walk and apple were seen), and a lexicon of two of them."""
    (tmp_path / "train.en").write_text("I like apples.\nHe walked to the store.\n")
    (tmp_path / "test.zh").write_text("她喜欢猫。\n狗走回家。\n我喜欢苹果。\n狗搬了一个箱子。\n")
    (tmp_path / "test.en").write_text(
        "She likes cats.\n"  # new: cat
        "The dogs walk home.\n"  # new: dog, home
        "I like apples.\n"  # none
        "The dog carried a box.\n"  # new: dog, carry, box
    )
    (tmp_path / "lexicon.en").write_text("home; house\ndog\n")  # covers home, dog, dog
    return tmp_path


def test_recall_counts_the_new_words_the_output_carries_in_any_form(split, monkeypatch, capsys):
    # 5 of the 6 occurrences, each in another form than the reference's: all but "home"
    (split / "hyp").write_text(
        "She likes a cat.\nThe dog walks.\nI like apples.\nA dog carries boxes.\n"
    )
    arguments = [
        *["--train", str(split / "train.en"), "--test", str(split / "test")],
        *["--lexicon", str(split / "lexicon.en")],
        *[f"m={split / 'hyp'}", f"r={split / 'test.en'}"],
    ]
    status, out, err = main(monkeypatch, capsys, *arguments)
    assert status == 0, err
    report = json.loads(out)
    assert report["test_pairs"] == 4
    assert report["pairs_with_new_word"] == 3
    assert report["new_word_occurrences"] == 6
    assert report["new_words"] == 5
    assert report["covered_occurrences"] == 3
    assert report["covered_new_words"] == 2
    model = report["m"]
    assert model["recall"] == 83.33  # 5 / 6
    assert model["low"] < model["recall"] <= model["high"] == 100.0
    assert model["covered_recall"] == 66.67  # dog, dog; not home
    assert model["covered_low"] < model["covered_recall"] <= model["covered_high"]
    assert report["r"] == {
        key: 100.0
        for key in ("recall", "low", "high", "covered_recall", "covered_low", "covered_high")
    }
    assert main(monkeypatch, capsys, *arguments)[1] == out  # seeded: the same interval again


def test_without_a_new_word_there_is_no_recall(split, monkeypatch, capsys):
    (split / "train.en").write_text(
        "I like apples. We walk.\nHe carries a box, a cat, dogs home.\n"
    )
    status, out, _ = main(
        monkeypatch,
        capsys,
        *["--train", str(split / "train.en"), "--test", str(split / "test")],
        f"r={split / 'test.en'}",
    )
    report = json.loads(out)
    assert report["new_word_occurrences"] == 0
    assert report["r"] == {"recall": None, "low": None, "high": None}


def test_a_hypothesis_file_of_another_length_is_one_error_naming_it(split):
    (split / "hyp").write_text("She likes a cat.\nThe dog walks.\nI like apples.\n")
    done = subprocess.run(  # the command itself: no traceback, whatever it imports
        [sys.executable, str(SCRIPT), "--train", str(split / "train.en")]
        + ["--test", str(split / "test"), f"m={split / 'hyp'}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # this checkout's attnmt
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"{split / 'hyp'}: 3 lines, but the test split has 4" in done.stderr


def test_a_missing_file_is_named(split, monkeypatch, capsys):
    status, _, err = main(
        monkeypatch, capsys, "--train", str(split / "nope.en"), "--test", str(split / "test"), "m=x"
    )
    assert status == 2
    assert f"{split / 'nope.en'}: file not found" in err


def test_a_chinese_target_is_refused_naming_the_option(split, monkeypatch, capsys):
    status, _, err = main(
        monkeypatch,
        capsys,
        *["--train", str(split / "train.en"), "--test", str(split / "test")],
        *["--src", "en", "--tgt", "zh", f"m={split / 'test.zh'}"],
    )
    assert status == 2
    assert "--tgt zh" in err and "English" in err
