"""scripts/compare.py on tiny runs: every variant trained for the same steps, each run's figures
in the ledger and reused from it (only under an equal key), a corrupt ledger file refused in one
line, and one verdict per variant."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from attnmt import MODEL_CODE_VERSION
from tests.conftest import load_script, tiny_train_overrides

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare.py"
VARIANTS = ("additive", "luong+additive", "guided=0.5")  # a decoder that is no default
KEYS = {"dev_bleu", "bleu", "bleu_std", "chrf", "aer", "entropy", "minutes", "seeds", "verdict"}
KEY_FIELDS = {"variant", "seed", "steps", "precision", "data", "model_code", "config", "overrides"}


def write_gold(folder: Path, corpus: Path) -> Path:
    """A 3-pair gold set (zh-en) from the corpus: each first unit linked to the first."""
    folder.mkdir()
    pairs = [line.split("\t")[:2] for line in corpus.read_text(encoding="utf-8").splitlines()[:3]]
    (folder / "tiny.en").write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    (folder / "tiny.zh").write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    (folder / "tiny.zh-en.gold").write_text("0-0\n0-0 1p1\n0-0\n", encoding="utf-8")
    return folder


def run_study(
    tmp_path: Path, corpus: Path, *options: str, out: str = "study", overrides: tuple = ()
) -> subprocess.CompletedProcess:
    """The script on tiny runs (PYTHONPATH passes on: the runs train this checkout's code)."""
    gold = tmp_path / "gold"
    if not gold.is_dir():
        write_gold(gold, corpus)
    command = [
        sys.executable,
        str(SCRIPT),
        *options,
        "--gold",
        str(gold),
        "--out",
        str(tmp_path / out),
        "--ledger",
        str(tmp_path / "ledger"),
        *tiny_train_overrides(corpus, tmp_path / "data"),
        *overrides,
    ]
    return subprocess.run(command, capture_output=True, text=True)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_study_trains_equal_steps_keeps_a_ledger_and_gives_verdicts(tmp_path, tiny_corpus):
    first = run_study(
        tmp_path, tiny_corpus, "--variants", *VARIANTS, "--seeds", "2", "--steps", "15"
    )
    assert first.returncode == 0, first.stderr[-3000:]
    study = read_json(tmp_path / "study" / "compare.json")
    assert list(study) == list(VARIANTS)
    for entry in study.values():
        assert set(entry) >= KEYS
        assert set(entry["seeds"]) == {"1", "2"}
        bleus = [seed["bleu"] for seed in entry["seeds"].values()]
        assert entry["bleu"] == round(statistics.fmean(bleus), 2)
        assert 0.0 <= entry["aer"] <= 1.0 and entry["entropy"] >= 0.0
        assert entry["train_tokens_per_s"] > 0
    assert study["additive"]["vs_baseline"] is None and study["additive"]["verdict"] is None
    compared = study["guided=0.5"]["vs_baseline"]
    assert set(compared) == {"dev", "test"} and compared["test"]["seeds"] == [1, 2]
    assert 0.0 < compared["dev"]["p_value"] <= 1.0

    # the output ends with one verdict per variant
    verdicts = first.stdout.strip().splitlines()[-2:]
    assert [line.split(":")[0] for line in verdicts] == [
        "luong+additive vs additive",
        "guided=0.5 vs additive",
    ]
    for line in verdicts:
        assert "BLEU on dev (seeds " in line and "; test " in line
        assert ": significant at 5% after Bonferroni (p " in line or ": not significant (p " in line
        assert "0.05/2" in line
    assert verdicts == [study[v]["verdict"] for v in VARIANTS[1:]]

    # every run trained its 15 steps, early stopping and the time cap off, as its variant says
    runs = tmp_path / "study" / "runs"
    luong = OmegaConf.load(runs / "luong_additive" / "seed2" / "config.yaml")
    assert luong.trainer.max_steps == 15 and luong.trainer.seed == 2
    assert luong.trainer.patience is None and luong.trainer.max_time is None
    assert luong.decoder._target_.endswith("LuongDecoder") and luong.decoder.input_feeding
    assert luong.attention._target_.endswith("AdditiveAttention")
    guided = OmegaConf.load(runs / "guided_0.5" / "seed1" / "config.yaml")
    assert guided.trainer.guided_alignment == 0.5

    # the ledger: one file per run, its key and the per-sentence statistics of dev and test
    ledger = tmp_path / "ledger"
    files = sorted(ledger.glob("*.json"))
    assert len(files) == 6
    entry = read_json(ledger / Path(study["guided=0.5"]["seeds"]["2"]["ledger"]).name)
    key = entry["key"]
    assert set(key) == KEY_FIELDS
    assert (key["variant"], key["seed"], key["steps"]) == ("guided=0.5", 2, 15)
    assert key["model_code"] == MODEL_CODE_VERSION and key["precision"] in {"bf16", "fp32"}
    assert "trainer.guided_alignment=0.5" in key["overrides"]
    assert not any(o.startswith(("hydra.", "data.processed_dir=")) for o in key["overrides"])
    assert entry["vocab"] == {"zh": 450, "en": 250} and entry["torch"] and entry["cpu"]
    for split in ("dev", "test"):
        assert len(entry[split]["stats"]) == 20 and {len(s) for s in entry[split]["stats"]} == {10}

    # a second study (another --out) trains and evaluates nothing: every run is in the ledger,
    # though it names the precision the runs trained in and another thread count
    assert not any(o.startswith(("trainer.threads=", "trainer.amp=")) for o in key["overrides"])
    amp = "true" if key["precision"] == "bf16" else "false"
    again = run_study(
        tmp_path,
        tiny_corpus,
        *("--variants", *VARIANTS, "--seeds", "2", "--steps", "15"),
        out="again",
        overrides=(f"trainer.amp={amp}", "trainer.threads=2"),
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert not (tmp_path / "again" / "runs").exists()
    assert again.stdout.count("in the ledger") == 6
    assert again.stdout.strip().splitlines()[-2:] == verdicts
    reused = read_json(tmp_path / "again" / "compare.json")
    assert reused["guided=0.5"]["seeds"]["1"]["bleu"] == study["guided=0.5"]["seeds"]["1"]["bleu"]

    # an entry whose key differs in one field is not reused: that run alone trains again
    edited = next(path for path in files if path.name.startswith("additive.seed1."))
    entry = read_json(edited)
    entry["key"]["model_code"] = MODEL_CODE_VERSION - 1
    edited.write_text(json.dumps(entry), encoding="utf-8")
    third = run_study(
        tmp_path,
        tiny_corpus,
        "--variants",
        "additive",
        "--seeds",
        "2",
        "--steps",
        "15",
        out="again",
    )
    assert third.returncode == 0, third.stderr[-3000:]
    assert "additive seed 1: written to the ledger" in third.stdout
    assert "additive seed 2: in the ledger" in third.stdout
    assert (tmp_path / "again" / "runs" / "additive" / "seed1" / "best.pt").is_file()
    assert not (tmp_path / "again" / "runs" / "additive" / "seed2").exists()
    assert read_json(edited)["key"]["model_code"] == MODEL_CODE_VERSION  # the entry replaced
    assert len(list(ledger.glob("*.json"))) == 6

    # a run that ended without a best.pt is left out, said so, and the study goes on
    (tmp_path / "again" / "runs" / "additive" / "seed1" / "best.pt").unlink()
    edited.unlink()
    fourth = run_study(
        tmp_path,
        tiny_corpus,
        "--variants",
        "additive",
        "--seeds",
        "2",
        "--steps",
        "15",
        out="again",
    )
    assert fourth.returncode == 0, fourth.stderr[-3000:]
    assert "left out: additive seed 1" in fourth.stdout and "no best.pt" in fourth.stdout
    assert list(read_json(tmp_path / "again" / "compare.json")["additive"]["seeds"]) == ["2"]

    # a run directory of another step budget is not reused or resumed
    other = run_study(
        tmp_path, tiny_corpus, "--variants", "additive", "--seeds", "1", "--steps", "16"
    )
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "trainer.max_steps=15, not trainer.max_steps=16" in other.stderr

    # --train-seeds: seed 3 alone trains; seed 2 comes from the ledger, 1 and 4 are left out
    options = ("--variants", "additive", "--seeds", "4", "--steps", "15")
    shared = run_study(tmp_path, tiny_corpus, *options, "--train-seeds", "3", out="shared")
    assert shared.returncode == 0, shared.stderr[-3000:]
    assert "additive seed 2: in the ledger" in shared.stdout
    assert "additive seed 3: written to the ledger" in shared.stdout
    for seed in (1, 4):
        assert f"left out: additive seed {seed} " in shared.stdout
    assert [p.name for p in (tmp_path / "shared" / "runs" / "additive").iterdir()] == ["seed3"]
    outside = run_study(tmp_path, tiny_corpus, *options, "--train-seeds", "5", out="shared")
    assert outside.returncode == 2 and "--train-seeds: seeds of 1..4" in outside.stderr


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('{"key": {"variant": "additive"', "not JSON"),
        ("[1, 2]", "not a ledger entry"),
        ('{"key": {}, "commit": null}', "missing cpu, device"),
    ],
)
def test_a_corrupt_ledger_file_is_one_error_naming_it(tmp_path, tiny_corpus, text, complaint):
    (tmp_path / "ledger").mkdir()
    bad = tmp_path / "ledger" / "additive.seed1.json"
    bad.write_text(text, encoding="utf-8")
    result = run_study(tmp_path, tiny_corpus, "--variants", "additive", "--steps", "15")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(bad) in result.stderr and complaint in result.stderr
    assert not (tmp_path / "study").exists()


