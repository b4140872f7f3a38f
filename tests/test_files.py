"""attnmt.files: a file replaced whole or not at all."""

from pathlib import Path

import pytest

from attnmt.files import replaced_whole


def test_replaced_whole_writes_the_new_contents(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "entry.json"
    with replaced_whole(path) as out:
        out.write("中文 text\n")
    with replaced_whole(path, "wb") as out:
        out.write(path.read_bytes() + b"more\n")
    assert path.read_text(encoding="utf-8") == "中文 text\nmore\n"
    assert [p.name for p in path.parent.iterdir()] == ["entry.json"]


def test_an_error_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "entry.json"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="halfway"), replaced_whole(path) as out:
        out.write("half of the new")
        raise RuntimeError("halfway")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.json"]
