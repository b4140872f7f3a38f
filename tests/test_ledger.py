"""scripts/ledger.py: an entry written by another study after this one read the ledger is found;
an entry stands for its model however the run was asked for (variant and overrides), and for no
other model; an optional figure is written where the run has it, and an entry without it still
reads."""

import dataclasses
import re

import pytest

from tests.conftest import load_script


def load_ledger_module():
    return load_script("ledger")


def figures_of(ledger):
    figures = {name: 0.5 for name in ledger.FIELDS}
    figures |= {"commit": "c", "cpu": "x", "device": "cpu", "torch": "2", "data_folder": "f"}
    figures |= {"vocab": {"zh": 4, "en": 4}, "bleu_signature": "s"}
    return figures | {s: {"bleu": 1.0, "chrf": 2.0, "stats": [[0] * 10]} for s in ("dev", "test")}


def test_an_entry_written_by_another_study_is_found(tmp_path):
    ledger = load_ledger_module()
    key = ledger.RunKey("additive", 5, 4000, "fp32", "data", 1, "config", ("trainer.seed=5",))
    figures = figures_of(ledger)
    mine = ledger.Ledger.read(tmp_path)  # empty when this study began
    assert mine.find(key) is None
    ledger.Ledger.read(tmp_path).write(key, figures)  # another study, sharing the folder
    path, entry = mine.find(key)
    assert path.parent == tmp_path and entry["test"]["bleu"] == 1.0
    other = ledger.RunKey("additive", 6, 4000, "fp32", "data", 1, "config", ("trainer.seed=6",))
    assert mine.find(other) is None


def test_what_ran_the_element_wise_work_is_written_and_an_entry_without_it_reads(tmp_path):
    ledger = load_ledger_module()
    with_it = ledger.RunKey("additive", 1, 8000, "fp32", "data", 1, "config", ("trainer.seed=1",))
    without = ledger.RunKey("additive", 2, 8000, "fp32", "data", 1, "config", ("trainer.seed=2",))
    ledger.Ledger.read(tmp_path).write(with_it, figures_of(ledger) | {"kernels": "C++"})
    ledger.Ledger.read(tmp_path).write(without, figures_of(ledger))
    read = ledger.Ledger.read(tmp_path)
    assert read.find(with_it)[1]["kernels"] == "C++"
    assert "kernels" not in read.find(without)[1]


def test_an_entry_stands_for_its_model_however_the_run_was_asked_for(tmp_path):
    ledger = load_ledger_module()
    asked = ("trainer.seed=1", "decoder=luong", "decoder.input_feeding=false", "attention=additive")
    written = ledger.RunKey("luong-nofeed+additive", 1, 8000, "fp32", "data", 1, "config", asked)
    ledger.Ledger.read(tmp_path).write(written, figures_of(ledger))
    assert [p.name for p in tmp_path.iterdir()] == [written.file_name()]  # nothing left aside
    # the same resolved config, asked for as the recipe's own decoder: the same model
    same = ledger.RunKey("additive", 1, 8000, "fp32", "data", 1, "config", ("trainer.seed=1",))
    read = ledger.Ledger.read(tmp_path)
    assert read.find(same)[1]["key"]["variant"] == "luong-nofeed+additive"
    # and written by a study that asked for it so: the entry already there is kept
    assert read.write(same, figures_of(ledger))[0].name == written.file_name()
    assert len(list(tmp_path.iterdir())) == 1
    # any field of the model differing: another model, not reused
    for field in ledger.MODEL_FIELDS:
        value = getattr(same, field)
        other = dataclasses.replace(same, **{field: value + 1 if isinstance(value, int) else "x"})
        assert read.find(other) is None, field
    # two files of one model, as a hand-made copy leaves: refused, naming both
    twin = tmp_path / "copy.json"
    twin.write_bytes((tmp_path / written.file_name()).read_bytes())
    with pytest.raises(ledger.LedgerError, match=re.escape(written.file_name())) as refused:
        ledger.Ledger.read(tmp_path)
    assert str(twin) in str(refused.value)
