"""Advisory, cross-process exclusive locks (``flock``).

The kernel drops a lock when its holder dies, so a writer killed with SIGKILL never
leaves a partition locked. flock locks belong to an open file description, so two
threads of one process holding separate instances also exclude each other.

Waiting is by polling (a blocking flock could not time out), through a turnstile: a
POSIX lock on one byte of the lock file that a waiter holds while it polls, and that
every acquirer must pass first. Without it a producer appending back to back, which
releases the lock and takes it again within microseconds, starved a prune cycle
polling for it (seen in bench/deletion_latency.py). POSIX locks belong to the
process, so the turnstile orders processes, not the threads of one; the flock alone
is what excludes.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.digits import is_digits
from engine.errors import StoreError
from engine.store.segment import describe

_PID_WIDTH = 12
#: the byte a POSIX (fcntl) lock takes as the lock's turnstile (past the pid; POSIX
#: locks are independent of flock on Linux and may lie past the end of the file)
_TURNSTILE = 4096
_MAX_POLL = 0.01


class LockTimeout(StoreError):
    """A lock stayed held by another process past the caller's timeout."""

    def __init__(self, message: str, holder: int | None) -> None:
        super().__init__(message)
        self.holder = holder


def _poll(take: Callable[[], object], deadline: float | None) -> bool:
    """Call ``take`` (a non-blocking lock) until it succeeds or ``deadline`` passes."""
    delay = 0.001
    while True:
        try:
            take()
            return True
        except (BlockingIOError, PermissionError):  # EAGAIN, or EACCES from fcntl locks
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, _MAX_POLL)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


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
        :class:`LockTimeout` naming the holder's pid, and a StoreError naming the lock
        where the system refuses it (a directory where the lock file goes, a disk
        that fails)."""
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        try:
            self._acquire(timeout)
        except OSError as error:
            raise StoreError(f"{self.what}: cannot take its lock: {describe(error)}") from None

    def _acquire(self, timeout: float | None) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = _deadline(timeout)
        # The turnstile first, then the lock: a writer that releases the lock and
        # takes it again at once (a producer appending back to back) must queue
        # behind a waiter already holding the turnstile, or it could starve it.
        try:
            taken = _poll(lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _TURNSTILE), deadline) and _poll(
                lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), deadline
            )
            _leave_turnstile(fd)
        except BaseException:  # a lock the system refuses, or Ctrl-C while waiting
            os.close(fd)
            raise
        if not taken:
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


def _leave_turnstile(fd: int) -> None:
    try:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _TURNSTILE)
    except OSError:
        pass  # not held (a timeout): nothing to leave


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, _PID_WIDTH, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if is_digits(text) else None


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
            taken = _poll(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), _deadline(0))
        yield taken
    finally:
        os.close(fd)  # closing the last descriptor drops the flock
