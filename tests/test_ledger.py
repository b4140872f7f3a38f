"""scripts/ledger.py: an entry written by another study after this one read the ledger is found."""

from tests.conftest import load_script


def load_ledger_module():
    return load_script("ledger")


def test_an_entry_written_by_another_study_is_found(tmp_path):
    ledger = load_ledger_module()
    key = ledger.RunKey("additive", 5, 4000, "fp32", "data", 1, "config", ("trainer.seed=5",))
    figures = {name: 0.5 for name in ledger.FIELDS}
    figures |= {"commit": "c", "cpu": "x", "device": "cpu", "torch": "2", "data_folder": "f"}
    figures |= {"vocab": {"zh": 4, "en": 4}, "bleu_signature": "s"}
    figures |= {split: {"bleu": 1.0, "chrf": 2.0, "stats": [[0] * 10]} for split in ("dev", "test")}
    mine = ledger.Ledger.read(tmp_path)  # empty when this study began
    assert mine.find(key) is None
    ledger.Ledger.read(tmp_path).write(key, figures)  # another study, sharing the folder
    path, entry = mine.find(key)
    assert path.parent == tmp_path and entry["test"]["bleu"] == 1.0
    other = ledger.RunKey("additive", 6, 4000, "fp32", "data", 1, "config", ("trainer.seed=6",))
    assert mine.find(other) is None
