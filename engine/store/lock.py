"""Advisory, cross-process exclusive locks (``flock``).

The kernel drops a lock when its holder dies, so a writer killed with SIGKILL never
leaves a partition locked. flock locks belong to an open file description, so two
threads of one process holding separate instances also exclude each other.

A holder writes its pid into the lock file, so that a writer who waited in vain can
name who holds it (a producer stopped with SIGSTOP keeps its lock for as long as it
is stopped; the operator needs the pid to find it). The pid is written in place, at
a fixed width: on a full disk it needs no new block, and if it cannot be written the
lock is held all the same.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.errors import StoreError

_PID_WIDTH = 12


class LockTimeout(StoreError):
    """A lock stayed held by another process past the caller's timeout."""

    def __init__(self, message: str, holder: int | None) -> None:
        super().__init__(message)
        self.holder = holder


def _wait_for(fd: int, timeout: float | None) -> bool:
    """Take ``fd``'s flock, waiting at most ``timeout`` seconds (None: forever)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


class FileLock:
    def __init__(self, path: Path, *, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None) -> None:
        """Take the lock, waiting at most ``timeout`` seconds (None: forever); raises
        :class:`LockTimeout` naming the holder's pid."""
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if not _wait_for(fd, timeout):
            holder = _read_pid(fd)
            os.close(fd)
            by = "another writer" if holder is None else f"another writer (pid {holder})"
            raise LockTimeout(f"{self.what} is locked by {by} for more than {timeout:g} s; try again later", holder)
        self._fd = fd
        try:
            os.pwrite(fd, str(os.getpid()).ljust(_PID_WIDTH - 1).encode() + b"\n", 0)
        except OSError:
            pass  # a full or failing disk: the pid is a courtesy, the flock is the lock

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, _PID_WIDTH, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


@contextmanager
def directory_lock(directory: Path, *, wait: bool) -> Iterator[bool]:
    """A flock on ``directory`` itself (no file to create: it works on a full disk).
    Yields whether it was taken: with ``wait`` it always is, else only if free."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if wait:
            fcntl.flock(fd, fcntl.LOCK_EX)
            taken = True
        else:
            taken = _wait_for(fd, 0)
        yield taken
    finally:
        os.close(fd)  # closing the last descriptor drops the flock
