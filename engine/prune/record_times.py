"""Record timestamps where a time cut falls inside a segment: the store answers
(:class:`StoreRecordTimes`) like Kafka's offsetsForTimes. The snapshot asks for the
cuts a plan needs, a manual truncate or group move for its own; no Arrow here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from engine.catalog.catalog import Catalog
from engine.datadir import DataDir
from engine.store.segment import Segment, SegmentMissing


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


@dataclass(frozen=True)
class StoreRecordTimes:
    """Record timestamps read from the segment files of a data directory."""

    data: DataDir

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        directory = self.data.partition_dir(topic, partition)
        try:
            # Sealed: nothing past the valid data is cut, and nothing is repaired here.
            segment = Segment.open(directory, segment_base, sealed=True, repair=False)
        except SegmentMissing:
            return None  # pruned since the snapshot was read: the next segment decides
        found = segment.first_at_or_after(start_offset, theta)
        return None if found is None else FirstRecord(found.offset, found.timestamp)


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
