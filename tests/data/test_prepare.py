import json
import subprocess
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from attnmt.config import to_dataclass
from attnmt.data import corpus
from attnmt.data.config import DataConfig
from attnmt.data.ids import TokenIds
from attnmt.data.prepare import prepare_dataset, summary_table
from attnmt.data.split import SPLITS
from attnmt.data.tokenizer import decode, load_sentencepiece
from attnmt.errors import ConfigError, DataError
from attnmt.vocab import UNK_ID
from tests.conftest import compose_config, plain, small_data_overrides


def data_config(overrides: list[str]) -> DataConfig:
    return to_dataclass(DataConfig, plain(compose_config("prepare", overrides).data), "data")


def test_build_writes_splits_models_ids_and_manifest(small_corpus, tmp_path):
    folder, manifest, built = prepare_dataset(
        data_config(small_data_overrides(small_corpus, tmp_path))
    )
    assert built and folder.parent == tmp_path and folder.name.startswith("tatoeba.zh-en.")
    assert manifest["config"]["vocab"]["src_size"] == 1000  # which config made the folder
    assert manifest["counts"]["dev"] == 100 and manifest["counts"]["test"] == 100
    assert manifest["read"] == 1200
    assert manifest["sources"][0]["sha256"]
    assert manifest["vocab"]["zh"]["size"] == 1000
    on_disk = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk == manifest
    # ids on disk decode back to the split's text
    sp = load_sentencepiece(folder / "spm.en.model")
    ids = TokenIds(folder, "dev", "en")
    lines = (folder / "dev.en").read_text(encoding="utf-8").splitlines()
    assert len(ids) == len(lines) == 100
    assert sp.decode(ids[3].tolist()) == lines[3]


def test_rerun_is_a_noop_and_a_changed_config_rebuilds(small_corpus, tmp_path):
    overrides = small_data_overrides(small_corpus, tmp_path)
    folder, _, _ = prepare_dataset(data_config(overrides))
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    _, _, built = prepare_dataset(data_config(overrides))
    assert not built and (folder / "manifest.json").stat().st_mtime_ns == stamp
    _, manifest, built = prepare_dataset(data_config([*overrides, "data.vocab.tgt_size=550"]))
    assert built and manifest["vocab"]["en"]["size"] == 550


def test_changed_input_rebuilds(small_corpus, tmp_path):
    copy = tmp_path / "copy.txt"
    copy.write_bytes(small_corpus.read_bytes())
    overrides = small_data_overrides(copy, tmp_path / "out")
    prepare_dataset(data_config(overrides))
    with open(copy, "a", encoding="utf-8") as handle:
        handle.write("New line.\t新的一行。\tx\n")
    _, manifest, built = prepare_dataset(data_config(overrides))
    assert built and manifest["read"] == 1201


def test_same_seed_gives_byte_identical_outputs(small_corpus, tmp_path):
    folders = [
        prepare_dataset(data_config(small_data_overrides(small_corpus, tmp_path / name)))[0]
        for name in ("a", "b")
    ]
    files = sorted(p.name for p in folders[0].iterdir())
    assert files == sorted(p.name for p in folders[1].iterdir())
    for name in files:
        if name != "manifest.json":
            assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes(), name
    manifests = [json.loads((f / "manifest.json").read_text(encoding="utf-8")) for f in folders]
    for manifest in manifests:  # the one thing that differs: where each was asked to go
        manifest["config"].pop("processed_dir")
    assert manifests[0] == manifests[1]


def test_reverse_direction_and_joint_vocabulary(small_corpus, tmp_path):
    overrides = [
        *small_data_overrides(small_corpus, tmp_path),
        "data.src_lang=en",
        "data.tgt_lang=zh",
        "data.vocab.joint=true",
        "data.vocab.joint_size=1500",
    ]
    folder, manifest, _ = prepare_dataset(data_config(overrides))
    assert folder.name.startswith("tatoeba.en-zh.")
    assert manifest["vocab"] == {
        "en": {"model": "spm.joint.model", "size": 1500},
        "zh": {"model": "spm.joint.model", "size": 1500},
    }


