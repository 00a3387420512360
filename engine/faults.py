"""Fault points for the crash tests and the storage-fault tests.

**Kills.** Crash safety is a claim about every instant between two durable steps, and
the only honest test of it is a process that really dies there: no ``finally``
blocks, no flushes, no lock releases but the kernel's. A test starts a child process
with ``EBB_KILL_AT=<name>``; when the child reaches the point of that name it kills
itself with SIGKILL. Unset (always, outside tests), a fault point is one dictionary
lookup.

**Storage faults.** The segment store makes every system call that a full or failing
disk can refuse through this module's names: ``faults.pwrite``, ``faults.write``,
``faults.fsync``, ``faults.ftruncate``, ``faults.replace``, ``faults.unlink``, which
call the ``os`` function of that name: production pays one Python call per system call.
:func:`inject` (tests only) rebinds them, for the length of a ``with`` block, to
wrappers that raise ``OSError(ENOSPC)``, ``OSError(EIO)``… at the calls it is told to
fail, chosen by call, by the kind of file (:data:`Target`) and by count. The simulated
fsync failure does not call the real fsync: like a real one, it leaves the page cache
holding data the disk may never have got, which is exactly what the store must not
trust afterwards (engine/store/partition.py).
"""

from __future__ import annotations

import errno as errno_codes
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

KILL_AT_ENV = "EBB_KILL_AT"

#: every fault point, in the order a prune cycle reaches them
FAULT_POINTS = (
    "after_cycle_recorded",
    "after_log_start_moved",
    "after_segment_renamed",
    "after_segment_unlinked",
    "after_segment_journaled",
    "before_cycle_finished",
)


def fault_point(name: str) -> None:
    """Die here, at once, if the environment asks for a crash at ``name``."""
    if os.environ.get(KILL_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


# -- the I/O seam ----------------------------------------------------------------------

# Thin functions rather than aliases of the os functions: they look ``os.<name>`` up
# at each call, so a test that patches ``os.fsync`` itself still sees every call.
# One Python call per system call is nothing next to the system call.


def pwrite(fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
    return os.pwrite(fd, data, offset)


def write(fd: int, data: bytes | bytearray | memoryview) -> int:
    return os.write(fd, data)


def fsync(fd: int) -> None:
    os.fsync(fd)


def ftruncate(fd: int, length: int) -> None:
    os.ftruncate(fd, length)


def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    os.replace(src, dst)


def unlink(path: str | os.PathLike[str]) -> None:
    os.unlink(path)


Call = Literal["pwrite", "write", "fsync", "ftruncate", "replace", "unlink"]
#: the calls of the seam, by the name the store uses
CALLS: tuple[Call, ...] = ("pwrite", "write", "fsync", "ftruncate", "replace", "unlink")

#: which file a call is about: a segment's ``.log``, a ``.log.deleted``, an index file
#: (``.index``, ``.timeindex`` or their ``.tmp``), a directory, or any
Target = Literal["log", "deleted", "index", "dir", "any"]


def classify(path: str) -> Target:
    """The kind of file at ``path`` (for a rename, its source)."""
    path = path.removesuffix(" (deleted)")  # /proc's name for an unlinked file still open
    if path.endswith(".log"):
        return "log"
    if path.endswith(".log.deleted"):
        return "deleted"
    if path.endswith((".index", ".timeindex", ".index.tmp", ".timeindex.tmp")):
        return "index"
    if os.path.isdir(path):
        return "dir"
    return "any"


def _fd_path(fd: int) -> str:
    # Linux names the file behind a descriptor in /proc: good enough for tests.
    return os.readlink(f"/proc/self/fd/{fd}")


@dataclass
class IOFault:
    """Make the ``skip+1``-th and following calls of ``call`` on a ``target`` file
    raise ``OSError(errno)``, ``times`` times (None: for ever, a disk that stays
    full)."""

    call: Call
    errno: int = errno_codes.EIO
    target: Target = "any"
    skip: int = 0
    times: int | None = 1
    #: calls that matched so far, and how many of them failed
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)
    #: the paths of the calls that failed
    paths: list[str] = field(default_factory=list, init=False)

    def should_fail(self, path: str) -> bool:
        if self.target != "any" and classify(path) != self.target:
            return False
        self.seen += 1
        if self.seen <= self.skip or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        self.paths.append(path)
        return True

    def error(self, path: str) -> OSError:
        return OSError(self.errno, os.strerror(self.errno), path)


def _wrap(call: Call, real: Callable, faults: list[IOFault]) -> Callable:
    by_fd = call in ("pwrite", "write", "fsync", "ftruncate")

    def wrapper(*args: object, **kwargs: object) -> object:
        target = args[0]
        path = _fd_path(target) if by_fd else os.fsdecode(target)  # type: ignore[arg-type]
        for fault in faults:
            if fault.call == call and fault.should_fail(path):
                raise fault.error(path)
        return real(*args, **kwargs)

    return wrapper


@contextmanager
def inject(*faults: IOFault) -> Iterator[tuple[IOFault, ...]]:
    """Fail the store's system calls as ``faults`` say, inside the ``with`` block."""
    module = sys.modules[__name__]
    saved = {call: getattr(module, call) for call in CALLS}
    for call in {f.call for f in faults}:
        setattr(module, call, _wrap(call, saved[call], list(faults)))
    try:
        yield faults
    finally:
        for call, real in saved.items():
            setattr(module, call, real)
