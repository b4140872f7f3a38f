import bz2
import gzip
import os
import threading
import zipfile

import pytest

from attnmt.data import corpus
from attnmt.errors import DataError


def test_normalize_chinese_uses_full_width_punctuation():
    assert corpus.normalize("你好,  世界!", "zh") == "你好，世界！"
    assert corpus.normalize("他在3:00到了, 带着1,000元。", "zh") == "他在3:00到了，带着1,000元。"


def test_normalize_folds_full_width_latin_and_spaces_on_both_sides():
    assert corpus.normalize("  Ｈｅｌｌｏ\t１２３ ", "en") == "Hello 123"
    assert corpus.normalize("我有ＡＢ。", "zh") == "我有AB。"
    assert corpus.normalize("Wait！", "en") == "Wait!"


def test_staging_drops_empty_sides_and_finds_duplicates(tmp_path):
    report = corpus.CleaningReport()
    raw = [("Hi.", "你好！"), ("  ", "空"), ("Hi.", "你好!"), ("Run.", "  "), ("Go.", "走。")]
    staged = corpus.stage_pairs([iter(raw), iter([("Go.", "走。")])], tmp_path, report)
    hi, go = ("Hi.", "你好！"), ("Go.", "走。")
    assert list(staged.lines()) == [hi, hi, go, go]
    assert report.read == 6 and report.dropped == {"empty_side": 2}
    # a duplicate within one input is dropped; the same pair in another input (split) is not
    assert staged.first_occurrences().tolist() == [True, False, True, True]
    assert staged.parts.tolist() == [0, 0, 0, 1]


def test_length_rules():
    assert corpus.length_rule(3, 5, max_length=5, max_ratio=2.0) is None
    assert corpus.length_rule(3, 6, max_length=5, max_ratio=9.0) == "too_long"
    assert corpus.length_rule(1, 4, max_length=5, max_ratio=3.0) == "length_ratio"


@pytest.mark.parametrize("kind", ["plain", "gzip", "bz2", "zip"])
def test_compressed_files_read_transparently(tmp_path, kind):
    text = "Hi.\t嗨。\tCC-BY\nGo.\t走。\tCC-BY\n".encode()
    path = tmp_path / "corpus.data"
    if kind == "plain":
        path.write_bytes(text)
    elif kind == "gzip":
        path.write_bytes(gzip.compress(text))
    elif kind == "bz2":
        path.write_bytes(bz2.compress(text))
    else:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("cmn.txt", text)
    assert list(corpus.read_tatoeba(path)) == [("Hi.", "嗨。"), ("Go.", "走。")]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_pipe_is_read_once_as_plain_text(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_text, args=("BZh91AY&SY\n你好\n",))
    writer.start()
    assert list(corpus.read_lines(pipe)) == ["BZh91AY&SY", "你好"]
    writer.join()


def test_a_missing_file_and_a_folder_are_named(tmp_path):
    with pytest.raises(DataError, match=r"none.txt: file not found"):
        list(corpus.read_lines(tmp_path / "none.txt"))
    with pytest.raises(DataError, match=r"is a folder, not a text file"):
        list(corpus.read_lines(tmp_path))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"Hi.\t\xe5\x97\xa8\n" + b"Go.\t\xff\xfe\n")
    with pytest.raises(DataError, match=r"bad.txt:2: invalid UTF-8"):
        list(corpus.read_tatoeba(path))


def test_tatoeba_line_without_tab_names_line(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("Hi.\t嗨。\tx\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"c.txt:2: expected"):
        list(corpus.read_tatoeba(path))


def test_aligned_files_with_different_line_counts_name_both_counts(tmp_path):
    en, zh = tmp_path / "a.en", tmp_path / "a.zh"
    en.write_text("a\nb\nc\n", encoding="utf-8")
    zh.write_text("甲\n乙\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"a.en has 3 lines.*a.zh has 2"):
        list(corpus.read_aligned(en, zh))
    en.write_text("a\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"a.en has 1 lines.*a.zh has 2"):
        list(corpus.read_aligned(en, zh))
