"""One partition's directory of segments: reads for anyone, appends for one writer.

Readers never take a lock: they see every batch that is whole and checksummed, and
stop at a torn tail that a writer is still producing. Writers take the partition's
file lock for each append, so several processes can append to one partition in turn;
on taking the lock a writer re-reads what others appended and repairs what a killed
writer left behind.

Storage faults (a full disk, a failing one). Every ``OSError`` of the writer becomes a
one-line :class:`StoreError`; an append that fails acknowledges none of its records,
and the writer never builds on a state it cannot vouch for:

- A failed write (``ENOSPC``), index update, rename, unlink or directory fsync: the
  writer forgets its view. The next ``locked`` block re-reads the files (cutting a
  torn batch as recovery does) and fsyncs the directory and the active segment before
  accepting an append, so that what a later append acknowledges sits on durable
  ground. Whole batches the failed append wrote before the fault stay in the log,
  unacknowledged, as a killed producer's do (Kafka keeps what is in its log; the
  catalog is brought up to them).
- A failed fsync of the active segment (``EIO``: PostgreSQL's "fsyncgate"). The kernel
  may have dropped the dirty pages while keeping them readable in its cache, and a
  second fsync would report success for data that is not on disk. So the failed
  fsync is never retried as if it had succeeded, nor is the segment re-read from the
  cache and trusted: the writer cuts the active segment back to the end of its last
  *successful* fsync (which it remembers) and fsyncs the cut, through a new
  descriptor. Nothing acknowledged lies past that end, and appends go on from there.
  If the cut fails too, the writer is failed: every later ``locked`` block is refused
  until the partition is reopened (a new writer: another process, or the data
  directory opened again), whose recovery reads what the files then hold.
- With ``durable=False`` nothing is cut (records acknowledged without an fsync must
  survive anything but a power loss); the failed fsync only fails the roll it was in.

One limit stays: a new writer trusts the batches it reads, including a killed
producer's that were never fsynced (it does not know which were). They were never
acknowledged, and its first append's fsync makes them durable.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from engine import faults
from engine.digits import is_digits
from engine.errors import InvalidInput, StoreError
from engine.store.batch import (
    HEADER_SIZE,
    MAX_BATCH_BYTES,
    NewRecord,
    Record,
    encode_batch,
    record_size,
)
from engine.store.lock import FileLock, directory_lock
from engine.store.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    CorruptBatch,
    Segment,
    SegmentInfo,
    SegmentMissing,
    SegmentUnreadable,
    describe,
    fsync_dir,
    remove_files,
    segment_stem,
    unlink_files,
)

#: Records per batch: the unit of checksumming and of one index entry.
MAX_BATCH_RECORDS = 1000
LOCK_FILE = ".lock"


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Offsets given to the appended records and the segments whose extent changed."""

    base_offset: int
    next_offset: int
    batches: int
    changed: tuple[SegmentInfo, ...]


