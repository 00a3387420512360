"""The forecast's synthetic segments under ``segment_roll`` (engine/forecast/extend.py):
the store checks the roll where an append begins and fills segments by size inside
one (engine/store/partition.py ``append``), so the records of a backfill, appended
1000 at a time, roll only where an append begins; records appended one at a time
roll at any of them. A cycle (one now, one every prune interval) seals a segment
whose first record is ``segment_roll`` old, and records arrive at their stamps, an
append's too: the segment takes those stamped by then.

Most tests here run the cycles a day apart, to see the store's rolls alone."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.forecast.extend import Partitions, partitions_of
from engine.forecast.rates import Rate
from engine.prune import tables
from engine.prune.by_partition import partition_rows
from engine.prune.snapshot import Snapshot
from engine.store.batch import HEADER_SIZE
from engine.store.partition import MAX_BATCH_RECORDS

NOW = 1_800_000_000_000
MINUTE = 60_000
RECORD = 116  # 100 value bytes and 16 of framing
SEGMENT = 1024  # 8 records of a run and its header: 968 bytes; a 9th does not fit
ROLL = 5 * MINUTE
DAY = 24 * 60 * MINUTE
#: a record every 2 minutes (synthetic record j stamped (j + 1) * 2 minutes after now),
#: appended 1000 at a time as a backfill in one `ebb produce` is (a header a piece)
BACKFILL = Rate(1, 2 * MINUTE, RECORD, "observed", header=HEADER_SIZE, appended=MAX_BATCH_RECORDS)
#: the same records appended one at a time (`ebb produce --count 1` each)
ONE_BY_ONE = Rate(1, 2 * MINUTE, RECORD, "observed", header=HEADER_SIZE)


def _partitions_of(
    rate: Rate, active: tuple[int, int] | None = None, roll: int = ROLL, prune_interval: int = DAY
) -> Partitions:
    """One partition of a topic rolled every ``roll``, written at ``rate``, with
    ``active`` (records, first timestamp) in its active segment, or no segment, and
    cycles every ``prune_interval``."""
    topics = pa.Table.from_pylist([{"topic": "kd", "segment_roll": roll}], schema=tables.TOPICS)
    records = 0 if active is None else active[0]
    partitions = pa.Table.from_pylist(
        [{"topic": "kd", "partition": 0, "log_start_offset": 0, "next_offset": records}], schema=tables.PARTITIONS
    )
    segments = tables.SEGMENTS.empty_table()
    if active is not None:
        segment = {"topic": "kd", "partition": 0, "base_offset": 0, "next_offset": records,
                   "size_bytes": HEADER_SIZE + records * RECORD, "first_timestamp": active[1],
                   "max_timestamp": active[1] + (records - 1) * 2 * MINUTE, "sealed": False}  # fmt: skip
        segments = pa.Table.from_pylist([segment], schema=tables.SEGMENTS)
    empty = {name: schema.empty_table() for name, schema in tables.SNAPSHOT_TABLES.items()}
    snapshot = Snapshot(NOW, {**empty, "topics": topics, "partitions": partitions, "segments": segments}, {})
    return partitions_of(snapshot, partition_rows(segments, partitions), [rate], {"kd": SEGMENT}, prune_interval)


def _segment_records(parts: Partitions, start: int) -> int:
    return int(parts.segment_records(np.array([0]), np.array([start]), NOW)[0])


def test_a_backfills_segment_holds_what_fits_however_far_apart_its_records_are_stamped() -> None:
    """Inside an append the store never rolls by time: a segment holds the 8 records
    that fit, 14 minutes of them under a 5-minute roll, as the backfill's history
    does. Cut at the roll, the forecast held 3 records of 388 bytes a segment."""
    parts = _partitions_of(BACKFILL)
    assert _segment_records(parts, 0) == 8
    assert _segment_records(parts, 8) == 8
    assert parts.bytes_of(np.array([0]), np.array([0]), np.array([8]))[0] == HEADER_SIZE + 8 * RECORD


def test_a_segment_ends_where_an_append_begins_past_the_roll() -> None:
    """A segment begun 4 records before the end of an append: the next append's first
    record is stamped 8 minutes after the segment's first, so it begins a segment,
    though 4 of its records and their header would fit."""
    parts = _partitions_of(BACKFILL)
    start = MAX_BATCH_RECORDS - 4
    assert _segment_records(parts, start) == 4
    assert int(parts.fitting(np.array([0]), np.array([start]), np.array([SEGMENT]))[0]) == 8


def test_records_appended_one_at_a_time_roll_at_any_record() -> None:
    """Each record its own append: the fourth, stamped 6 minutes after the first, rolls."""
    parts = _partitions_of(ONE_BY_ONE)
    assert [_segment_records(parts, start) for start in (0, 3, 6)] == [3, 3, 3]


def test_the_active_segment_takes_a_backfills_first_append_until_it_is_full() -> None:
    """The active segment holds 2 records, its first stamped 2 minutes before now: the
    first synthetic record (2 minutes after now, 4 after that one) begins an append
    and does not roll it, so the append fills it up to its size (6 more records).
    Cut at the roll, the forecast let it take 1; appended one at a time, it does."""
    assert _partitions_of(BACKFILL, active=(2, NOW - 2 * MINUTE)).room[0] == 6
    assert _partitions_of(ONE_BY_ONE, active=(2, NOW - 2 * MINUTE)).room[0] == 1
    # its first record 4 minutes before now: the first append's first record rolls it
    assert _partitions_of(BACKFILL, active=(2, NOW - 4 * MINUTE)).room[0] == 0


def test_a_producers_batch_rolls_whole_under_a_roll_of_zero() -> None:
    """Batches of 3 records stamped alike (``ebb produce --count 3`` each) under
    ``segment_roll 0``: each batch begins a segment (the roll is checked at its first
    record) and keeps its records together; cut at any record, the forecast made a
    segment of each record."""
    batched = Rate(1, 2 * MINUTE, RECORD, "observed", batch=3, header=HEADER_SIZE)
    parts = _partitions_of(batched, roll=0)
    assert [_segment_records(parts, start) for start in (0, 3, 4)] == [3, 3, 2]


def test_a_cycle_seals_a_backfills_segment_once_its_first_record_is_roll_old() -> None:
    """Cycles every minute: the segment begun by the record stamped 2 minutes after
    now is sealed by the cycle at +7 minutes, the first to find it 5 minutes old,
    with the records stamped by then (+2, +4, +6); the next begins at +8 and is
    sealed at +13 (+8, +10, +12). Without the cycles a backfill's append of 1000,
    stamped 33 hours apart, held 8 records a segment, and a week's worth of such
    segments under a day's roll (one each, kept while its newest record was young)."""
    parts = _partitions_of(BACKFILL, prune_interval=MINUTE)
    assert [_segment_records(parts, start) for start in (0, 3)] == [3, 3]
    # the cycles 10 minutes apart: at +10 (+2 to +10), and again at +20 for the next
    parts = _partitions_of(BACKFILL, prune_interval=10 * MINUTE)
    assert [_segment_records(parts, start) for start in (0, 5)] == [5, 5]


def test_a_cycle_seals_the_active_segment_once_its_first_record_is_roll_old() -> None:
    """The active segment's first record is stamped 2 minutes before now: the first
    synthetic record (+2) does not roll it, and the cycle at +3 minutes, the first to
    find it 5 minutes old, seals it with that record alone; with the cycles a day
    apart the append fills it (6 more records)."""
    assert _partitions_of(BACKFILL, active=(2, NOW - 2 * MINUTE), prune_interval=MINUTE).room[0] == 1
    assert _partitions_of(BACKFILL, active=(2, NOW - 2 * MINUTE)).room[0] == 6
