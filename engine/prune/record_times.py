"""Record timestamps where a time cut falls inside a segment: the store answers
(:class:`StoreRecordTimes`) like Kafka's offsetsForTimes. The snapshot asks for the
cuts a plan needs, a manual truncate or group move for its own, and a group's lag in
time (engine/catalog/lag.py) the record at its position; no Arrow here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from engine.catalog.catalog import Catalog
from engine.datadir import DataDir
from engine.store.segment import CorruptBatch, Segment, SegmentMissing, SegmentUnreadable

#: below every timestamp: the first record at or after an offset is the record there
EARLIEST = -(2**63)
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

    def first_at_or_after_each(
        self, topic: str, partition: int, segment_base: int, start_offset: int, thetas: Sequence[int]
    ) -> list[FirstRecord | None]:
        """:meth:`first_at_or_after` for each of ``thetas``, the segment read once."""


@dataclass(frozen=True)
class StoreRecordTimes:
    """Record timestamps read from the segment files of a data directory."""

    data: DataDir

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        return self.first_at_or_after_each(topic, partition, segment_base, start_offset, [theta])[0]

    def first_at_or_after_each(
        self, topic: str, partition: int, segment_base: int, start_offset: int, thetas: Sequence[int]
    ) -> list[FirstRecord | None]:
        directory = self.data.partition_dir(topic, partition)
        try:
            # Sealed: nothing past the valid data is cut, and nothing is repaired here.
            # Opening validates every batch: once for all the thresholds.
            segment = Segment.open(directory, segment_base, sealed=True, repair=False)
        except SegmentMissing:
            return [None] * len(thetas)  # pruned since the snapshot was read: the next segment decides
        found = (segment.first_at_or_after(start_offset, theta) for theta in thetas)
        return [None if record is None else FirstRecord(record.offset, record.timestamp) for record in found]


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


def time_cuts_in(
    records: RecordTimes, topic: str, partition: int, segment_base: int, log_start: int, thetas: Sequence[int]
) -> list[int | None]:
    """Per θ of ``thetas``, the first offset at or after the log start, in the segment
    at ``segment_base``, whose timestamp is >= θ; None where it holds none."""
    start = max(segment_base, log_start)
    found = records.first_at_or_after_each(topic, partition, segment_base, start, thetas)
    return [None if record is None else record.offset for record in found]


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
