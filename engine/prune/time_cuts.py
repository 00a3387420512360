"""Record-level time cuts (docs/RETENTION.md) in a snapshot's segments, for many
partitions and thresholds at once: the snapshot's cuts at its instant, and the
forecast's at every instant of a week.

A cut is the first offset at or after the log start whose record is stamped θ or
later. Every record of a segment whose newest record is older than θ is older, so
only the segments at least as recent are candidates, oldest first (the catalog's
``cut_candidates``); the first usually holds the cut. It may not where its newer
records lie below the log start, or the segment was pruned since the snapshot was
read: then the next candidate decides. The candidates are found by numpy over every
partition at once; the store reads each segment asked once for all its thresholds
(:meth:`RecordTimes.first_offsets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine.prune.by_partition import Runs, running_max
from engine.prune.record_times import NO_RECORD, RecordTimes

#: below every timestamp: a segment with no record past the log start
_NONE = np.iinfo(np.int64).min


@dataclass(frozen=True)
class RecordReads:
    """Many asks of record timestamps, one per entry: in ``topics[topic]``'s
    ``partition``, the segment at ``segment_base``, its first record at or after
    ``start_offset`` stamped ``theta`` or later."""

    topics: Sequence[str]
    topic: np.ndarray
    partition: np.ndarray
    segment_base: np.ndarray
    start_offset: np.ndarray
    theta: np.ndarray

    def __len__(self) -> int:
        return len(self.theta)

    def by_segment(self) -> dict[tuple[str, int, int], list[int]]:
        """The entries asking each segment: a segment is opened once for all of them."""
        asking: dict[tuple[str, int, int], list[int]] = {}
        names = [self.topics[t] for t in self.topic.tolist()]
        keys = zip(names, self.partition.tolist(), self.segment_base.tolist())
        for entry, key in enumerate(keys):
            asking.setdefault(key, []).append(entry)
        return asking


@dataclass(frozen=True)
class CutCandidates:
    """The segments a time cut may fall in, laid out once for any number of cuts. Per
    segment, in (partition, offset) order: its partition's row, base offset, its
    newest record where it is past the log start (:data:`_NONE` where not, or it has
    none), and the newest of those of its partition up to it; per partition row: its
    topic (of ``topics``), number and log start."""

    row: np.ndarray
    base_offset: np.ndarray
    newest: np.ndarray
    newest_through: Runs
    topics: list[str]
    topic: np.ndarray
    partition: np.ndarray
    log_start: np.ndarray

    @classmethod
    def of(cls, segments: pa.Table, row: np.ndarray, partitions: pa.Table) -> CutCandidates:
        """Over ``segments`` (any of a snapshot's, in its order), each of ``partitions``'s
        ``row``."""
        log_start = partitions["log_start_offset"].to_numpy()
        past = segments["next_offset"].to_numpy() > log_start[row]
        newest = np.where(past, segments["max_timestamp"].fill_null(_NONE).to_numpy(), _NONE)
        topic = partitions["topic"].combine_chunks().dictionary_encode()
        return cls(
            row=row,
            base_offset=segments["base_offset"].to_numpy(),
            newest=newest,
            newest_through=Runs.of(row, running_max(row, newest)),
            topics=topic.dictionary.to_pylist(),
            topic=topic.indices.to_numpy(),
            partition=partitions["partition"].to_numpy(),
            log_start=log_start,
        )

    def first(self, rows: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Per partition of ``rows``, its first segment with a record past the log start
        stamped ``theta`` or later (any shape, the same of each): the number of
        segments where none is."""
        return self.newest_through.first_at_least(rows, theta)

    def cuts(self, records: RecordTimes, rows: np.ndarray, theta: np.ndarray, first: np.ndarray) -> np.ndarray:
        """Per partition of ``rows`` (one dimension), the time cut at ``theta`` (the
        same of each) in its segments from ``first`` (:meth:`first`) on; :data:`NO_RECORD`
        where they hold none. A round of reads per candidate tried: one, but for
        the cuts whose first candidate does not hold them."""
        found = np.full(len(rows), NO_RECORD, np.int64)
        segment = first.copy()
        pending = np.flatnonzero(segment < len(self.row))
        while len(pending):
            at, of = segment[pending], rows[pending]
            reads = RecordReads(
                self.topics, self.topic[of], self.partition[of], self.base_offset[at],
                np.maximum(self.base_offset[at], self.log_start[of]), theta[pending],
            )  # fmt: skip
            offsets = np.asarray(records.first_offsets(reads), np.int64)
            held = offsets != NO_RECORD
            found[pending[held]] = offsets[held]
            pending = pending[~held]
            segment[pending] = self._next(segment[pending], rows[pending], theta[pending])
            pending = pending[segment[pending] < len(self.row)]
        return found

    def _next(self, segment: np.ndarray, rows: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Per entry, the partition's next candidate after ``segment``: the number of
        segments where there is none."""
        count = len(self.row)
        after = segment + 1
        while True:
            at = np.minimum(after, count - 1)
            own = (after < count) & (self.row[at] == rows)
            passed = own & (self.newest[at] < theta)
            if not passed.any():
                return np.where(own, after, count)
            after = after + passed