def test_files_source_reads_two_aligned_files(small_corpus, tmp_path):
    rows = [line.split("\t") for line in small_corpus.read_text(encoding="utf-8").splitlines()]
    en, zh = tmp_path / "c.en", tmp_path / "c.zh"
    en.write_text("".join(r[0] + "\n" for r in rows), encoding="utf-8")
    zh.write_text("".join(r[1] + "\n" for r in rows), encoding="utf-8")
    overrides = small_data_overrides(small_corpus, tmp_path)
    overrides += ["data=files", f"data.en_path={en}", f"data.zh_path={zh}"]
    folder, manifest, _ = prepare_dataset(data_config(overrides))
    assert folder.name.startswith("files.zh-en.") and manifest["read"] == 1200


def test_missing_corpus_names_path_and_how_to_get_it(tmp_path):
    missing = tmp_path / "nope" / "cmn.txt"
    cfg = data_config([f"data.raw_path={missing}", "data.url=http://127.0.0.1:9/cmn-eng.zip"])
    with pytest.raises(DataError, match=rf"{missing}.*download failed.*by hand"):
        prepare_dataset(cfg)


def test_corpus_empty_after_cleaning_is_an_error(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("Hi.\t \tx\n \t嗨\tx\n", encoding="utf-8")
    cfg = data_config(
        [f"data.raw_path={path}", "data.sha256=null", f"data.processed_dir={tmp_path}"]
    )
    with pytest.raises(DataError, match="no pairs left after cleaning"):
        prepare_dataset(cfg)
    assert not list(tmp_path.glob("tatoeba.zh-en*"))


def test_vocabulary_too_large_names_the_key_and_writes_nothing(small_corpus, tmp_path):
    overrides = [*small_data_overrides(small_corpus, tmp_path), "data.vocab.tgt_size=50000"]
    with pytest.raises(DataError, match="data.vocab.tgt_size=50000"):
        prepare_dataset(data_config(overrides))
    assert list(Path(tmp_path).iterdir()) == []


def test_wrong_sha256_is_an_error(small_corpus, tmp_path):
    overrides = [*small_data_overrides(small_corpus, tmp_path), "data.sha256=abc"]
    with pytest.raises(DataError, match="data.sha256"):
        prepare_dataset(data_config(overrides))


def test_interrupted_build_is_not_trusted(small_corpus, tmp_path):
    cfg = data_config(small_data_overrides(small_corpus, tmp_path))
    leftover = tmp_path / f".{cfg.folder.name}.tmp-123"
    leftover.mkdir()
    (leftover / "train.en").write_text("half", encoding="utf-8")
    _, _, built = prepare_dataset(cfg)
    assert built and not leftover.exists()


def test_unknown_and_invalid_keys_are_config_errors():
    with pytest.raises(ConfigError, match="data.colour"):
        to_dataclass(DataConfig, {"name": "x", "colour": 1}, "data")
    with pytest.raises(ConfigError, match="missing config key data.source"):
        to_dataclass(DataConfig, {"name": "x"}, "data")
    with pytest.raises(ConfigError, match="data.src_lang='fr': must be 'zh' or 'en'"):
        data_config(["data.src_lang=fr"])


def test_given_splits_are_kept_as_they_are(small_corpus, tmp_path):
    rows = [line.split("\t") for line in small_corpus.read_text(encoding="utf-8").splitlines()]
    given = tmp_path / "given"
    given.mkdir()
    for split, part in (("train", rows[:1000]), ("dev", rows[1000:1100]), ("test", rows[1100:])):
        for lang, column in (("en", 0), ("zh", 1)):
            text = "".join(r[column] + "\n" for r in part)
            (given / f"{split}.{lang}").write_text(text, encoding="utf-8")
    overrides = [*small_data_overrides(small_corpus, tmp_path), "data=splits"]
    _, manifest, _ = prepare_dataset(data_config([*overrides, f"data.split_dir={given}"]))
    for split, part in (("dev", rows[1000:1100]), ("test", rows[1100:])):
        clean = {(corpus.normalize(r[0], "en"), corpus.normalize(r[1], "zh")) for r in part}
        assert manifest["counts"][split] == len(clean)
    with pytest.raises(DataError, match=r"missing/train.en: file not found"):
        prepare_dataset(data_config([*overrides, f"data.split_dir={tmp_path / 'missing'}"]))


def test_a_sentence_that_looks_like_a_compressed_file_is_just_text(small_corpus, tmp_path):
    # A corpus, or a staging file read back, that begins with "BZh" (bzip2's first bytes) but
    # not with a bzip2 block is plain text.
    corpus_file = tmp_path / "bzh.txt"
    first = "BZh9 is how a bzip2 file begins.\t这是bzip2文件的开头。\tattribution\n"
    corpus_file.write_text(first + small_corpus.read_text(encoding="utf-8"), encoding="utf-8")
    folder, manifest, _ = prepare_dataset(data_config(small_data_overrides(corpus_file, tmp_path)))
    assert manifest["read"] == 1201
    texts = "".join((folder / f"{split}.en").read_text(encoding="utf-8") for split in SPLITS)
    assert "BZh9 is how a bzip2 file begins.\n" in texts


def test_sentencepiece_samples_only_beyond_max_sentences(small_corpus, tmp_path):
    def model_bytes(name, *extra):
        overrides = [
            *small_data_overrides(small_corpus, tmp_path / name),
            "data.vocab.src_size=800",
            *extra,
        ]
        folder, manifest, _ = prepare_dataset(data_config(overrides))
        return (folder / "spm.en.model").read_bytes(), manifest

    whole, manifest = model_bytes("whole")
    assert manifest["counts"]["train"] > 900
    # a cap above the training sentences leaves the model byte for byte as it was
    assert model_bytes("roomy", "data.vocab.max_sentences=100000")[0] == whole
    sampled, manifest = model_bytes("sampled", "data.vocab.max_sentences=900")
    assert sampled != whole and manifest["vocab"]["en"]["size"] == 600
    # the sample is drawn with a fixed seed: a rerun gives the same model
    assert model_bytes("again", "data.vocab.max_sentences=900")[0] == sampled


def test_a_folder_for_the_corpus_and_an_uncreatable_output_folder_are_named(small_corpus, tmp_path):
    overrides = small_data_overrides(small_corpus, tmp_path)
    with pytest.raises(DataError, match=r"is a folder; data.raw_path names the corpus file"):
        prepare_dataset(data_config([*overrides, f"data.raw_path={tmp_path}"]))
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"data.processed_dir=.*file.txt/out: cannot create"):
        prepare_dataset(data_config([*overrides, f"data.processed_dir={blocker / 'out'}"]))


