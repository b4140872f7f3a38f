"""Files that appear whole: a crash, a full disk or a reader meanwhile never sees half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def replaced_whole(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A file (opened with `mode`, "w" or "wb") whose contents replace `path` when the block
    ends without an error: it is written to a temporary file in the same folder, flushed to
    disk, then renamed over `path` (an atomic step), and the folder entry is flushed too. On an
    error the temporary file is removed and `path` is as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, aside = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(handle, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(aside, path)
    finally:
        Path(aside).unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
