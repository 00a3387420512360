"""One segment: a log file of batches plus its two indexes.

File names carry the base offset, zero-padded so that a directory listing sorts in
offset order: ``00000000000000001234.log``, ``.index``, ``.timeindex``. A segment being
deleted is first renamed to ``.log.deleted`` so that recovery can tell an interrupted
deletion from live data.

Every call that a full or failing disk can refuse (write, fsync, truncate, rename,
unlink) goes through :mod:`engine.faults`, the seam of the storage-fault tests.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from engine import faults
from engine.errors import StoreError
from engine.faults import fault_point
from engine.store.batch import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    decode_records,
    peek_header,
    read_header,
    scan,
)
from engine.store.index import SegmentIndex, offset_entry

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".log.deleted"
INDEX_SUFFIXES = (".index", ".timeindex")


class SegmentMissing(StoreError):
    """The segment's file is gone (deleted by a prune, or being deleted)."""

    def __init__(self, log_path: Path) -> None:
        super().__init__(f"segment file {log_path} is missing")


class SegmentUnreadable(StoreError):
    """The system refused to read a segment file (a failing disk, a permission, a
    directory in its place). Readers fail on it as on a corrupt batch: one line naming
    the file, never a traceback; ``ebb verify`` reports it."""

    def __init__(self, log_path: Path, error: OSError) -> None:
        # Without the error's own file name: the path is said once, whoever named it.
        why = describe(OSError(error.errno, error.strerror))
        super().__init__(f"cannot read segment file {log_path}: {why} (`ebb verify` reports it)")
        self.path = log_path


@contextmanager
def _reading(log_path: Path) -> Iterator[None]:
    """A lockless read of ``log_path``: its OSErrors become :class:`SegmentUnreadable`.
    (The writer, which opens with ``repair``, turns its own into StoreErrors and marks
    its view unsure: engine/store/partition.py.)"""
    try:
        yield
    except OSError as error:
        raise SegmentUnreadable(log_path, error) from None


class CorruptBatch(StoreError):
    """A batch a reader needed fails its checksum or framing: its records are never
    served, and the error names the file and the byte where the batch starts."""

    def __init__(self, path: Path, position: int, why: str) -> None:
        super().__init__(
            f"corrupt batch in {path} at byte {position}: {why} "
            "(`ebb verify` reports it, `ebb verify --repair` quarantines the segment)"
        )
        self.path = path
        self.position = position


