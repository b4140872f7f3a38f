"""scripts/dictionary_recall.py: the kept headwords, matched against their glosses by band and
kind, from translations given or a model's."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dictionary_recall.py"
CEDICT = """\
碼頭 码头 [ma3 tou2] /dock; pier; wharf/
北京 北京 [Bei3 jing1] /Beijing/
充電器 充电器 [chong1 dian4 qi4] /battery charger/
好 好 [hao3] /good/well/
一心一意 一心一意 [yi1 xin1 yi1 yi4] /heart set on/single-minded/
歌詞 歌词 [ge1 ci2] /lyrics/
"""
COUNTS = "好 900\n北京 500\n码头 100\n充电器 50\n一心一意 40\n歌词 30\n"


def run(tmp_path, *options):
    cedict = tmp_path / "cedict.txt"
    cedict.write_text(CEDICT, encoding="utf-8")
    counts = tmp_path / "counts.txt"
    counts.write_text(COUNTS, encoding="utf-8")
    command = [sys.executable, str(SCRIPT), "--cedict", str(cedict)]
    command += ["--frequency-list", str(counts), "--keep-top", "5", "--bands", "2", "5"]
    return subprocess.run([*command, *options], capture_output=True, text=True)


def test_headwords_match_their_glosses_by_band_and_kind(tmp_path):
    sources = tmp_path / "sources.zh"
    glosses = tmp_path / "glosses.en"
    assert run(tmp_path, "--sources", str(sources), "--glosses", str(glosses)).returncode == 0
    assert glosses.read_text().splitlines()[:3] == ["good", "well", "Beijing"]
    # the 5 most common (歌词 not kept), most common first
    assert sources.read_text(encoding="utf-8").split() == [
        "好",
        "北京",
        "码头",
        "充电器",
        "一心一意",
    ]
    hypotheses = tmp_path / "hyp.en"
    # 好: exact ("well"); 北京: wrong; 码头: "the pier" exact (article dropped);
    # 充电器: "a battery charger for phones" contains "battery charger" in its first 4 words;
    # 一心一意: "to be single-minded" is not "single-minded" (only a leading "to" is dropped)
    hypotheses.write_text(
        "Well.\nShanghai\nthe pier\na battery charger for phones\nto be single-minded\n"
    )
    done = run(tmp_path, "--hypotheses", str(hypotheses))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["1-2"] == {
        "proper noun": {"headwords": 1, "exact": 0.0, "contained": 0.0},
        "single character": {"headwords": 1, "exact": 1.0, "contained": 1.0},
    }
    assert report["3-5"]["word"] == {"headwords": 2, "exact": 0.5, "contained": 1.0}
    assert report["3-5"]["four characters"] == {"headwords": 1, "exact": 0.0, "contained": 1.0}
    assert report["all"]["word"]["headwords"] == 2

    # more than --max-words words before the gloss: not contained
    hypotheses.write_text("good\nBeijing\nit is a big charger\nthe battery charger\nheart set on\n")
    report = json.loads(run(tmp_path, "--hypotheses", str(hypotheses), "--max-words", "2").stdout)
    assert report["3-5"]["word"] == {"headwords": 2, "exact": 0.5, "contained": 0.5}
    assert report["1-2"]["proper noun"]["exact"] == 1.0


def test_bad_input_is_one_line_naming_it(tmp_path):
    short = tmp_path / "short.en"
    short.write_text("good\n")
    done = run(tmp_path, "--hypotheses", str(short))
    assert done.returncode == 1 and "short.en: 1 lines, but 5 headwords are kept" in done.stderr
    assert "Traceback" not in done.stderr
    missing = run(tmp_path, "--hypotheses", str(tmp_path / "none.en"))
    assert "none.en" in missing.stderr and "Traceback" not in missing.stderr
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--sources", "x", "--frequency-list", str(tmp_path / "no")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "no: frequency list not found" in done.stderr
    bands = run(tmp_path, "--sources", "x", "--bands", "5", "2")
    assert bands.returncode == 2 and "rising rank edges" in bands.stderr


def test_a_model_translates_the_headwords(tmp_path, trained_run):
    done = run(tmp_path, "--ckpt", str(trained_run / "best.pt"), "--beam-size", "2")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sum(k["headwords"] for k in report["all"].values()) == 5
