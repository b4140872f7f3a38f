"""scripts/paragraphs.py: test pairs three at a time as paragraphs, translated whole and split
into sentences, each scored against the joined references."""

import json
from pathlib import Path

import pytest

from attnmt.infer.translate import SearchConfig, Translator
from tests import conftest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "paragraphs.py"


def load_script():
    return conftest.load_script("paragraphs")


def main(monkeypatch, capsys, *arguments: str) -> tuple[int, str, str]:
    return conftest.run_script_main("paragraphs", monkeypatch, capsys, *arguments)


def test_three_pairs_make_a_paragraph_and_a_last_shorter_group_is_dropped():
    paragraphs = load_script().paragraphs
    zh = ["我饿了。", "你呢？", "他走了。", "好。", "是的。", "不。", "多余。"]
    en = ["I'm hungry.", "And you?", "He left.", "Good.", "Yes.", "No.", "Extra."]
    assert paragraphs(zh, "zh") == ["我饿了。你呢？他走了。", "好。是的。不。"]
    assert paragraphs(en, "en") == ["I'm hungry. And you? He left.", "Good. Yes. No."]
    assert paragraphs(zh[:2], "zh") == []


@pytest.fixture
def seven_pairs(trained_run, tmp_path) -> Path:
    """The stem of the first 7 test pairs of the trained run's data: 2 paragraphs."""
    folder = Translator.load(trained_run / "best.pt").dataset_folder
    for lang in ("zh", "en"):
        lines = (folder / f"test.{lang}").read_text(encoding="utf-8").splitlines()[:7]
        (tmp_path / f"test.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return tmp_path / "test"


def test_the_report_scores_both_ways_on_each_paragraph(
    trained_run, seven_pairs, monkeypatch, capsys
):
    arguments = ["--ckpt", str(trained_run / "best.pt"), "--test", str(seven_pairs)]
    status, out, err = main(monkeypatch, capsys, *arguments, "--beam-size", "2")
    assert status == 0, err
    report = json.loads(out)
    assert report["paragraphs"] == 2 and report["beam_size"] == 2
    assert set(report["whole"]) == {"bleu", "chrf", "truncated"}
    assert set(report["split"]) == {"bleu", "chrf", "truncated", "sentences"}
    assert report["split"]["sentences"] == 6  # the split finds the six test pairs again
    assert all(
        0.0 <= report[way][key] <= 100.0 for way in ("whole", "split") for key in ("bleu", "chrf")
    )
    assert report["signature"].startswith("nrefs:1|")
    status, out, _ = main(monkeypatch, capsys, *arguments, "--beam-size", "2", "--limit", "1")
    assert json.loads(out)["paragraphs"] == 1


def test_split_translates_each_sentence_and_whole_the_paragraph(trained_run, seven_pairs):
    script = load_script()
    translator = Translator.load(trained_run / "best.pt")
    sources = seven_pairs.with_suffix(".zh").read_text(encoding="utf-8").splitlines()
    texts = script.paragraphs(sources, "zh")
    search = SearchConfig(beam_size=2)
    both = script.translate_both(translator, texts, search)
    assert len(both.whole) == len(both.split) == 2
    assert [len(p.sentences) for p in both.split] == [3, 3]
    alone = translator.translate(sources[:6], search)  # the six sentences, in one batch
    assert [p.text for p in both.split] == [
        " ".join(t.text for t in alone[:3]),
        " ".join(t.text for t in alone[3:]),
    ]
    assert [t.text for t in both.whole] == [t.text for t in translator.translate(texts, search)]
    for whole, group in zip(both.whole, (alone[:3], alone[3:]), strict=True):  # one input
        assert len(whole.source_pieces) > max(len(t.source_pieces) for t in group)


def test_a_direction_the_checkpoint_does_not_translate_is_refused(
    trained_run, seven_pairs, monkeypatch, capsys
):
    status, _, err = main(
        monkeypatch,
        capsys,
        *["--ckpt", str(trained_run / "best.pt"), "--test", str(seven_pairs)],
        *["--src", "en", "--tgt", "zh"],
    )
    assert status == 2
    assert "--src en --tgt zh" in err and "translates zh->en" in err
