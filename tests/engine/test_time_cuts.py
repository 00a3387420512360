"""Record-level time cuts in a snapshot's segments (engine/prune/time_cuts.py), many
at once: each must be the first offset at or after the log start whose record is
stamped θ or later, as a scan of every record finds it; records the store cannot
read (a segment pruned since the snapshot) are not there. The segments' newest
records may be older than the records before them (a producer's clock), and may lie
below the log start, so that the first candidate does not always hold the cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prune.record_times import NO_RECORD, FirstRecord
from engine.prune.time_cuts import CutCandidates, RecordReads

#: a segment: its records' timestamps in offset order, and whether the store still has it
segment = st.tuples(st.lists(st.integers(0, 40), min_size=0, max_size=4), st.booleans().map(lambda gone: not gone))


@dataclass
class Partition:
    topic: str
    number: int
    #: per segment: base offset, timestamps, whether the store has it
    segments: list[tuple[int, list[int], bool]]
    log_start: int

    @property
    def log_end(self) -> int:
        base, stamps, _ = self.segments[-1] if self.segments else (0, [], True)
        return base + len(stamps)

    def records(self) -> list[tuple[int, int]]:
        """Every (offset, timestamp) the store can read."""
        return [(base + i, ts) for base, stamps, kept in self.segments if kept for i, ts in enumerate(stamps)]


@st.composite
def partitions(draw: st.DrawFn) -> list[Partition]:
    drawn: list[Partition] = []
    for topic in draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)):
        for number in range(draw(st.integers(1, 3))):
            segments, base = [], 0
            for stamps, kept in draw(st.lists(segment, max_size=5)):
                segments.append((base, stamps, kept))
                base += len(stamps)
            drawn.append(Partition(topic, number, segments, draw(st.integers(0, base))))
    return sorted(drawn, key=lambda p: (p.topic, p.number))


class Store:
    """Records as :class:`Partition` holds them, counting the segments read."""

    def __init__(self, drawn: list[Partition]) -> None:
        self.segments = {(p.topic, p.number, base): (stamps, kept) for p in drawn for base, stamps, kept in p.segments}
        self.opened = 0

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        stamps, kept = self.segments[(topic, partition, segment_base)]
        found = [
            FirstRecord(segment_base + i, ts)
            for i, ts in enumerate(stamps)
            if kept and segment_base + i >= start_offset and ts >= theta
        ]
        return found[0] if found else None

    def first_offsets(self, reads: RecordReads) -> np.ndarray:
        found = np.full(len(reads), NO_RECORD, np.int64)
        for (topic, partition, base), entries in reads.by_segment().items():
            self.opened += 1
            for entry in entries:
                record = self.first_at_or_after(
                    topic, partition, base, int(reads.start_offset[entry]), int(reads.theta[entry])
                )
                found[entry] = NO_RECORD if record is None else record.offset
        return found


def _tables(drawn: list[Partition]) -> tuple[pa.Table, pa.Table, np.ndarray]:
    partitions_ = pa.table(
        {
            "topic": [p.topic for p in drawn],
            "partition": pa.array([p.number for p in drawn], pa.int32()),
            "log_start_offset": pa.array([p.log_start for p in drawn], pa.int64()),
            "next_offset": pa.array([p.log_end for p in drawn], pa.int64()),
        }
    )
    rows = [(r, base, stamps) for r, p in enumerate(drawn) for base, stamps, _ in p.segments]
    segments = pa.table(
        {
            "topic": [drawn[r].topic for r, _, _ in rows],
            "partition": pa.array([drawn[r].number for r, _, _ in rows], pa.int32()),
            "base_offset": pa.array([base for _, base, _ in rows], pa.int64()),
            "next_offset": pa.array([base + len(stamps) for _, base, stamps in rows], pa.int64()),
            "max_timestamp": pa.array([max(stamps, default=None) for _, _, stamps in rows], pa.int64()),
        }
    )
    return partitions_, segments, np.array([r for r, _, _ in rows], np.int64)


@settings(max_examples=300, deadline=None)
@given(drawn=partitions(), thetas=st.lists(st.integers(-1, 42), min_size=1, max_size=4))
def test_every_cut_is_the_first_record_at_or_after_the_log_start_as_recent_as_theta(
    drawn: list[Partition], thetas: list[int]
) -> None:
    partitions_, segments, segment_rows = _tables(drawn)
    candidates = CutCandidates.of(segments, segment_rows, partitions_)
    rows = np.repeat(np.arange(len(drawn)), len(thetas))
    theta = np.tile(np.array(thetas, np.int64), len(drawn))
    store = Store(drawn)
    cuts = candidates.cuts(store, rows, theta, candidates.first(rows, theta))
    expected = [
        next((offset for offset, ts in drawn[r].records() if offset >= drawn[r].log_start and ts >= t), NO_RECORD)
        for r, t in zip(rows.tolist(), theta.tolist())
    ]
    assert cuts.tolist() == expected


def test_a_segment_is_read_once_for_all_its_thresholds() -> None:
    drawn = [Partition("a", 0, [(0, [5, 10, 20], True), (3, [30, 40], True)], 0)]
    partitions_, segments, segment_rows = _tables(drawn)
    candidates = CutCandidates.of(segments, segment_rows, partitions_)
    rows, theta = np.zeros(3, np.int64), np.array([6, 11, 35])
    store = Store(drawn)
    assert candidates.cuts(store, rows, theta, candidates.first(rows, theta)).tolist() == [1, 2, 4]
    assert store.opened == 2  # the first segment for 6 and 11, the second for 35


def test_a_cut_whose_newer_records_lie_below_the_log_start_is_in_the_next_segment() -> None:
    # the first segment's newest record (offset 0, stamped 50) is below the log start
    drawn = [Partition("a", 0, [(0, [50, 1, 2], True), (3, [3, 4], True), (5, [60], True)], 1)]
    partitions_, segments, segment_rows = _tables(drawn)
    candidates = CutCandidates.of(segments, segment_rows, partitions_)
    rows, theta = np.zeros(1, np.int64), np.array([40])
    assert candidates.cuts(Store(drawn), rows, theta, candidates.first(rows, theta)).tolist() == [5]