def test_the_study_counts_steps_and_names_its_variants(tmp_path, tiny_corpus):
    minutes = run_study(tmp_path, tiny_corpus, "--minutes", "4")
    assert minutes.returncode == 2 and "counts steps" in minutes.stderr
    no_budget = run_study(
        tmp_path, tiny_corpus, "--variants", "additive", overrides=("trainer.max_steps=null",)
    )
    assert no_budget.returncode == 2 and "Traceback" not in no_budget.stderr
    assert "--steps N" in no_budget.stderr
    unknown = run_study(tmp_path, tiny_corpus, "--variants", "luong-nofeed+cosine", "--steps", "15")
    assert unknown.returncode == 2 and "[DECODER+]SCORER" in unknown.stderr


@pytest.mark.parametrize(
    ("log", "kernels"),
    [
        ("[x][attnmt.model.native][INFO] - fused C++ GRU: on\n", "C++"),
        ("[x][attnmt.model.native][INFO] - fused C++ GRU: off: ATTNMT_NATIVE=0\n", "torch"),
        ("[x][attnmt.train.build][INFO] - training precision: torch.bfloat16\n", None),
    ],
)
def test_an_entry_says_what_ran_fp32_s_element_wise_work(tmp_path, log, kernels):
    load_script("ledger")  # compare.py imports it by name, as scripts/ on its path does
    compare = load_script("compare")
    (tmp_path / "train.log").write_text(log, encoding="utf-8")
    assert compare.logged_kernels(tmp_path) == kernels
    assert compare.logged_kernels(tmp_path / "no-run") is None