def test_two_vocabulary_sizes_get_their_own_folders(small_corpus, tmp_path):
    overrides = small_data_overrides(small_corpus, tmp_path)
    first, _, _ = prepare_dataset(data_config(overrides))
    model = (first / "spm.en.model").read_bytes()
    second, manifest, built = prepare_dataset(data_config([*overrides, "data.vocab.tgt_size=500"]))
    assert built and second != first and manifest["vocab"]["en"]["size"] == 500
    assert (first / "spm.en.model").read_bytes() == model  # the first run's data untouched
    _, _, rebuilt = prepare_dataset(data_config(overrides))
    assert not rebuilt


def test_a_bpe_vocabulary_builds_and_round_trips(small_corpus, tmp_path):
    overrides = [*small_data_overrides(small_corpus, tmp_path), "data.vocab.model_type=bpe"]
    folder, manifest, _ = prepare_dataset(data_config(overrides))
    model = load_sentencepiece(folder / "spm.en.model")
    assert manifest["config"]["vocab"]["model_type"] == "bpe"
    assert model.get_piece_size() == 600
    sentence = "Tom doesn't like cheese."
    assert model.decode(model.encode(sentence)) == sentence


def test_three_prepares_of_one_new_config_build_it_once(small_corpus, tmp_path):
    prepare = Path(sysconfig.get_path("scripts")) / "attnmt-prepare"
    command = [str(prepare), *small_data_overrides(small_corpus, tmp_path / "processed")]
    runs = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=300)[0].decode() for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    assert sorted(out.splitlines()[-1].split(":")[0] for out in outputs) == [
        "built",
        "up to date",
        "up to date",
    ], outputs
    (folder,) = (tmp_path / "processed").iterdir()  # no temporary folder, no lock left
    assert (folder / "manifest.json").is_file()


