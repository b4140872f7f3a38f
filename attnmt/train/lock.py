"""One live run per run directory, held with an OS lock (`fcntl.flock`).

The lock lives on an open file, `.lock` in the run directory, which also names the pid that
holds it. The kernel drops the lock when that process ends, however it ends (SIGKILL
included), so a killed run never blocks the next one: the file's existence means nothing.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from attnmt.errors import ConfigError

LOCK_NAME = ".lock"


class RunLock:
    """Holds `run_dir` for this process until `release` or the process's end."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_NAME
        run_dir.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            raise ConfigError(
                f"{run_dir}: another attnmt-train (pid {holder}) is running in this directory; "
                "wait for it to end, or give this run another hydra.run.dir"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        """Let the next run in (the process's end does the same)."""
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
