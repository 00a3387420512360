"""Record timestamps where a time cut falls inside a segment: the store answers
(:class:`StoreRecordTimes`) like Kafka's offsetsForTimes. The snapshot asks for the
cuts a plan needs, a manual truncate or group move for its own, and a group's lag in
time (engine/catalog/lag.py) the record at its position; no Arrow here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from engine.catalog.catalog import Catalog
from engine.datadir import DataDir
from engine.store.segment import CorruptBatch, Segment, SegmentMissing, SegmentUnreadable

if TYPE_CHECKING:  # numpy's, which a command that does not plan never loads
    from engine.prune.time_cuts import RecordReads

#: below every timestamp: the first record at or after an offset is the record there
EARLIEST = -(2**63)
#: where a segment holds no record asked for (:meth:`RecordTimes.first_offsets`)
NO_RECORD = -1
#: how many record timestamps :class:`RecordAges` keeps before starting afresh (positions
#: move on, so the old ones are not asked again)
AGES_KEPT = 100_000


class FirstRecord(NamedTuple):
    """A record found by its timestamp: where it is and when it was written."""

    offset: int
    timestamp: int


class RecordTimes(Protocol):
    """Where record timestamps come from (the store; a fake in the tests)."""

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        """The first record at or after ``start_offset`` in the segment at
        ``segment_base`` whose timestamp is >= ``theta``, or None."""

    def first_offsets(self, reads: RecordReads) -> Collection[int]:
        """Per entry of ``reads``, the offset of the record :meth:`first_at_or_after`
        finds; :data:`NO_RECORD` where there is none."""


@dataclass(frozen=True)
class StoreRecordTimes:
    """Record timestamps read from the segment files of a data directory."""

    data: DataDir

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        segment = self._open(topic, partition, segment_base)
        found = None if segment is None else segment.first_at_or_after(start_offset, theta)
        return None if found is None else FirstRecord(found.offset, found.timestamp)

    def first_offsets(self, reads: RecordReads) -> list[int]:
        found = [NO_RECORD] * len(reads)
        starts, thetas = reads.start_offset.tolist(), reads.theta.tolist()
        for (topic, partition, segment_base), entries in reads.by_segment().items():
            segment = self._open(topic, partition, segment_base)
            if segment is None:
                continue
            for entry in entries:
                record = segment.first_at_or_after(starts[entry], thetas[entry])
                if record is not None:
                    found[entry] = record.offset
        return found

    def _open(self, topic: str, partition: int, segment_base: int) -> Segment | None:
        """The sealed segment, validated (every batch: once for all the reads of it);
        None when it was pruned since the snapshot was read: the next segment decides."""
        try:
            # Sealed: nothing past the valid data is cut, and nothing is repaired here.
            return Segment.open(self.data.partition_dir(topic, partition), segment_base, sealed=True, repair=False)
        except SegmentMissing:
            return None


def time_cut(
    catalog: Catalog, records: RecordTimes, topic: str, partition: int, log_start: int, theta: int
) -> int | None:
    """The first offset >= the log start whose timestamp is >= θ; None if none is."""
    found = first_record(catalog, records, topic, partition, log_start, theta)
    return None if found is None else found.offset


def first_record(
    catalog: Catalog, records: RecordTimes, topic: str, partition: int, log_start: int, theta: int
) -> FirstRecord | None:
    """The first record at or after the log start whose timestamp is >= θ; None if
    none is.

    Every record of a segment whose max timestamp is below θ is below θ, so only
    segments at or above θ are candidates, oldest first; the first one usually holds
    the cut. It may not when its newer records lie below the log start."""
    for base in catalog.cut_candidates(topic, partition, log_start, theta):
        found = records.first_at_or_after(topic, partition, base, max(base, log_start), theta)
        if found is not None:
            return found
    return None


def record_at(catalog: Catalog, records: RecordTimes, topic: str, partition: int, offset: int) -> FirstRecord | None:
    """The record at ``offset`` (the first after it where offsets have a gap); None
    at the partition's end."""
    return first_record(catalog, records, topic, partition, offset, EARLIEST)


class RecordAges:
    """The timestamps of the records at groups' positions, read from the store once
    each: a record never changes until it is pruned, and then it is below the log
    start, where no lag is read. A topic deleted and created again starts over at
    offset 0, so its creation time is part of the key."""

    def __init__(self, data: DataDir) -> None:
        self.data = data
        self.records = StoreRecordTimes(data)
        self._known: dict[tuple[str, int, int, int], int] = {}

    def timestamp_at(self, catalog: Catalog, topic: str, created_at: int, partition: int, offset: int) -> int | None:
        """The timestamp of the record at ``offset`` (see :func:`record_at`)."""
        key = (topic, created_at, partition, offset)
        known = self._known.get(key)
        if known is not None:
            return known
        found = self._read(catalog, topic, partition, offset)
        if found is None:
            return None
        if len(self._known) >= AGES_KEPT:
            # A new dict rather than clear(): the metrics server scrapes in several threads.
            self._known = {}
        self._known[key] = found.timestamp
        return found.timestamp

    def _read(self, catalog: Catalog, topic: str, partition: int, offset: int) -> FirstRecord | None:
        """The record read through the index of the segment holding ``offset``, or
        as a cut reads it (:func:`record_at`, each segment opened whole) where the
        index does not lead to it; None when that segment's file is gone (pruned
        since the catalog was read, or lost), rather than a search of every later one;
        None too where the record cannot be read (a corrupt batch, a file the system
        refuses): a lag shown without its age, rather than no group's lag at all.
        Reading the records themselves still fails there (``ebb consume``, ``ebb
        verify``)."""
        base = next(catalog.cut_candidates(topic, partition, offset, EARLIEST), None)
        if base is None:
            return None
        try:
            found = Segment(self.data.partition_dir(topic, partition), base).indexed_record(offset)
            if found is None:
                return record_at(catalog, self.records, topic, partition, offset)
        except (SegmentMissing, CorruptBatch, SegmentUnreadable):
            return None
        return FirstRecord(found.offset, found.timestamp)