def segment_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def describe(error: OSError) -> str:
    """An OSError as an operator reads it: ``No space left on device (ENOSPC): PATH``."""
    code = errno.errorcode.get(error.errno or 0)
    text = f"{error.strerror} ({code})" if error.strerror and code else str(error)
    return f"{text}: {error.filename}" if error.filename and error.strerror else text


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        faults.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the catalog and the planner know of a segment."""

    base_offset: int
    next_offset: int
    size_bytes: int
    first_timestamp: int | None
    max_timestamp: int | None
    sealed: bool


class Segment:
    """A segment's files and the extent of its valid data."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        stem = segment_stem(base_offset)
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (stem + LOG_SUFFIX)
        self.index = SegmentIndex(directory / (stem + ".index"), directory / (stem + ".timeindex"))
        self.size = 0
        self.next_offset = base_offset
        self.first_timestamp: int | None = None
        self.max_timestamp: int | None = None
        #: Bytes cut from a torn tail when the segment was last opened for repair.
        self.cut_bytes = 0

    # -- opening and recovery -------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int) -> Segment:
        segment = cls(directory, base_offset)
        fd = os.open(segment.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        segment.index.write(sync=False)
        fsync_dir(directory)
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, *, sealed: bool, repair: bool) -> Segment:
        """Open a segment, validating its indexes and tail; with ``repair`` (only under
        the partition lock) cut a torn tail of the active segment and rewrite stale
        indexes, else keep the fixes in memory."""
        segment = cls(directory, base_offset)
        if repair:
            segment._recover(sealed=sealed, repair=repair)
        else:
            with _reading(segment.log_path):
                segment._recover(sealed=sealed, repair=repair)
        return segment

    def _recover(self, *, sealed: bool, repair: bool) -> None:
        try:
            fd = os.open(self.log_path, os.O_RDONLY)
        except FileNotFoundError:
            raise SegmentMissing(self.log_path) from None
        try:
            file_size = os.fstat(fd).st_size
            loaded = SegmentIndex.load(self.index.offset_path, self.index.time_path)
            headers = _chained_headers(fd, loaded.offsets, file_size)
            if headers and not sealed and read_header(os.pread(fd, headers[-1].size, headers[-1].position), 0) is None:
                # The newest batch of the active segment may be a torn write.
                headers.pop()
            start = headers[-1].position + headers[-1].size if headers else 0
            tail = os.pread(fd, file_size - start, start) if file_size > start else b""
            headers += [replace(h, position=h.position + start) for h in scan(tail)]
        finally:
            os.close(fd)
        self.index = SegmentIndex.build(self.index.offset_path, self.index.time_path, headers)
        valid_end = headers[-1].position + headers[-1].size if headers else 0
        # A sealed segment was fsynced whole before its successor existed, so an
        # invalid tail there is corruption, not a torn write: keep every byte, so that
        # reading those offsets fails with the place instead of skipping them.
        self.size = file_size if sealed else valid_end
        self.cut_bytes = file_size - self.size
        if headers:
            self.first_timestamp = headers[0].first_timestamp if headers[0].position == 0 else None
            self.next_offset = headers[-1].next_offset
            self.max_timestamp = self.index.times[-1][0]
        if repair:
            if self.cut_bytes:
                fd = os.open(self.log_path, os.O_WRONLY)
                try:
                    faults.ftruncate(fd, self.size)
                    faults.fsync(fd)
                finally:
                    os.close(fd)
            if self.index.offsets != loaded.offsets or self.index.times != loaded.times:
                self.index.write(sync=sealed)

    # -- writing ----------------------------------------------------------------

    def write(self, fd: int, data: bytes | bytearray, header: BatchHeader) -> None:
        """Write one encoded batch at the end of the valid data (no fsync: the caller
        decides when a group of batches is committed). ``header`` is positioned in
        ``data``; the index gets its position in the file."""
        header = replace(header, position=self.size)
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += faults.pwrite(fd, view[written:], self.size + written)
        self.size += len(data)
        if self.first_timestamp is None:
            self.first_timestamp = header.first_timestamp
        self.next_offset = header.next_offset
        self.index.append_entry(header)
        self.max_timestamp = self.index.times[-1][0]

    def seal(self) -> None:
        """Make the segment and its indexes durable; it takes no more appends."""
        fd = os.open(self.log_path, os.O_RDONLY)
        try:
            faults.fsync(fd)
        finally:
            os.close(fd)
        self.index.write(sync=True)

    # -- reading ----------------------------------------------------------------

    def info(self, *, sealed: bool) -> SegmentInfo:
        return SegmentInfo(
            self.base_offset, self.next_offset, self.size, self.first_timestamp, self.max_timestamp, sealed
        )

    @contextmanager
    def _log_for_reading(self) -> Iterator[BinaryIO]:
        """The log file open for reading, without the partition lock: SegmentMissing
        where it is gone (a prune deleted it since the segment was opened), and what
        else the system refuses, there or while it is read, SegmentUnreadable."""
        with _reading(self.log_path):
            try:
                f = open(self.log_path, "rb")
            except FileNotFoundError:
                raise SegmentMissing(self.log_path) from None
            with f:
                yield f

    def read(self, offset: int, max_records: int) -> Iterator[Record]:
        """Records from ``offset`` on, at most ``max_records``, from valid batches only.
        Raises :class:`SegmentMissing` if the file is gone since the segment was opened
        (a prune deleted it), before yielding anything."""
        position = self.index.position_for(offset)
        with self._log_for_reading() as f:
            f.seek(position)
            data = f.read(max(self.size - position, 0))
        produced = 0
        cursor = 0
        while cursor < len(data) and produced < max_records:
            header = read_header(data, cursor)
            if header is None:
                raise CorruptBatch(self.log_path, position + cursor, "checksum or framing mismatch")
            if header.next_offset > offset:
                for record in decode_records(data, header):
                    if record.offset >= offset:
                        yield record
                        produced += 1
                        if produced >= max_records:
                            return
            cursor += header.size

    def offset_for_time(self, timestamp: int) -> int | None:
        """First offset in this segment whose record timestamp is >= ``timestamp``."""
        base = self.index.offset_for_time(timestamp)
        if base is None:
            return None
        for record in self.read(base, 1 << 62):
            if record.timestamp >= timestamp:
                return record.offset
        return None

    def first_at_or_after(self, offset: int, timestamp: int) -> Record | None:
        """First record at or after ``offset`` in this segment whose timestamp is >=
        ``timestamp`` (a record-level time cut). Batch headers carry their max
        timestamp, so batches wholly older are skipped without being decoded; the time
        index skips the batches before the first one that can hold such a record."""
        first_candidate = self.index.offset_for_time(timestamp)
        if first_candidate is None:
            return None
        position = self.index.position_for(max(offset, first_candidate))
        with self._log_for_reading() as f:
            while position < self.size:
                prefix = os.pread(f.fileno(), HEADER_SIZE, position)
                header = peek_header(prefix, 0)
                if header is None:
                    raise CorruptBatch(self.log_path, position, "framing mismatch")
                if header.next_offset > offset and header.max_timestamp >= timestamp:
                    data = os.pread(f.fileno(), header.size, position)
                    if read_header(data, 0) is None:
                        raise CorruptBatch(self.log_path, position, "checksum mismatch")
                    for record in decode_records(data, replace(header, position=0)):
                        if record.offset >= offset and record.timestamp >= timestamp:
                            return record
                position += header.size
        return None

    def indexed_record(self, offset: int) -> Record | None:
        """The record at ``offset`` (or the next one in this segment) read through the
        offset index alone: one checksummed batch, which must be the one the index
        names and hold ``offset``, where :meth:`open` validates every batch of the
        segment (a group's lag reads one record per position on every refresh). None
        when the index does not lead to such a batch (missing, stale, corrupt): the
        caller then opens the segment, which rebuilds what the index lacks. Raises
        :class:`SegmentMissing` when the file is gone."""
        with self._log_for_reading() as f:
            entry = offset_entry(self.index.offset_path, offset)
            if entry is None:
                return None
            base, position = entry
            header = peek_header(os.pread(f.fileno(), HEADER_SIZE, position), 0)
            if header is None or header.base_offset != base or header.next_offset <= offset:
                return None
            data = os.pread(f.fileno(), header.size, position)
        if read_header(data, 0) is None:
            return None
        return next((r for r in decode_records(data, replace(header, position=0)) if r.offset >= offset), None)

    # -- deletion ---------------------------------------------------------------

    def delete(self) -> None:
        """Remove the segment: rename out of the way durably, then unlink.

        A crash after the rename leaves ``.log.deleted``, which recovery completes
        (or rolls back when the log start does not cover the segment)."""
        self.rename_deleted()
        fsync_dir(self.directory)
        fault_point("after_segment_renamed")
        remove_files(self.directory, self.base_offset)

    def rename_deleted(self) -> None:
        """Rename the log to ``.log.deleted``: readers and writers no longer see it
        (not durable until the caller fsyncs the directory)."""
        faults.replace(self.log_path, self.directory / (segment_stem(self.base_offset) + DELETED_SUFFIX))


