"""Free space kept for deleting: a ballast file in the data directory.

Deleting data must write before it frees anything: the journal records the cycle and
the log start moves durably before any file goes (engine/prune/executor.py). On a
full filesystem those SQLite writes fail ("database or disk is full") and nothing
could ever be freed without an operator deleting files by hand. So the data
directory keeps ``reserve.ballast``, a file of allocated zeros whose blocks only the
deletion path gives back (as some databases keep a ballast file):

- a cycle (scheduled, ``ebb prune``, ``truncate``, ``purge``) releases it before its
  first write when the filesystem has less free space than the reserve holds, and
  whenever one of its catalog writes fails for lack of space (SQLITE_FULL), so that
  the cycle's own recovery, or the next cycle, has the room;
- it is made again at the end of every cycle (and on topic creation) once free
  space is at least twice its size, so that re-creating it never fills the disk.

Producers never release it: a full disk refuses their appends (one error line,
every acknowledged record kept) until a deletion frees space, and the next append
then succeeds in the same process. The size is 1/64 of the filesystem, between
256 KiB and 4 MiB: room for a cycle's writes up to its first unlink (about 235
bytes of WAL per planned deletion: 4 MiB covers some 17,000), after which the freed
segments make room for the rest.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

RESERVE_NAME = "reserve.ballast"
MIN_RESERVE = 256 * 1024
MAX_RESERVE = 4 * 1024 * 1024
_CHUNK = 64 * 1024


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still allocate on ``path``'s filesystem."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def reserve_size(path: Path) -> int:
    """The reserve for ``path``'s filesystem: 1/64 of it, in [MIN_RESERVE, MAX_RESERVE]."""
    stats = os.statvfs(path)
    size = stats.f_blocks * stats.f_frsize // 64
    return min(max(size, MIN_RESERVE), MAX_RESERVE) // 4096 * 4096


class Reserve:
    """The ballast file of one data directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / RESERVE_NAME

    @property
    def present(self) -> bool:
        return self.path.is_file()  # a directory in its place reserves nothing (ebb verify: NOT_A_FILE)

    def size(self) -> int:
        return reserve_size(self.root)

    def release(self) -> bool:
        """Give the reserve's blocks back to the filesystem; True if it was there."""
        try:
            os.unlink(self.path)
        except (FileNotFoundError, IsADirectoryError):
            return False  # none, or a directory in its place: no room to give back
        return True

    def release_if_low(self) -> bool:
        """Release the reserve when the filesystem has less free space than it holds
        (a deletion is about to need the room); True if released."""
        return free_bytes(self.root) < self.size() and self.release()

    def ensure(self) -> bool:
        """Make the reserve if it is missing and the filesystem has at least twice its
        size free; True if it is there afterwards. A failure leaves no partial file."""
        if self.present:
            return True
        size = self.size()
        tmp = self.path.with_name(RESERVE_NAME + ".tmp")
        try:
            if free_bytes(self.root) < 2 * size:
                return False
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                _allocate(fd, size)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError:
            # No room after all (another writer took it), or a failing disk: the
            # reserve is best effort and the next cycle tries again.
            tmp.unlink(missing_ok=True)
            return False
        return True


def _allocate(fd: int, size: int) -> None:
    """Allocate ``size`` bytes of real blocks (a sparse file would reserve nothing)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    zeros = bytes(_CHUNK)
    for offset in range(0, size, _CHUNK):
        os.pwrite(fd, zeros[: size - offset], offset)
