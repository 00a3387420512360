"""Per-segment indexes: offset -> file position and timestamp -> offset.

Both hold one entry per batch and are only hints: they are rebuilt from the segment
whenever they are missing, short or point past the data, so they are written without
an fsync of their own until the segment is sealed.
"""

from __future__ import annotations

import bisect
import os
import struct
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from engine import faults
from engine.store.batch import BatchHeader

_ENTRY = struct.Struct("<qq")
#: bytes of one entry of either index file
ENTRY_SIZE = _ENTRY.size


def _write_file(path: Path, data: bytes, flags: int, *, sync: bool = False) -> None:
    """Write ``data`` to the index file at ``path`` (owner-only, like the segments),
    through the fault seam; with ``sync``, fsync it too."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[faults.write(fd, view) :]
        if sync:
            faults.fsync(fd)
    finally:
        os.close(fd)


def _load(path: Path) -> list[tuple[int, int]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    whole = len(data) - len(data) % _ENTRY.size
    return [tuple(e) for e in _ENTRY.iter_unpack(data[:whole])]


def offset_entry(offset_path: Path, offset: int) -> tuple[int, int] | None:
    """(base offset, file position) of the batch that holds ``offset`` (or the last
    one before it) by a binary search of the offset index file, without loading it:
    a few reads where loading costs one entry per batch. None below the first entry
    or without the file."""
    try:
        fd = os.open(offset_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        found = None
        low, high = 0, os.fstat(fd).st_size // _ENTRY.size
        while low < high:
            middle = (low + high) // 2
            data = os.pread(fd, _ENTRY.size, middle * _ENTRY.size)
            if len(data) < _ENTRY.size:
                return None  # cut short since: the caller opens the segment instead
            entry = _ENTRY.unpack(data)
            if entry[0] <= offset:
                found, low = entry, middle + 1
            else:
                high = middle
        return found
    finally:
        os.close(fd)


@dataclass
class SegmentIndex:
    """The offset index (batch base offset, position) and the time index
    (largest timestamp so far, batch base offset) of one segment."""

    offset_path: Path
    time_path: Path
    offsets: list[tuple[int, int]] = field(default_factory=list)
    times: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def load(cls, offset_path: Path, time_path: Path) -> SegmentIndex:
        return cls(offset_path, time_path, _load(offset_path), _load(time_path))

    @classmethod
    def build(cls, offset_path: Path, time_path: Path, headers: list[BatchHeader]) -> SegmentIndex:
        index = cls(offset_path, time_path)
        for header in headers:
            index.add(header)
        return index

    def add(self, header: BatchHeader) -> None:
        self.offsets.append((header.base_offset, header.position))
        if not self.times or header.max_timestamp > self.times[-1][0]:
            self.times.append((header.max_timestamp, header.base_offset))

    def position_for(self, offset: int) -> int:
        """File position of the batch that holds ``offset`` (or the last one before it)."""
        i = bisect.bisect_right(self.offsets, (offset, 1 << 62)) - 1
        return self.offsets[i][1] if i >= 0 else 0

    def offset_for_time(self, timestamp: int) -> int | None:
        """Base offset of the first batch holding a record at or after ``timestamp``."""
        i = bisect.bisect_left(self.times, (timestamp, -1))
        return self.times[i][1] if i < len(self.times) else None

    def write(self, *, sync: bool) -> None:
        """Rewrite both files whole (after a rebuild, or when sealing)."""
        for path, entries in ((self.offset_path, self.offsets), (self.time_path, self.times)):
            tmp = path.with_name(path.name + ".tmp")
            try:
                _write_file(tmp, b"".join(_ENTRY.pack(*e) for e in entries), os.O_TRUNC, sync=sync)
                faults.replace(tmp, path)
            except OSError:
                # A full disk must not also keep a stale copy: the index is rebuilt
                # from the segment anyway.
                with suppress(OSError):
                    tmp.unlink()
                raise

    def append_entry(self, header: BatchHeader) -> None:
        """Record a freshly written batch, in memory and at the end of both files."""
        had_times = len(self.times)
        self.add(header)
        _write_file(self.offset_path, _ENTRY.pack(header.base_offset, header.position), os.O_APPEND)
        if len(self.times) > had_times:
            _write_file(self.time_path, _ENTRY.pack(*self.times[-1]), os.O_APPEND)
