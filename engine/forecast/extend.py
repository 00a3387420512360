"""The future as one snapshot: a virtual topic per (topic, instant), planned at once.

The virtual topic of a topic at instant ``t`` holds the topic's partitions as the
snapshot has them, plus the records its ingest rate (engine/forecast/rates.py)
appends by ``t``: first into the active segment, up to ``segment_size``, then into
new segments of ``segment_size``, the last one active. Its groups' positions have
moved on by then (below), and its record-level time cuts are those of ``t``.
Planning that snapshot once plans every instant: the plan of a virtual topic is the
plan of the topic at ``t`` on the catalog extended by then, as if no cycle ran in
between. Every rule only ever deletes more as time passes and data arrives, so that
is also what the cycles run until ``t`` leave, but for two cases (README, "The
capacity forecast"): ``max_deletes_per_cycle``, which the plan at ``t`` applies once
per cycle run by then (at most what those cycles delete); and a cap that deletes a
segment time retention keeps (its records newer than a later segment's), after which
a second cycle deletes more than one plan does.

The planner plans every partition at the snapshot's instant: each virtual topic's
timestamps (segments, commits) are shifted back by ``t - now``, so that it is
planned as of ``t``. The rules only read differences of instants (``now - ts``),
and the time cuts, which are offsets, are found before the shift.

Synthetic records come in batches of ``batch`` records stamped alike (one record
each unless the producer sends batches, engine/forecast/rates.py): record ``j``
(from 0) of a partition is in batch ``k = j // batch``, stamped
``now - lead + ceil((k + 1) * batch * per_ms / records)``; by ``t``, ``batch * ((t -
now + lead) * records // (batch * per_ms))`` records have arrived (``lead``: the part
of the first gap gone at now, a steady partition's cadence going on from its last
record). A segment takes the records
that fit in ``segment_size`` (with a batch header per piece of a batch where the rate
has one) and, with a ``segment_roll``, the appends (runs of ``header_run`` records
from record 0) until one begins with a record stamped that much or more after its
first one: the store checks the roll where an append begins, never inside one. The
first cycle (one now, one every prune interval) that finds a segment
``segment_roll`` old seals it too, with the records stamped by then: a record
arrives at its stamp, an append's too. A group that committed within the rate window keeps its lag (it
reads as fast as records arrive), or reads at the pace observed from its commits
(engine/forecast/reading.py), and commits at ``t``; one that did not, or never
committed since it was created, or is named stalled, stays where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast.rates import Rate
from engine.forecast.reading import READING, Reading
from engine.forecast.thresholds import threshold
from engine.forecast.vectorised import values
from engine.prune import tables
from engine.prune.by_partition import partition_rows
from engine.prune.plan.rules import ROLL
from engine.prune.record_times import NO_RECORD, RecordTimes
from engine.prune.snapshot import Snapshot
from engine.prune.time_cuts import CutCandidates

#: the instant the roll holds from, solved from the planner's rule
_ROLL_DUE = threshold(ROLL, "now")


@dataclass(frozen=True)
class Extension:
    """The virtual snapshot and how its topics map back: virtual topic ``v`` is
    ``topics[v % len(topics)]`` at ``instants[v // len(topics)]``."""

    snapshot: Snapshot
    instants: list[int]
    topics: list[str]
    names: list[str]
    #: per instant, per row of the snapshot's partitions: bytes and segments before
    #: that instant's cycle
    on_disk: list[tuple[np.ndarray, np.ndarray]]


def virtual_name(instant_index: int, topic: str, label: str = "") -> str:
    return f"{label}{instant_index}/{topic}"


@dataclass(frozen=True)
class Partitions:
    """Per row of the snapshot's partitions: what the extension needs, as arrays."""

    next_offset: np.ndarray
    records: np.ndarray
    per_ms: np.ndarray
    record_bytes: np.ndarray
    segment_size: np.ndarray
    roll: np.ndarray  # segment_roll in ms; -1: none
    active: np.ndarray  # the row in segments of the partition's active segment; -1: none
    room: np.ndarray  # records the active segment still takes
    batch: np.ndarray  # records stamped alike
    header: np.ndarray  # bytes a piece of a batch adds (0: in record_bytes)
    header_run: np.ndarray  # records that share a header: batch's, or an append's (Rate.header_run)
    lead: np.ndarray  # ms of the first gap gone at now (Rate.lead): the records are stamped from now - lead
    prune_interval_ms: int  # the cycles run now and every prune interval after
    real: CutCandidates  # the snapshot's segments, where a time cut reads their records

    def timestamp(self, rows: np.ndarray, records: np.ndarray, now: int) -> np.ndarray:
        """The timestamp of synthetic record ``records`` (from 0) of partition ``rows``."""
        num, batch = self.records[rows], self.batch[rows]
        return now - self.lead[rows] - ((-(records // batch + 1) * batch * self.per_ms[rows]) // np.maximum(num, 1))

    def arrived(self, rows: np.ndarray | slice, elapsed: int | np.ndarray) -> np.ndarray:
        """How many synthetic records of partition ``rows`` are stamped at most
        ``elapsed`` after now: whole batches ``k`` with ``ceil((k + 1) * batch *
        per_ms / records) <= elapsed + lead``."""
        batch = self.batch[rows]
        return np.maximum(0, (elapsed + self.lead[rows]) * self.records[rows] // (batch * self.per_ms[rows])) * batch

    def stamped_before(self, rows: np.ndarray, instant: np.ndarray, now: int) -> np.ndarray:
        """How many synthetic records of partition ``rows`` are stamped before ``instant``."""
        return self.arrived(rows, instant - now - 1)

    def bytes_of(self, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The bytes synthetic records ``[lo, hi)`` of partition ``rows`` take in one
        segment: theirs, and a header for each run sharing one (a batch, or an
        append: ``header_run``) they hold a piece of."""
        run = self.header_run[rows]
        pieces = np.where(hi > lo, -(-hi // run) - lo // run, 0)
        return (hi - lo) * self.record_bytes[rows] + pieces * self.header[rows]

    def fitting(self, rows: np.ndarray, lo: np.ndarray, room: np.ndarray) -> np.ndarray:
        """How many synthetic records from ``lo`` of partition ``rows`` fit in
        ``room`` bytes, as the store appends them: the rest of ``lo``'s run sharing a
        header (``header_run``), whole runs, then as many of the next one's records as
        fit with its header."""
        size, header, run = self.record_bytes[rows], self.header[rows], self.header_run[rows]
        whole = header + run * size
        rest = run - lo % run
        after_rest = room - header - rest * size
        last = np.maximum(0, (after_rest % whole - header) // size)
        return np.where(after_rest < 0, np.maximum(0, (room - header) // size), rest + after_rest // whole * run + last)

    def rolls_at(self, rows: np.ndarray, within: np.ndarray) -> np.ndarray:
        """The first synthetic record from ``within`` (of partition ``rows``) that
        begins an append (a multiple of ``header_run``): the store checks
        ``segment_roll`` only where an append's first batch begins, and the rest of
        that append goes into new segments by size alone, so a time roll waits for
        the next append (a backfill's records, stamped 2 minutes apart and appended
        1000 at a time, were cut 3 to a segment under a 5-minute roll, where the
        store fills a 1 KiB segment with 8)."""
        run = self.header_run[rows]
        return -(-within // run) * run

    def sealed_by_cycle(self, rows: np.ndarray, first: np.ndarray, now: int) -> np.ndarray:
        """How many synthetic records of partition ``rows`` are stamped at or before
        the first cycle that finds a segment whose first record is stamped ``first``
        ``segment_roll`` old: that cycle seals it (the executor's roll), so those
        records are the last it takes. Records arrive at their stamps, an append's
        too: a cycle comes between those stamped by then and the rest, and a
        backfill's appends of 1000, stamped hours apart, would otherwise have held
        hours in one segment, kept while its newest record was young."""
        return self.arrived(rows, self.rolling_cycle(rows, first, now) - now)

    def rolling_cycle(self, rows: np.ndarray, first: np.ndarray, now: int) -> np.ndarray:
        """The first cycle (one now, one every prune interval) at which the planner's
        roll (rules.ROLL) holds of a segment of partition ``rows`` whose first record
        is stamped ``first``, and so seals it."""
        roll = np.maximum(self.roll[rows], 0)
        due = values(_ROLL_DUE, {"active_first_ts": first, "segment_roll": roll}, null=now)
        return now + np.maximum(0, -(-(due - now) // self.prune_interval_ms)) * self.prune_interval_ms

    def segment_records(self, rows: np.ndarray, start: np.ndarray, now: int) -> np.ndarray:
        """The records a segment whose first record is synthetic record ``start`` of
        partition ``rows`` takes: what fits in ``segment_size``, and with a roll
        those before the first append after ``start`` that begins with a record
        stamped ``segment_roll`` or more after ``start``'s, and those stamped by the
        cycle that rolls it (:meth:`sealed_by_cycle`); at least that one."""
        roll = self.roll[rows]
        by_size = self.fitting(rows, start, self.segment_size[rows])
        first = self.timestamp(rows, start, now)
        within = self.stamped_before(rows, first + np.maximum(roll, 0), now)
        by_append = self.rolls_at(rows, np.maximum(within, start + 1))
        by_time = np.minimum(by_append, self.sealed_by_cycle(rows, first, now)) - start
        return np.maximum(1, np.where(roll < 0, by_size, np.minimum(by_size, by_time)))


def partitions_of(
    snapshot: Snapshot,
    segment_rows: np.ndarray,
    rates: Sequence[Rate],
    segment_sizes: Mapping[str, int],
    prune_interval_ms: int,
) -> Partitions:
    partitions, segments = snapshot.tables["partitions"], snapshot.tables["segments"]
    count = partitions.num_rows
    record_bytes = np.array([r.record_bytes for r in rates], dtype=np.int64)
    names = partitions["topic"].to_pylist()
    segment_size = np.array([segment_sizes[t] for t in names], dtype=np.int64)
    topics = snapshot.tables["topics"]
    roll_of = dict(zip(topics["topic"].to_pylist(), topics["segment_roll"].to_pylist()))
    roll = np.array([-1 if roll_of[t] is None else roll_of[t] for t in names], dtype=np.int64)
    # The active segment is the partition's last one, when it is not sealed.
    sealed = np.append(segments["sealed"].to_numpy(zero_copy_only=False), True)
    last = np.searchsorted(segment_rows, np.arange(count), side="right") - 1
    own = (last >= 0) & (np.append(segment_rows, -1)[last] == np.arange(count))
    active = np.where(own & ~sealed[last], last, -1)
    used = np.append(segments["size_bytes"].to_numpy(), 0)[active]
    first = np.append(segments["first_timestamp"].fill_null(snapshot.now).to_numpy(), 0)[active]
    parts = Partitions(
        next_offset=partitions["next_offset"].to_numpy(),
        records=np.array([r.records for r in rates], dtype=np.int64),
        per_ms=np.array([r.per_ms for r in rates], dtype=np.int64),
        record_bytes=record_bytes,
        segment_size=segment_size,
        roll=roll,
        active=active,
        room=np.zeros(count, dtype=np.int64),
        batch=np.array([r.batch for r in rates], dtype=np.int64),
        header=np.array([r.header for r in rates], dtype=np.int64),
        header_run=np.array([r.header_run for r in rates], dtype=np.int64),
        lead=np.array([r.lead for r in rates], dtype=np.int64),
        prune_interval_ms=prune_interval_ms,
        real=CutCandidates.of(segments, segment_rows, partitions),
    )
    rows = np.arange(count)
    # An empty active segment takes records as a new one does; a used one, what
    # fits in its bytes and (with a roll) the appends until one begins with a record
    # stamped segment_roll or more after its first one (synthetic record 0 begins one),
    # and those stamped by the cycle that rolls it.
    fits = parts.fitting(rows, np.zeros(count, np.int64), segment_size - used)
    within = parts.stamped_before(rows, first + np.maximum(roll, 0), snapshot.now)
    by_time = np.minimum(parts.rolls_at(rows, within), parts.sealed_by_cycle(rows, first, snapshot.now))
    rolls = np.where(roll < 0, fits, np.minimum(fits, by_time))
    room = np.where(
        active < 0, 0, np.where(used == 0, parts.segment_records(rows, np.zeros(count, np.int64), snapshot.now), rolls)
    )
    return replace(parts, room=room)


def extend(
    snapshot: Snapshot,
    instants: Sequence[int],
    rates: Sequence[Rate],
    segment_sizes: Mapping[str, int],
    *,
    readings: Sequence[Reading],
    records: RecordTimes,
    prune_interval_ms: int,
    label: str = "",
) -> Extension:
    """The virtual snapshot of ``snapshot`` at each of ``instants`` (>= its ``now``);
    ``rates`` per row of its partitions, ``readings`` per row of its positions
    (engine/forecast/reading.py); ``segment_sizes`` per topic; cycles run every
    ``prune_interval_ms``; ``label`` tells its virtual topics from those of another
    extension planned with them."""
    now = snapshot.now
    topic_names = snapshot.tables["topics"]["topic"].to_pylist()
    segments = snapshot.tables["segments"]
    segment_rows = partition_rows(segments, snapshot.tables["partitions"])
    parts = partitions_of(snapshot, segment_rows, rates, segment_sizes, prune_interval_ms)
    names = [virtual_name(i, topic, label) for i in range(len(instants)) for topic in topic_names]
    pieces: dict[str, list[pa.Table]] = {name: [] for name in tables.SNAPSHOT_TABLES}
    on_disk: list[tuple[np.ndarray, np.ndarray]] = []
    starts = synthetic_starts(parts, parts.arrived(slice(None), max(instants) - now), now)
    for i, at in enumerate(instants):
        elapsed = at - now
        arrived = parts.arrived(slice(None), elapsed)
        renamed = _renamer(snapshot, names[i * len(topic_names) : (i + 1) * len(topic_names)])
        pieces["topics"].append(renamed(_topics_at(snapshot.tables["topics"], elapsed, prune_interval_ms)))
        partitions = snapshot.tables["partitions"]
        pieces["partitions"].append(
            renamed(partitions.set_column(3, "next_offset", pa.array(parts.next_offset + arrived)))
        )
        segments_at = _segments_at(snapshot, segment_rows, parts, starts, arrived, now, elapsed, prune_interval_ms)
        pieces["segments"].append(renamed(segments_at))
        on_disk.append(_totals(segments_at, snapshot.tables["partitions"]))
        pieces["positions"].append(renamed(positions_at(snapshot, arrived, at, readings)))
        pieces["time_cuts"].append(renamed(time_cuts_at(snapshot, parts, arrived, at, records)))
    virtual = {name: pa.concat_tables(parts_).cast(tables.SNAPSHOT_TABLES[name]) for name, parts_ in pieces.items()}
    return Extension(Snapshot(now, virtual, snapshot.rejected), list(instants), topic_names, names, on_disk)


def _topics_at(topics: pa.Table, elapsed: int, prune_interval_ms: int) -> pa.Table:
    """The topics with ``max_deletes_per_cycle`` once per cycle run by ``elapsed``
    after now (one now, one a prune interval after): the plan at an instant stands for
    the cycles until then, and a cycle's limit applied once would hold the whole
    horizon to one cycle's deletions."""
    cycles = 1 + elapsed // prune_interval_ms
    field = topics.schema.get_field_index("max_deletes_per_cycle")
    return topics.set_column(field, "max_deletes_per_cycle", pc.multiply(topics["max_deletes_per_cycle"], cycles))


def _totals(segments: pa.Table, partitions: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and segments of each row of ``partitions`` in ``segments``."""
    row = partition_rows(segments, partitions)
    size = segments["size_bytes"].to_numpy()
    return (
        np.bincount(row, weights=size, minlength=partitions.num_rows).astype(np.int64),
        np.bincount(row, minlength=partitions.num_rows).astype(np.int64),
    )


def _renamer(snapshot: Snapshot, names: list[str]) -> Callable[[pa.Table], pa.Table]:
    """A table of the snapshot's with each topic replaced by its virtual topic."""
    topics = snapshot.tables["topics"]["topic"]

    def renamed(table: pa.Table) -> pa.Table:
        index = pc.index_in(table["topic"], value_set=topics)
        return table.set_column(
            table.schema.get_field_index("topic"), "topic", pa.array(names, pa.string()).take(index)
        )

    return renamed


@dataclass(frozen=True)
class Starts:
    """The synthetic segments up to the horizon, in (partition, offset) order: of
    partition row ``of``, synthetic records ``[start, end)`` once that many arrived."""

    of: np.ndarray
    start: np.ndarray
    end: np.ndarray


def synthetic_starts(parts: Partitions, arrived: np.ndarray, now: int) -> Starts:
    """The synthetic segments once ``arrived`` records have been appended after the
    active segment's ``room``. Without a roll or batch headers every one takes as
    many records as fit in ``segment_size``; with a roll a segment's records depend on
    its first one's timestamp, and with headers on where in its batch it begins, so
    those are laid one after another (a step per segment, over those partitions)."""
    uniform = (parts.roll < 0) & (parts.header == 0)
    fixed = np.flatnonzero(uniform)
    capacity = np.maximum(1, parts.segment_size[fixed] // parts.record_bytes[fixed])
    count = np.maximum(0, -(-(arrived[fixed] - parts.room[fixed]) // capacity))
    rows = np.repeat(fixed, count)
    k = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)  # the segment's index in its partition
    first = parts.room[rows] + k * np.repeat(capacity, count)
    of, start, end = [rows], [first], [first + np.repeat(capacity, count)]
    rows = np.flatnonzero(~uniform)
    at = parts.room[rows]
    while (left := at < arrived[rows]).any():
        rows, at = rows[left], at[left]
        after = at + parts.segment_records(rows, at, now)
        of.append(rows)
        start.append(at)
        end.append(after)
        at = after
    of_, start_, end_ = np.concatenate(of), np.concatenate(start), np.concatenate(end)
    order = np.lexsort((start_, of_))
    return Starts(of_[order], start_[order], end_[order])


def _segments_at(
    snapshot: Snapshot,
    segment_rows: np.ndarray,
    parts: Partitions,
    starts: Starts,
    arrived: np.ndarray,
    now: int,
    elapsed: int,
    prune_interval_ms: int,
) -> pa.Table:
    """The segments of every partition once ``arrived`` records have been appended
    and the cycles run until then (every ``prune_interval_ms``) have rolled what
    they roll, timestamps shifted back by ``elapsed``; in (partition, offset) order."""
    columns = grown(snapshot, segment_rows, parts, starts, arrived, now)
    del columns["sealed_after"]
    columns = _rolled_by_cycles(columns, parts.roll, last_cycle(elapsed, prune_interval_ms, now))
    partitions = snapshot.tables["partitions"]
    return pa.table(
        {
            "topic": partitions["topic"].take(columns["row"]),
            "partition": partitions["partition"].take(columns["row"]),
            "base_offset": columns["base_offset"],
            "next_offset": columns["next_offset"],
            "size_bytes": columns["size_bytes"],
            "first_timestamp": pa.array(columns["first"] - elapsed, mask=~columns["first_valid"]),
            "max_timestamp": pa.array(columns["newest"] - elapsed, mask=~columns["newest_valid"]),
            "sealed": columns["sealed"],
        },
        schema=tables.SEGMENTS,
    )


def grown(
    snapshot: Snapshot, segment_rows: np.ndarray, parts: Partitions, starts: Starts, arrived: np.ndarray, now: int
) -> dict[str, np.ndarray]:
    """The segments of every partition once ``arrived`` records have been appended,
    before any cycle rolls one, timestamps not shifted; in (partition, offset) order,
    as columns: ``row`` (the partition's), offsets, size, first and newest timestamps
    (each with a ``_valid`` mask), ``sealed``, and ``sealed_after``: how many
    synthetic records of the partition seal it once arrived (-1: sealed already)."""
    real = snapshot.tables["segments"]
    base = real["base_offset"].to_numpy()
    next_ = real["next_offset"].to_numpy().copy()
    size = real["size_bytes"].to_numpy().copy()
    first_valid = real["first_timestamp"].is_valid().to_numpy(zero_copy_only=False).copy()
    first = real["first_timestamp"].fill_null(0).to_numpy().copy()
    newest_valid = real["max_timestamp"].is_valid().to_numpy(zero_copy_only=False).copy()
    newest = real["max_timestamp"].fill_null(0).to_numpy().copy()
    sealed = real["sealed"].to_numpy(zero_copy_only=False).copy()

    fill = np.minimum(arrived, parts.room)
    rest = arrived - fill
    # The active segment takes records up to segment_size; it is sealed once one more arrives.
    grown = np.flatnonzero((parts.active >= 0) & (fill > 0))
    rows = parts.active[grown]
    next_[rows] += fill[grown]
    size[rows] += parts.bytes_of(grown, np.zeros_like(rows), fill[grown])
    last_ts = parts.timestamp(grown, fill[grown] - 1, now)
    newest[rows] = np.where(newest_valid[rows], np.maximum(newest[rows], last_ts), last_ts)
    newest_valid[rows] = True
    first[rows] = np.where(first_valid[rows], first[rows], parts.timestamp(grown, np.zeros_like(rows), now))
    first_valid[rows] = True
    rolled = np.flatnonzero(parts.active >= 0)
    sealed[parts.active[rolled]] = rest[rolled] > 0
    sealed_after = np.where(real["sealed"].to_numpy(zero_copy_only=False), -1, 0)
    sealed_after[parts.active[rolled]] = parts.room[rolled]

    # The new segments that have a record by now, the last one active.
    here = starts.start < arrived[starts.of]
    of = starts.of[here]
    lo = starts.start[here]
    hi = np.minimum(starts.end[here], arrived[of])
    new = {
        "base_offset": parts.next_offset[of] + lo,
        "next_offset": parts.next_offset[of] + hi,
        "size_bytes": parts.bytes_of(of, lo, hi),
        "first_timestamp": parts.timestamp(of, lo, now),
        "max_timestamp": parts.timestamp(of, hi - 1, now),
        "sealed": starts.end[here] < arrived[of],
    }
    row = np.concatenate([segment_rows, of])
    order = np.lexsort((np.concatenate([base, new["base_offset"]]), row))
    every = np.ones(len(of), bool)
    return {
        name: np.concatenate([old, added])[order]
        for name, old, added in (
            ("row", segment_rows, of),
            ("base_offset", base, new["base_offset"]),
            ("next_offset", next_, new["next_offset"]),
            ("size_bytes", size, new["size_bytes"]),
            ("first", first, new["first_timestamp"]),
            ("first_valid", first_valid, every),
            ("newest", newest, new["max_timestamp"]),
            ("newest_valid", newest_valid, every),
            ("sealed", sealed, new["sealed"]),
            ("sealed_after", sealed_after, starts.end[here]),
        )
    }


def last_cycle(elapsed: int, prune_interval_ms: int, now: int) -> int | None:
    """The last cycle before the instant ``elapsed`` after now (one now, one every
    prune interval), or None at now."""
    return None if elapsed <= 0 else now + (elapsed - 1) // prune_interval_ms * prune_interval_ms


def _rolled_by_cycles(columns: dict[str, np.ndarray], roll: np.ndarray, cycle: int | None) -> dict[str, np.ndarray]:
    """``columns`` (segments in (partition, offset) order; ``row``, the partition's row;
    timestamps not shifted) with each partition's last segment sealed, and a new empty
    active one after it, where a cycle before the instant rolled it: the executor seals
    a non-empty active segment whose first record is ``segment_roll`` old (an idle
    partition's data can then age out). The last cycle is the one to ask: no record
    came after it, or the record would have begun a segment of its own."""
    rows = columns["row"]
    if cycle is None or len(rows) == 0:
        return columns
    last = np.append(rows[1:] != rows[:-1], True)
    rolls = roll[rows]
    due = np.flatnonzero(
        last & ~columns["sealed"] & columns["first_valid"] & (columns["size_bytes"] > 0) & (rolls >= 0)
        & (columns["first"] + np.maximum(rolls, 0) <= cycle)
    )  # fmt: skip
    if len(due) == 0:
        return columns
    sealed = columns["sealed"].copy()
    sealed[due] = True
    end = columns["next_offset"][due]
    zero, no = np.zeros(len(due), np.int64), np.zeros(len(due), bool)
    empty = {"row": rows[due], "base_offset": end, "next_offset": end, "size_bytes": zero, "first": zero,
             "first_valid": no, "newest": zero, "newest_valid": no, "sealed": no}  # fmt: skip
    return {name: np.insert(column, due + 1, empty[name]) for name, column in {**columns, "sealed": sealed}.items()}


@dataclass(frozen=True)
class Moved:
    """The snapshot's positions (columns, its ``positions`` rows) at each of many
    instants (rows), commits shifted back to now (:func:`moved`)."""

    position: np.ndarray
    committed_at: np.ndarray
    group_last_commit: np.ndarray


def moved(snapshot: Snapshot, arrived: np.ndarray, instants: Sequence[int], readings: Sequence[Reading]) -> Moved:
    """Positions at each of ``instants`` (``arrived``: per partition the synthetic
    records by then): a group that reads (``readings``, one per row) has read what
    arrived by then, or at its observed pace up to the end of the log, and committed
    at the instant; timestamps shifted."""
    positions = snapshot.tables["positions"]
    row = partition_rows(positions, snapshot.tables["partitions"])
    reading = np.array([r.source in READING for r in readings], dtype=bool)
    observed = np.array([r.source == "observed" for r in readings], dtype=bool)
    offsets = np.array([r.offsets for r in readings], dtype=np.int64)
    per_ms = np.array([r.per_ms for r in readings], dtype=np.int64)
    position = positions["position"].to_numpy()
    at = np.asarray(instants, np.int64)[:, None]
    shift = at - snapshot.now
    keeps_up = arrived[:, np.maximum(row, 0)]
    end = snapshot.tables["partitions"]["next_offset"].to_numpy()[np.maximum(row, 0)] + keeps_up
    # shift * offsets in two parts: a fast reader over a week would pass int64
    paced = (shift // per_ms) * offsets + (shift % per_ms) * offsets // per_ms
    paced = np.maximum(0, np.minimum(end - position, paced))
    moves = np.where(reading & (row >= 0), np.where(observed, paced, keeps_up), 0)
    return Moved(
        position + moves,
        np.where(reading, at, positions["committed_at"].to_numpy()) - shift,
        np.where(reading, at, positions["group_last_commit"].to_numpy()) - shift,
    )


def positions_at(snapshot: Snapshot, arrived: np.ndarray, at: int, readings: Sequence[Reading]) -> pa.Table:
    """The snapshot's positions at ``at`` (:func:`moved`)."""
    positions = snapshot.tables["positions"]
    if positions.num_rows == 0:
        return positions
    one = moved(snapshot, arrived[None, :], [at], readings)
    return (
        positions.set_column(4, "position", pa.array(one.position[0]))
        .set_column(5, "committed_at", pa.array(one.committed_at[0]))
        .set_column(6, "group_last_commit", pa.array(one.group_last_commit[0]))
    )


def time_cuts_at(snapshot: Snapshot, parts: Partitions, arrived: np.ndarray, at: int, records: RecordTimes) -> pa.Table:
    """The snapshot's kinds of time cut, each at ``at`` (:func:`cut_offsets`)."""
    cuts = snapshot.tables["time_cuts"]
    offsets = cut_offsets(snapshot, parts, arrived[None, :], [at], records)[0]
    return cuts.set_column(3, "offset", pa.array(offsets, pa.int64()))


def cut_offsets(
    snapshot: Snapshot, parts: Partitions, arrived: np.ndarray, instants: Sequence[int], records: RecordTimes,
    read: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """Each of the snapshot's time cuts (columns, its ``time_cuts`` rows) at each of
    ``instants`` (rows; ``arrived``: per partition the synthetic records by then): in
    the snapshot's records if one is recent enough, else in the synthetic ones (else
    the end of the log). ``read``: per instant the partitions (a mask) whose records
    are read; the others' cuts are the synthetic ones, for a caller that does not use
    them. Each segment read is read once for all the instants whose cut it holds."""
    cuts = snapshot.tables["time_cuts"]
    topics, partitions = snapshot.tables["topics"], snapshot.tables["partitions"]
    topic_of = pc.index_in(cuts["topic"], value_set=topics["topic"]).to_numpy()
    kinds = cuts["kind"]
    limit = np.zeros(cuts.num_rows, np.int64)
    for kind, column in tables.TIME_CUT_LIMITS.items():
        mine = pc.equal(kinds, kind).to_numpy(zero_copy_only=False)
        limit[mine] = topics[column].fill_null(0).to_numpy()[topic_of[mine]]
    theta = np.asarray(instants, np.int64)[:, None] - limit
    row = np.broadcast_to(partition_rows(cuts, partitions), theta.shape)
    # the first synthetic record stamped at or after θ
    offsets = parts.next_offset[row] + np.minimum(parts.stamped_before(row, theta, snapshot.now), arrived[:, row[0]])
    # A record of the snapshot's past the log start as recent as θ: looked for there
    # (not otherwise, to save the reads).
    first = parts.real.first(row, theta)
    asked = (first < len(parts.real.row)) & (True if read is None else read[:, row[0]])
    found = parts.real.cuts(records, row[asked], theta[asked], first[asked])
    offsets[asked] = np.where(found == NO_RECORD, offsets[asked], found)
    return offsets