@pytest.mark.parametrize(
    ("variant", "decoder"),
    [
        (
            "luong-nofeed+dot",
            {"_target_": "attnmt.model.decoder.LuongDecoder", "input_feeding": False},
        ),
        ("luong+dot", {"_target_": "attnmt.model.decoder.LuongDecoder", "input_feeding": True}),
        ("bahdanau+dot", {"_target_": "attnmt.model.decoder.BahdanauDecoder"}),
    ],
)
def test_a_decoder_preset_composes_its_decoder(variant, decoder):
    load_script("ledger")  # compare.py imports it by name, as scripts/ on its path does
    compare = load_script("compare")
    config = compare.composed(compare.variant_overrides(compare.variant_name(variant)))
    assert config["decoder"] | decoder == config["decoder"]
    assert config["attention"]["_target_"].endswith(".DotAttention")


def test_two_ways_of_asking_for_one_model_have_one_config_digest():
    # what lets the ledger reuse a run however its variant asked for it (scripts/ledger.py)
    load_script("ledger")
    compare = load_script("compare")

    def digest(overrides):
        return compare.config_digest(compare.composed(overrides))

    preset = digest(compare.variant_overrides("luong-nofeed+additive"))
    assert preset == digest(["decoder.input_feeding=false", "decoder=luong"])
    assert preset == digest(["decoder=luong_nofeed"]) == digest([])  # the recipe's decoder
    assert preset != digest(compare.variant_overrides("luong+additive"))
    assert preset != digest(["decoder=luong", "decoder.input_feeding=false", "trainer.seed=2"])
