"""An advisory, cross-process exclusive lock on a file (``flock``).

The kernel drops the lock when its holder dies, so a writer killed with SIGKILL never
leaves a partition locked. flock locks belong to an open file description, so two
threads of one process holding separate instances also exclude each other.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from engine.errors import StoreError


class FileLock:
    def __init__(self, path: Path, *, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None) -> None:
        """Take the lock, waiting at most ``timeout`` seconds (None: forever)."""
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreError(
                        f"{self.what} is locked by another writer for more than {timeout:g} s; try again later"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