def _chained_headers(fd: int, entries: list[tuple[int, int]], file_size: int) -> list[BatchHeader]:
    """The prefix of the offset index that the file confirms: each entry's batch header
    has the entry's base offset and starts where the previous batch ended."""
    headers: list[BatchHeader] = []
    expected_position = 0
    for base, position in entries:
        if position != expected_position:
            break
        header = peek_header(os.pread(fd, HEADER_SIZE, position), 0)
        if header is None or header.base_offset != base or position + header.size > file_size:
            break
        if headers and header.base_offset != headers[-1].next_offset:
            break
        headers.append(replace(header, position=position))
        expected_position = position + header.size
    return headers


def unlink_files(directory: Path, base_offset: int) -> None:
    """Unlink whatever is left of a segment being deleted (not durable until the
    caller fsyncs the directory). A file already gone is fine: recovery and the
    executor may both be finishing one deletion."""
    stem = segment_stem(base_offset)
    for suffix in (DELETED_SUFFIX, *INDEX_SUFFIXES):
        try:
            faults.unlink(directory / (stem + suffix))
        except FileNotFoundError:
            pass


def remove_files(directory: Path, base_offset: int) -> None:
    """Unlink whatever is left of a segment being deleted, then make it durable."""
    unlink_files(directory, base_offset)
    fsync_dir(directory)