def _listdir(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        raise StoreError(f"partition directory {directory} is missing") from None
    except NotADirectoryError:
        raise StoreError(f"partition directory {directory} is not a directory (`ebb verify` reports it)") from None
    except OSError as error:
        raise StoreError(f"cannot list partition directory {directory}: {describe(error)}") from None


def file_bases(names: list[str], suffix: str) -> list[int]:
    """Base offsets of the segment files among ``names`` that end with ``suffix``, in order."""
    return sorted(int(n[: -len(suffix)]) for n in names if n.endswith(suffix) and is_digits(n[: -len(suffix)]))


def _below_log_start(bases: list[int], log_start: int) -> bool:
    """Whether a sealed segment lies wholly below the log start (its successor starts
    at or before it)."""
    return len(bases) > 1 and bases[1] <= log_start


def live_bases(directory: Path) -> list[int]:
    """Base offsets of the segments present, oldest first (the last one is active)."""
    return file_bases(_listdir(directory), LOG_SUFFIX)


class OffsetGap(StoreError):
    """Offsets a reader needed are in no segment: deleted by a prune since the reader
    looked at the log start, or a deletion interrupted by a crash (then the next
    writer restores them). Never skipped silently."""

    def __init__(self, directory: Path, first_missing: int, next_present: int) -> None:
        super().__init__(f"offsets {first_missing} to {next_present - 1} of {directory} are not in any segment")
        self.first_missing = first_missing
        self.next_present = next_present


def open_segments(
    directory: Path, bases: list[int], *, repair: bool, cached: dict[int, Segment] | None = None
) -> list[Segment]:
    """Open the segments at ``bases`` (oldest first, the last one active).

    Segments are contiguous by construction, so a sealed segment ends where its
    successor begins, even when a damaged tail hides its last records."""
    cached = cached or {}
    last = len(bases) - 1
    segments = [
        cached.get(base) or Segment.open(directory, base, sealed=i < last, repair=repair)
        for i, base in enumerate(bases)
    ]
    for segment, successor in zip(segments, bases[1:]):
        segment.next_offset = successor
    return segments


def segment_infos(directory: Path, bases: list[int] | None = None) -> list[SegmentInfo]:
    """A read-only view of the segments (all, or those at ``bases`` as a caller
    listed them), without taking the lock."""
    segments = open_segments(directory, live_bases(directory) if bases is None else bases, repair=False)
    return [s.info(sealed=i < len(segments) - 1) for i, s in enumerate(segments)]


def read_records(directory: Path, offset: int, max_records: int) -> list[Record]:
    """Up to ``max_records`` records from ``offset`` on, across segments.

    Offsets that are in no segment raise :class:`OffsetGap` and a corrupt batch
    :class:`CorruptBatch`, never skipped; the records before such a place are returned
    first (as a Kafka fetch returns the batches before a corrupt one), so that a
    reader progresses up to it and its next read, starting there, fails."""
    bases = live_bases(directory)
    first = max(bisect.bisect_right(bases, offset) - 1, 0)
    records: list[Record] = []
    expected = offset
    for i in range(first, len(bases)):
        if bases[i] > expected:
            if records:
                return records
            raise OffsetGap(directory, expected, bases[i])
        try:
            segment = Segment.open(directory, bases[i], sealed=i < len(bases) - 1, repair=False)
        except SegmentMissing:
            continue  # deleted since the listing: the gap check above catches what follows
        except SegmentUnreadable:
            if records:  # as for a corrupt batch: what comes before it first
                return records
            raise
        try:
            # One by one: what was read before a corrupt batch is kept and returned.
            for record in segment.read(expected, max_records - len(records)):
                records.append(record)
        except SegmentMissing:
            continue  # deleted since it was opened, before a record of it was read
        except (CorruptBatch, SegmentUnreadable):
            if records:
                return records
            raise
        # The segment's own extent, not its successor's base: a successor further on
        # than this segment's end is exactly the gap that must not be skipped.
        expected = max(expected, segment.next_offset)
        if len(records) >= max_records:
            break
    return records


def offset_for_time(directory: Path, timestamp: int) -> int | None:
    """The first offset whose record timestamp is >= ``timestamp``, or None if none is."""
    bases = live_bases(directory)
    for i, base in enumerate(bases):
        try:
            segment = Segment.open(directory, base, sealed=i < len(bases) - 1, repair=False)
        except SegmentMissing:
            continue  # deleted by a prune since the listing: its records are gone
        if segment.max_timestamp is not None and segment.max_timestamp >= timestamp:
            found = segment.offset_for_time(timestamp)
            if found is not None:
                return found
    return None


def largest_record(segment_size: int) -> int:
    """Bytes (as :func:`record_size` counts them) of the largest record that a segment
    of ``segment_size`` bytes can hold, in a batch of its own."""
    return min(segment_size, MAX_BATCH_BYTES) - HEADER_SIZE


def unfit_record(index: int, size: int, segment_size: int) -> InvalidInput:
    """The refusal of record ``index``, ``size`` bytes, larger than :func:`largest_record`."""
    return InvalidInput(
        f"record {index} is {size} bytes with its framing; it does not fit a segment of "
        f"{segment_size} bytes (raise segment_size or send smaller records)"
    )


def create_partition(directory: Path) -> None:
    """Create an empty partition: its directory and a first, active segment at offset 0."""
    try:
        # mkdir(parents=True) gives the parents it creates the umask's mode, not 0700:
        # the topic's directory is made on its own.
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.mkdir(mode=0o700, exist_ok=False)
        Segment.create(directory, 0)
        fsync_dir(directory.parent)
    except OSError as error:
        raise StoreError(f"creating partition {directory} failed: {describe(error)}") from None


class _SyncFailed(Exception):
    """An fsync of the active segment's log failed: what the disk holds past the last
    successful one is unknown (see the module docstring)."""

    def __init__(self, error: OSError, name: str) -> None:
        # The segment named, not the path the error may carry.
        super().__init__(f"fsync of {name} failed: {describe(OSError(error.errno, error.strerror))}")
        self.error = error


class PartitionWriter:
    """The appending side of a partition, used as ``with writer.locked(log_start):``.

    The object lives as long as its producer and caches the open segments between
    appends; every ``locked`` block first checks whether another process changed the
    directory since, and re-reads it if so.
    """

    def __init__(
        self,
        directory: Path,
        *,
        durable: bool = True,
        lock_timeout: float | None = 30.0,
        label: str | None = None,
    ) -> None:
        self.directory = directory
        #: With ``durable=False`` appends return before their data is on disk (unsafe:
        #: a power loss may lose acknowledged records; a process crash does not).
        self.durable = durable
        self.lock_timeout = lock_timeout
        self._timeout = lock_timeout
        #: how errors name the partition (``topic/partition`` for the broker)
        self.label = label or str(directory)
        self._lock = FileLock(directory / LOCK_FILE, what=f"partition {self.label}")
        self._segments: list[Segment] = []
        self._fd: int | None = None
        #: Set when an operation failed with an OSError: the writer's view may not be
        #: the files', and the files may not be durable, so the next ``locked`` block
        #: re-reads them and fsyncs the directory and the active segment.
        self._unsure = False
        #: Bytes of the active segment as of its last successful fsync (or as read on
        #: a reload): what a failed fsync cuts the segment back to.
        self._durable_end = 0
        #: Why the writer takes no more appends (a failed fsync it could not undo).
        self._failed: str | None = None
        #: True when the last ``locked`` block had to re-read the files (first use,
        #: another writer, a crash, a fault): the catalog may then lag behind them.
        self.reloaded = False

    # -- locking and recovery ---------------------------------------------------

    def locked(self, log_start_offset: int, *, timeout: float | None = None) -> PartitionWriter:
        """The writer for a ``with`` block under the partition's lock, waiting for it
        ``timeout`` seconds (default: the writer's ``lock_timeout``)."""
        self._log_start = log_start_offset
        self._timeout = self.lock_timeout if timeout is None else timeout
        return self

    def __enter__(self) -> PartitionWriter:
        if self._failed is not None:
            raise StoreError(self._failed)
        self._lock.acquire(self._timeout)
        try:
            self._refresh(self._log_start)
        except BaseException as error:
            self._lock.release()
            if isinstance(error, OSError):
                self._unsure = True
                raise StoreError(f"recovery of partition {self.label} failed: {describe(error)}") from None
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    @contextmanager
    def held(self) -> Iterator[PartitionWriter]:
        """The partition's lock without the recovery that ``locked`` runs on entry:
        for a repair that must move damaged files away before recovery sees them (it
        would cut an active segment at its first bad batch, valid batches after it
        included). Call :meth:`reload` before using the writer's view."""
        self._lock.acquire(self.lock_timeout)
        try:
            yield self
        finally:
            self._lock.release()

    def reload(self, log_start_offset: int) -> None:
        """Forget the cached view and re-read every file, repairing them as ``locked``
        does (torn tail, stale indexes, interrupted deletions)."""
        if not self._lock.held:
            raise RuntimeError("reload outside a held() or locked() block")
        self.close()
        try:
            self._refresh(log_start_offset)
        except OSError as error:
            self._unsure = True
            raise StoreError(f"recovery of partition {self.label} failed: {describe(error)}") from None

    def close(self) -> None:
        """Close the active segment and forget the cached view: the next ``locked``
        block re-reads the files (and ``reloaded`` tells the caller so)."""
        self._close_fd()
        self._segments = []

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _refresh(self, log_start: int) -> None:
        """Bring the cached view up to date with the files, repairing what a crashed
        writer or an interrupted deletion left. One directory listing in the common
        case: it runs before every append."""
        names = _listdir(self.directory)
        bases = file_bases(names, LOG_SUFFIX)
        if any(name.endswith(DELETED_SUFFIX) for name in names) or _below_log_start(bases, log_start):
            self._recover_deletions(names, log_start)
            names = _listdir(self.directory)
            bases = file_bases(names, LOG_SUFFIX)
        if not bases:
            raise StoreError(f"partition {self.label} has no segments")
        cached = [s.base_offset for s in self._segments]
        if not self._unsure and cached == bases and self._active_size_on_disk() == self._segments[-1].size:
            self.reloaded = False
            return
        self._remove_orphan_indexes(names, bases)
        sealed = {s.base_offset: s for s in self._segments[:-1]} if not self._unsure else {}
        self._close_fd()
        self._segments = open_segments(self.directory, bases, repair=True, cached=sealed)
        self.reloaded = True
        if self._unsure:
            # After a fault nothing the writer did since its last successful fsync is
            # known to be on disk (a new segment's directory entry, batches written
            # before a full disk refused one): make it durable before building on it.
            fsync_dir(self.directory)
            try:
                self._fsync_active()
            except _SyncFailed as failed:
                # The file may hold other writers' acknowledged batches past this
                # writer's last durable end now: cutting is not this writer's to do.
                self._close_fd()
                self._failed = (
                    f"partition {self.label} takes no appends: {failed} while recovering from an earlier "
                    "fault; reopen the partition (restart the process) once the disk is fixed"
                )
                raise StoreError(self._failed) from None
        else:
            active = self._segments[-1]
            self._durable_end = active.size
        self._unsure = False

    def _active_size_on_disk(self) -> int:
        try:
            return self._segments[-1].log_path.stat().st_size
        except (FileNotFoundError, IndexError):
            return -1

    def _recover_deletions(self, names: list[str], log_start: int) -> None:
        """Finish deletions that a crash interrupted, or roll them back when the log
        start was not moved past the segment (then its data must stay).

        ``.log.deleted`` files that a live prune cycle is unlinking (it holds the
        partition directory's deletion lock, :func:`deleting`) are left to it: the
        cycle unlinks without the partition lock so that appends never wait for it,
        and an append must not take that work over."""
        live = file_bases(names, LOG_SUFFIX)
        doomed = file_bases(names, DELETED_SUFFIX)
        with directory_lock(self.directory, wait=False) as free:
            for base in doomed if free else ():
                later = [b for b in live if b > base]
                if later and later[0] <= log_start:
                    remove_files(self.directory, base)
                else:
                    stem = segment_stem(base)
                    faults.replace(self.directory / (stem + DELETED_SUFFIX), self.directory / (stem + LOG_SUFFIX))
                    fsync_dir(self.directory)
                    live = sorted([*live, base])
        # Sealed segments wholly below the log start: the deletion was decided but
        # its rename never happened.
        for i, base in enumerate(live[:-1]):
            if live[i + 1] <= log_start:
                Segment(self.directory, base).delete()

    def _remove_orphan_indexes(self, names: list[str], bases: list[int]) -> None:
        # A segment a live cycle is deleting keeps its indexes until the cycle
        # unlinks them with its ``.log.deleted``.
        live = set(bases) | set(file_bases(names, DELETED_SUFFIX))
        for suffix in INDEX_SUFFIXES:
            for base in file_bases(names, suffix):
                if base not in live:
                    remove_files(self.directory, base)

    # -- reading the writer's view --------------------------------------------------

    def segments(self) -> list[SegmentInfo]:
        last = len(self._segments) - 1
        return [s.info(sealed=i < last) for i, s in enumerate(self._segments)]

    @property
    def next_offset(self) -> int:
        return self._segments[-1].next_offset

    # -- appending ------------------------------------------------------------------

    def append(
        self,
        records: Sequence[NewRecord],
        *,
        now_ms: int,
        segment_size: int,
        segment_roll_ms: int | None = None,
    ) -> AppendResult:
        """Append records in checksummed batches, rolling the active segment when a
        batch would push it past ``segment_size`` or its first record is
        ``segment_roll_ms`` older than the incoming one (Kafka's rule). Returns once
        every batch is on disk (one fsync for the whole call: group commit)."""
        if not self._lock.held:
            raise RuntimeError("append outside a locked() block")
        if not records:
            raise InvalidInput("nothing to append: no records given")
        limit = min(segment_size, MAX_BATCH_BYTES)
        largest = largest_record(segment_size)
        sizes = [record_size(r) for r in records]
        if max(sizes) > largest:
            i = next(i for i, size in enumerate(sizes) if size > largest)
            raise unfit_record(i, sizes[i], segment_size)
        # ends[k]: bytes of records[0..k] together; a batch from i takes the records
        # whose running total stays within the room left (found by bisection).
        ends = list(accumulate(sizes))
        timestamps = [now_ms if r.timestamp is None else r.timestamp for r in records]
        base_offset = self.next_offset
        changed: dict[int, Segment] = {}
        batches = 0
        with self._faults(f"append to partition {self.label}"):
            i = 0
            while i < len(records):
                active = self._segments[-1]
                if (
                    segment_roll_ms is not None
                    and active.first_timestamp is not None
                    and timestamps[i] - active.first_timestamp >= segment_roll_ms
                ):
                    changed[active.base_offset] = active
                    self._roll()
                    continue
                room = min(limit, segment_size - active.size) - HEADER_SIZE
                before = ends[i - 1] if i else 0
                end = bisect.bisect_right(ends, before + room, i, min(len(records), i + MAX_BATCH_RECORDS))
                if end == i:
                    changed[active.base_offset] = active
                    self._roll()
                    continue
                data, header = encode_batch(active.next_offset, records[i:end], timestamps[i:end])
                active.write(self._active_fd(), data, header)
                changed[active.base_offset] = active
                batches += 1
                i = end
            if self.durable:
                self._fsync_active()
        last = len(self._segments) - 1
        infos = tuple(
            s.info(sealed=i < last) for i, s in enumerate(self._segments) if s.base_offset in changed or i == last
        )
        return AppendResult(base_offset, self.next_offset, batches, infos)

    def roll(self) -> SegmentInfo | None:
        """Seal the active segment if it holds data; return what was sealed."""
        active = self._segments[-1]
        if active.size == 0:
            return None
        with self._faults(f"roll of partition {self.label}"):
            self._roll()
        return active.info(sealed=True)

    @contextmanager
    def _faults(self, what: str) -> Iterator[None]:
        """Turn the OSErrors of an append or roll into one-line StoreErrors, leaving
        the writer in a state it can vouch for (see the module docstring)."""
        try:
            yield
        except _SyncFailed as failed:
            undone = self._undo_failed_sync()
            raise StoreError(f"{what} failed: {failed}; {undone}") from None
        except OSError as error:
            self._unsure = True
            raise StoreError(f"{what} failed: {describe(error)}") from None

    def _active_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._segments[-1].log_path, os.O_WRONLY)
        return self._fd

    def _fsync_active(self) -> None:
        """fsync the active segment's log and remember where durable data ends."""
        active = self._segments[-1]
        try:
            faults.fsync(self._active_fd())
        except OSError as error:
            raise _SyncFailed(error, active.log_path.name) from None
        self._durable_end = active.size

    def _undo_failed_sync(self) -> str:
        """After a failed fsync of the active segment: never fsync that descriptor
        again (it would report success for pages the kernel dropped), cut the segment
        back to its last durable end through a new descriptor, fsync the cut, and
        re-read it on the next ``locked`` block. Returns what was done, for the error;
        if the cut fails, the writer takes no more appends."""
        self._close_fd()
        self._unsure = True
        active = self._segments[-1]
        if not self.durable:
            return "records acknowledged without fsync (durable=False) are kept as they are"
        # Within a locked block, everything past the durable end is this writer's own
        # unacknowledged data: the block's refresh found the files as the writer left
        # them (or re-read them and set the end), and a roll sets the end of the
        # segment it creates. So the end is always the active segment's.
        end = self._durable_end
        try:
            fd = os.open(active.log_path, os.O_WRONLY)
            try:
                faults.ftruncate(fd, end)
                faults.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            self._failed = (
                f"partition {self.label} takes no appends: an fsync of {active.log_path.name} failed and cutting "
                f"it back to its last durable end (byte {end}) failed too ({describe(error)}); reopen the "
                "partition (restart the process) once the disk is fixed"
            )
            return (
                f"cutting its data off the segment failed too ({describe(error)}):"
                " the partition takes no more appends until reopened"
            )
        return f"the segment was cut back to its last durable end (byte {end} of {active.log_path.name})"

    def _roll(self) -> None:
        active = self._segments[-1]
        # A sealed segment is durable whole before its successor exists (recovery
        # reads an invalid tail there as corruption), whatever ``durable`` says.
        self._fsync_active()
        active.index.write(sync=True)
        self._close_fd()
        self._segments.append(Segment.create(self.directory, active.next_offset))
        self._durable_end = 0

    # -- deleting ---------------------------------------------------------------------

    def detach(self, base_offsets: Sequence[int]) -> None:
        """Take sealed segments out of the partition: rename each to ``.log.deleted``
        and make the renames durable with one directory fsync. The caller has already
        made the new log start durable and holds :func:`deleting`; it unlinks the
        files after releasing the partition lock (Kafka's asynchronous delete). A
        crash or a failure half-way is finished by the next ``locked`` block."""
        doomed = set(base_offsets)
        sealed = {s.base_offset for s in self._segments[:-1]}
        if not doomed <= sealed:
            raise StoreError(f"segments {sorted(doomed - sealed)} of {self.label} are not sealed segments")
        try:
            for segment in self._segments[:-1]:
                if segment.base_offset in doomed:
                    segment.rename_deleted()
            fsync_dir(self.directory)
        except OSError as error:
            self._unsure = True
            raise StoreError(
                f"deleting segments of partition {self.label} failed: {describe(error)}; the log start is past "
                "them, so the partition's next writer finishes the deletion"
            ) from None
        self._segments = [s for s in self._segments if s.base_offset not in doomed]


@contextmanager
def deleting(directory: Path) -> Iterator[None]:
    """The deletion lock of a partition: held by a prune cycle from before it renames
    segments to ``.log.deleted`` until it has unlinked them, so that a writer's
    recovery leaves those files to it."""
    with directory_lock(directory, wait=True):
        yield


def unlink_detached(directory: Path, base_offsets: Sequence[int]) -> None:
    """Unlink the files of segments :meth:`PartitionWriter.detach` took out, then
    fsync the directory once (under :func:`deleting`, without the partition lock)."""
    try:
        for base in base_offsets:
            unlink_files(directory, base)
        fsync_dir(directory)
    except FileNotFoundError:
        pass  # the topic was deleted meanwhile, its directory with it: nothing is left
    except OSError as error:
        raise StoreError(
            f"unlinking deleted segments of {directory} failed: {describe(error)}; the log start is past them, "
            "so the partition's next writer finishes the deletion"
        ) from None
