"""A processed folder on disk: one builder at a time, whether it is current, moving it in.

The build is held with an OS lock (`fcntl.flock`) on a file beside the folder, `.{name}.lock`,
which also names the pid that holds it and is removed when the build ends. Another
`attnmt-prepare` of the same config waits for it, then finds the folder built. The kernel drops
the lock when its process ends, however it ends, so a killed build never blocks the next one;
and whoever holds the lock knows that no live process owns a temporary folder of that name, so
it may remove them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@contextlib.contextmanager
def building(folder: Path, job: str = "attnmt-prepare") -> Iterator[None]:
    """Hold the build of `folder` for this process, waiting while another process holds it
    (`job`: what builds, for the log line of a process that waits)."""
    path = folder.parent / f".{folder.name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            log.info("%s: another %s (pid %s) is building it; waiting", folder, job, holder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        if is_same_file(fd, path):
            break
        os.close(fd)  # its holder removed the file on the way out: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        path.unlink()  # (while still held, so no one can take the file's lock in between)
        os.close(fd)


def is_same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def current_manifest(folder: Path, fingerprint: str) -> dict[str, Any] | None:
    """The manifest of `folder` where it was built from this fingerprint; None otherwise."""
    path = folder / "manifest.json"
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return manifest if manifest.get("fingerprint") == fingerprint else None


def move_into_place(tmp: Path, folder: Path) -> None:
    """Rename the built `tmp` to `folder`, replacing an out-of-date one."""
    if not folder.exists():
        os.replace(tmp, folder)
        return
    old = folder.parent / f".{folder.name}.tmp-old"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old)
