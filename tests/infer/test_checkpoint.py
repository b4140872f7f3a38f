"""Checkpoint files: atomic writes, safe reads, self-contained models, the inference export."""

import errno
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

from attnmt.data.prepare import prepare_dataset
from attnmt.errors import CheckpointError
from attnmt.infer import checkpoint as ckpt
from attnmt.infer.translate import Translator

SENTENCES = ["我很好。", "你好！", "", "他走了。", "我们明天去公园。"]


def texts(translator, **options):
    return [
        [(h.text, round(h.score, 5)) for h in t.hypotheses]
        for t in translator.translate(SENTENCES, beam_size=3, n_best=2, **options)
    ]


def test_crash_during_a_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    ckpt.save_checkpoint({"format_version": ckpt.FORMAT_VERSION, "step": 1}, path)

    def crash(obj, handle):
        handle.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint({"format_version": ckpt.FORMAT_VERSION, "step": 2}, path)
    assert ckpt.load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_holding_a_malicious_pickle_is_refused(tmp_path):
    marker, path = tmp_path / "pwned", tmp_path / "evil.pt"
    torch.save({"format_version": ckpt.FORMAT_VERSION, "model": Exploit(marker)}, path)
    with pytest.raises(CheckpointError, match="refused"):
        ckpt.load_checkpoint(path)
    assert not marker.exists()


def test_a_full_disk_names_the_file_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    ckpt.save_checkpoint({"format_version": ckpt.FORMAT_VERSION, "step": 1}, path)

    def full(obj, handle):
        handle.write(b"part of a checkpoint")
        raise RuntimeError("unexpected pos") from OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full)
    weights = {"w": torch.zeros(1024, 1024)}  # 4 MB
    with pytest.raises(CheckpointError) as caught:
        ckpt.save_checkpoint({"format_version": ckpt.FORMAT_VERSION, "model": weights}, path)
    message = str(caught.value)
    assert str(path) in message and "no space left" in message and "4.0 MB" in message
    assert "previous last.pt is intact" in message
    assert ckpt.load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_a_checkpoint_copied_alone_translates_as_before(trained_run, tmp_path):
    original = Translator.load(trained_run / "best.pt")
    alone = tmp_path / "elsewhere" / "model.pt"
    alone.parent.mkdir()
    shutil.copy(trained_run / "best.pt", alone)
    assert texts(Translator.load(alone)) == texts(original)
    saved = ckpt.load_checkpoint(alone)
    assert all(isinstance(t["model"], bytes) for t in saved["tokenizers"].values())


def test_a_copied_checkpoint_evaluates_given_source_and_reference(trained_run, tmp_path):
    alone = tmp_path / "model.pt"
    shutil.copy(trained_run / "best.pt", alone)
    data = next((trained_run.parent / "data").glob("*.zh-en.*"))
    source, reference = tmp_path / "test.zh", tmp_path / "test.en"
    shutil.copy(data / "test.zh", source)
    shutil.copy(data / "test.en", reference)
    command = [
        str(Path(sysconfig.get_path("scripts")) / "attnmt-evaluate"),
        f"ckpt={alone}",
        f"source={source}",
        f"reference={reference}",
        "device=cpu",
        "threads=1",
    ]
    result = subprocess.run(command, capture_output=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert b"test: BLEU" in result.stdout
    hypotheses = (tmp_path / "eval" / "test.hyp.en").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == len(source.read_text(encoding="utf-8").splitlines())


def test_rebuilding_the_data_with_another_vocabulary_keeps_older_checkpoints(trained_run):
    from attnmt.config import to_dataclass
    from attnmt.data.config import DataConfig

    before = texts(Translator.load(trained_run / "best.pt"))
    config = ckpt.load_checkpoint(trained_run / "best.pt")["config"]["data"]
    config["vocab"]["tgt_size"] = 240
    folder, manifest, built = prepare_dataset(to_dataclass(DataConfig, config, "data"))
    assert built and manifest["vocab"]["en"]["size"] == 240
    assert len(list(folder.parent.glob("*.zh-en.*"))) == 2  # the run's folder kept beside it
    assert texts(Translator.load(trained_run / "best.pt")) == before
    shutil.rmtree(folder)


def test_checkpoints_that_name_their_tokenizer_files_still_load(trained_run, tmp_path):
    saved = ckpt.load_checkpoint(trained_run / "best.pt")
    for entry in saved["tokenizers"].values():
        del entry["model"]  # the format before tokenizers were embedded
    legacy = tmp_path / "legacy.pt"
    ckpt.save_checkpoint(saved, legacy)
    assert texts(Translator.load(legacy)) == texts(Translator.load(trained_run / "best.pt"))
    saved["tokenizers"]["en"]["path"] = str(tmp_path / "gone.model")
    ckpt.save_checkpoint(saved, legacy)
    with pytest.raises(CheckpointError, match=r"en SentencePiece model .*gone.model is missing"):
        Translator.load(legacy)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_export_is_small_and_translates_like_its_checkpoint(trained_run, tmp_path, dtype):
    exported = tmp_path / "model.pt"
    command = [
        str(Path(sysconfig.get_path("scripts")) / "attnmt-export"),
        f"ckpt={trained_run / 'last.pt'}",
        f"output={exported}",
        f"dtype={dtype}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert str(exported) in result.stdout and "MB" in result.stdout
    assert exported.stat().st_size <= (trained_run / "last.pt").stat().st_size / 2
    saved = ckpt.load_checkpoint(exported)
    assert saved["inference_only"] and "optimizer" not in saved and "rng" not in saved
    assert {t.dtype for t in saved["model"].values() if t.is_floating_point()} == {
        getattr(torch, dtype)
    }
    original = Translator.load(trained_run / "last.pt")
    if dtype == "float32":
        assert texts(Translator.load(exported)) == texts(original)
    else:  # rounded weights: a model that loads and translates every sentence
        assert len(texts(Translator.load(exported))) == len(SENTENCES)


def test_an_export_over_its_checkpoint_or_with_a_bad_dtype_is_refused(trained_run, tmp_path):
    script = str(Path(sysconfig.get_path("scripts")) / "attnmt-export")
    last = trained_run / "last.pt"
    result = subprocess.run([script, f"ckpt={last}", f"output={last}"], capture_output=True)
    assert result.returncode == 2 and b"would replace it" in result.stderr
    out = tmp_path / "m.pt"
    result = subprocess.run(
        [script, f"ckpt={last}", f"output={out}", "dtype=int4"], capture_output=True
    )
    assert result.returncode == 2 and b"dtype='int4'" in result.stderr and not out.exists()
