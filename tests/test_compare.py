"""scripts/compare.py: the scorer study's JSON on tiny runs, and that a rerun reuses them."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

from tests.conftest import tiny_train_overrides

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare.py"
KEYS = {"bleu", "bleu_std", "chrf", "p_value", "aer", "entropy", "train_tokens_per_s", "seeds"}


def write_gold(folder: Path, corpus: Path) -> Path:
    """A 3-pair gold set (zh-en) from the corpus: each first unit linked to the first."""
    folder.mkdir()
    pairs = [line.split("\t")[:2] for line in corpus.read_text(encoding="utf-8").splitlines()[:3]]
    (folder / "tiny.en").write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    (folder / "tiny.zh").write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    (folder / "tiny.zh-en.gold").write_text("0-0\n0-0 1p1\n0-0\n", encoding="utf-8")
    return folder


def run_study(tmp_path: Path, corpus: Path, gold: Path, *options: str):
    command = [
        sys.executable,
        str(SCRIPT),
        *(options or ("--variants", "additive", "local_p", "guided")),
        "--seeds",
        "2",
        "--gold",
        str(gold),
        "--out",
        str(tmp_path / "study"),
        *tiny_train_overrides(corpus, tmp_path / "data"),
        "trainer.max_steps=15",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if options:
        return result
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((tmp_path / "study" / "compare.json").read_text(encoding="utf-8"))


def test_the_study_reports_every_variant_per_seed_and_reuses_its_runs(tmp_path, tiny_corpus):
    gold = write_gold(tmp_path / "gold", tiny_corpus)
    study = run_study(tmp_path, tiny_corpus, gold)

    assert list(study) == ["additive", "local_p", "guided"]
    for entry in study.values():
        assert set(entry) >= KEYS
        assert set(entry["seeds"]) == {"1", "2"}
        bleus = [seed["bleu"] for seed in entry["seeds"].values()]
        assert entry["bleu"] == round(statistics.fmean(bleus), 2)
        assert 0.0 <= entry["aer"] <= 1.0
        assert entry["entropy"] >= 0.0
        assert entry["train_tokens_per_s"] > 0
    assert study["additive"]["p_value"] is None
    p_values = [seed["p_value"] for seed in study["guided"]["seeds"].values()]
    assert all(0.0 <= p <= 1.0 for p in p_values)
    assert study["guided"]["p_value"] == max(p_values)
    runs = tmp_path / "study" / "runs"
    assert (runs / "guided" / "seed2" / "best.pt").is_file()
    config = (runs / "guided" / "seed2" / ".hydra" / "config.yaml").read_text(encoding="utf-8")
    assert (
        "guided_alignment: 1.0" in config
        and "_target_: attnmt.model.attention.AdditiveAttention" in config
    )
    assert (tmp_path / "study" / "compare.md").is_file()
    assert (tmp_path / "study" / "compare.png").is_file()

    checkpoints = sorted(runs.glob("*/seed*/best.pt"))
    assert len(checkpoints) == 6
    written = [path.stat().st_mtime_ns for path in checkpoints]
    again = run_study(tmp_path, tiny_corpus, gold)
    assert [path.stat().st_mtime_ns for path in checkpoints] == written  # nothing retrained
    assert again["guided"]["seeds"]["1"]["bleu"] == study["guided"]["seeds"]["1"]["bleu"]
    other = run_study(tmp_path, tiny_corpus, gold, "--variants", "guided", "--guided-weight", "2")
    assert other.returncode and "trained with trainer.guided_alignment=1.0" in other.stderr