def test_a_temp_folder_whose_owner_holds_the_lock_is_left_alone(small_corpus, tmp_path):
    import fcntl
    import os

    cfg = data_config(small_data_overrides(small_corpus, tmp_path))
    theirs = tmp_path / f".{cfg.folder.name}.tmp-theirs"
    theirs.mkdir()
    lock = os.open(tmp_path / f".{cfg.folder.name}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another builder, still at work
    waiting = threading.Thread(target=prepare_dataset, args=(cfg,))
    waiting.start()
    time.sleep(1)
    assert waiting.is_alive() and theirs.is_dir()  # it waits, and removes nothing
    os.close(lock)  # the builder dies without finishing
    waiting.join(timeout=120)
    assert not theirs.exists() and (cfg.folder / "manifest.json").is_file()


def test_byte_fallback_leaves_no_unknown_chinese_piece(small_corpus, tmp_path):
    overrides = small_data_overrides(small_corpus, tmp_path)
    _, without, _ = prepare_dataset(data_config(overrides))
    config = data_config([*overrides, "data.vocab.byte_fallback=true", "data.vocab.src_size=1200"])
    folder, manifest, _ = prepare_dataset(config)
    assert without["unknown_source_pieces"]["test"] > 0  # characters train never had
    assert manifest["unknown_source_pieces"] == {"train": 0, "dev": 0, "test": 0}
    assert "<unk> in test sources" in summary_table(manifest)
    zh = load_sentencepiece(folder / "spm.zh.model")  # the special ids stay 0..3
    assert zh.get_piece_size() == 1200  # the 256 byte pieces count in the size
    assert [zh.id_to_piece(i) for i in (4, 259)] == ["<0x00>", "<0xFF>"]
    ids = zh.encode("龘")
    assert UNK_ID not in ids and decode(zh, ids) == "龘"
    en = load_sentencepiece(folder / "spm.en.model")  # the English side has no byte pieces
    assert not any(en.is_byte(i) for i in range(en.get_piece_size()))


def test_a_byte_sequence_that_is_not_utf8_is_dropped_from_the_text(small_corpus, tmp_path):
    overrides = small_data_overrides(small_corpus, tmp_path)
    config = data_config([*overrides, "data.vocab.byte_fallback=true", "data.vocab.src_size=1200"])
    zh = load_sentencepiece(prepare_dataset(config)[0] / "spm.zh.model")
    ids = zh.encode("好龘")  # 龘 in its three byte pieces
    assert decode(zh, ids) == "好龘"
    assert decode(zh, ids[:-1]) == "好"  # 龘 cut short
    assert decode(zh, [zh.piece_to_id("<0x98>"), *ids, zh.piece_to_id("<0xFF>")]) == "好龘"


def test_byte_fallback_off_keeps_the_folder_of_before_the_key(small_corpus, tmp_path):
    config = data_config(small_data_overrides(small_corpus, tmp_path))
    assert "byte_fallback" not in config.settings()["vocab"]  # so not in the folder's hash
    switched = data_config(
        [*small_data_overrides(small_corpus, tmp_path), "data.vocab.byte_fallback=true"]
    )
    assert switched.folder != config.folder
    with pytest.raises(ConfigError, match=r"data.vocab.byte_fallback=1: expected bool"):
        data_config([*small_data_overrides(small_corpus, tmp_path), "data.vocab.byte_fallback=1"])


def test_a_vocabulary_too_small_for_the_byte_pieces_says_they_count(small_corpus, tmp_path):
    overrides = [*small_data_overrides(small_corpus, tmp_path), "data.vocab.src_size=800"]
    prepare_dataset(data_config(overrides))  # enough without the byte pieces
    with pytest.raises(DataError, match=r"data.vocab.src_size=800 \(256 of them byte pieces"):
        prepare_dataset(data_config([*overrides, "data.vocab.byte_fallback=true"]))
