"""The reference model of the capacity forecast: the catalog extended record by
record to each instant, then :func:`reference.model.plan` at that instant.

Independent of engine/forecast/ by construction: no shifted timestamps, no vectors;
records are appended an append at a time (``header_run`` of them, as the store is
given them) and placed one by one with the timestamps the rate gives them, and the
time cuts are found by scanning records (the model's own ``time_cut``). The quotas
are read from a second plan at the instant, the groups moved up to the log start a
plan at the cycle before leaves, as the cycles leave them.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TypedDict

from engine.store.batch import HEADER_SIZE, MAX_BATCH_BYTES, RECORD_OVERHEAD
from engine.store.partition import MAX_BATCH_RECORDS

from . import model
from .catalog import Group, Partition, Position, RefCatalog, Segment

#: a record's bytes when a rate is given for a topic with no records in the window
DEFAULT_RECORD_BYTES = 1024
#: mean gaps between batches a gap may be in a steady ingest
STEADY_GAPS = 2


@dataclass(frozen=True)
class RefRate:
    records: int  # per ``per_ms`` ms
    per_ms: int
    record_bytes: int
    batch: int = 1  # records stamped alike
    header: int = 0  # bytes a piece of a batch adds in a segment
    appended: int = 0  # records sharing a header though stamped apart (a backfill's appends); 0: batch's
    lead: int = 0  # ms of the first gap gone at now: a steady partition goes on from its last record

    @property
    def header_run(self) -> int:
        return self.appended or self.batch

    def arrived(self, elapsed: int) -> int:
        """Whole batches: the records of batch ``k`` arrive together, ``(k + 1)`` batch intervals after now."""
        if self.records == 0:
            return 0
        return (elapsed + self.lead) * self.records // (self.batch * self.per_ms) * self.batch

    def timestamp(self, now: int, j: int) -> int:
        """Synthetic record ``j`` (from 0), in batch ``j // batch``."""
        return now - self.lead + -(-(j // self.batch + 1) * self.batch * self.per_ms // self.records)


def _stamped_after(records: list[tuple[int, int]], start: int, ts_: int) -> list[int]:
    """The offsets from ``start`` of ``records`` (offset, timestamp) stamped after ``ts_``."""
    return [offset for offset, ts in records if offset >= start and ts > ts_]


def observed_rate(partition: Partition, now: int, window: int) -> RefRate:
    """With a record in the window (at most ``window`` old): from the first record
    stamped less than ``window`` before the last one (at or after the log start; from
    the first record of its segment if that segment began after that) to the end.
    With the record before them, where the gap to the first is at most two mean gaps
    of the window's (always, with one batch in the window): their records over the
    time from it to the last, or to now once the time since the last is more than
    two mean gaps. Else while the time since the last is at most a mean gap, the
    records after those stamped like the first over the time from the first to the
    last; else all of them over the time since the first. A record's bytes: the
    bytes of the segments from the oldest one that reaches into the window over their
    records, rounded down, with the rate scaled up to keep the bytes per second when
    that rounds."""
    last = max((ts for s in partition.segments for ts in s.timestamps), default=None)
    if last is None or last < now - window:
        return RefRate(0, 1, DEFAULT_RECORD_BYTES)
    # the window ends at the last record, and holds it at least
    opens_after = min(last - window, last - 1)
    for k, segment in enumerate(partition.segments):
        if any(ts > opens_after for ts in segment.timestamps):
            size = sum(s.size for s in partition.segments[k:])
            held = partition.next_offset - segment.base
            record_bytes = max(1, size // held)
            first, first_ts = segment.records()[0]
            if first_ts <= opens_after or first < partition.log_start:
                in_window = [
                    (offset, ts)
                    for s in partition.segments[k:]
                    for offset, ts in s.records()
                    if offset >= partition.log_start and ts > opens_after
                ]
                if in_window:
                    first, first_ts = in_window[0]
            every = [(offset, ts) for s in partition.segments for offset, ts in s.records()]
            later = _stamped_after(every, max(first, partition.log_start), first_ts)
            records = partition.next_offset - first
            at_first = later[0] - first if later else records  # the records stamped like the first
            batches = Fraction(records, at_first)
            mean_gap_inside = Fraction(last - first_ts, batches - 1) if batches > 1 else None
            before = [ts for offset, ts in every if partition.log_start <= offset < first]
            # the record before the window, where the gap to the first is one of the ingest's
            previous = (
                before[-1]
                if before
                and before[-1] < first_ts
                and (mean_gap_inside is None or first_ts - before[-1] <= STEADY_GAPS * mean_gap_inside)
                else None
            )
            if previous is not None:
                span = last - previous  # as many gaps as batches
                quiet = now - last > STEADY_GAPS * Fraction(span) / batches
                count, per_ms = (records, now - previous) if quiet else (records, span)
                to_last = not quiet
            elif mean_gap_inside is not None and last > first_ts and now - last <= mean_gap_inside:
                count, per_ms = records - at_first, last - first_ts
                to_last = True
            else:
                count, per_ms = records, now - first_ts
                to_last = False
            if per_ms <= 0:
                count, per_ms = 0, 1

            since_last = now - last if to_last else 0
            # a producer's batches, when the records are a whole number of the first one's
            # (or one batch, after an older record)
            if 1 < at_first < records and records % at_first == 0:
                batch = at_first
            else:
                batch = records if 1 < at_first == records and previous is not None else 1
            # each piece of a batch in a segment (counted from the window's first record) has a header
            pieces = sum(
                len({(offset - first) // batch for offset in range(s.base, s.next)}) for s in partition.segments[k:]
            )
            if batch > 1 and (size - HEADER_SIZE * pieces) % held == 0 and size - HEADER_SIZE * pieces >= held:
                return _led(
                    RefRate(count, per_ms, (size - HEADER_SIZE * pieces) // held, batch, HEADER_SIZE), since_last
                )
            if size % held == 0:
                return _led(RefRate(count, per_ms, record_bytes, batch), since_last)
            if batch == 1:
                # records stamped apart, appended many to a batch (a backfill in one call):
                # a header a segment, one more for each append of 1000 records ending in one
                holding = sum(1 for s in partition.segments[k:] if s.next > s.base)
                for ends_inside in range(held // MAX_BATCH_RECORDS + 2):
                    shared = size - HEADER_SIZE * (holding + ends_inside)
                    if shared % held == 0 and shared // held >= RECORD_OVERHEAD:
                        return _led(
                            RefRate(count, per_ms, shared // held, 1, HEADER_SIZE, MAX_BATCH_RECORDS), since_last
                        )
            # whole synthetic records, more of them, at the observed bytes per second
            exact = Fraction(count * size, per_ms * held * record_bytes).limit_denominator(per_ms)
            return _led(RefRate(exact.numerator, exact.denominator, record_bytes, batch), since_last)
    return RefRate(0, 1, DEFAULT_RECORD_BYTES)


def _led(rate: RefRate, since_last: int) -> RefRate:
    """Measured to the last record (``since_last`` ms before now, 0: measured to now),
    and less than a gap (a batch's) since it: the next record is due a gap after it."""
    if since_last <= 0 or since_last * rate.records >= rate.batch * rate.per_ms:
        return rate
    return replace(rate, lead=since_last)


def given_rate(bytes_per_second: int, record_bytes: int) -> RefRate:
    return RefRate(bytes_per_second, 1000 * record_bytes, record_bytes)


def _shared(rate: RefRate) -> int:
    """A record's bytes with its share of a batch's header."""
    return rate.record_bytes + rate.header // rate.header_run


def rates(catalog: RefCatalog, window: int, given: int | None = None) -> dict[tuple[str, int], RefRate]:
    """Observed, or ``given`` bytes/s: in records of the partition's observed size,
    else of the topic's first partition with one, else of 1 KiB or what a segment
    holds of a record alone (at least a record of no bytes with its header)."""
    out = {}
    for topic in catalog.topics:
        observed = {p.index: observed_rate(p, catalog.now, window) for p in topic.partitions}
        seen = {
            p.index: any(ts >= catalog.now - window for s in p.segments for ts in s.timestamps)
            for p in topic.partitions
        }
        if given is None:
            out.update({(topic.name, index): rate for index, rate in observed.items()})
            continue
        siblings = [_shared(observed[index]) for index in sorted(observed) if seen[index]]
        alone = min(topic.policy.segment_size, MAX_BATCH_BYTES)
        fallback = siblings[0] if siblings else max(min(DEFAULT_RECORD_BYTES, alone), HEADER_SIZE + RECORD_OVERHEAD)
        for index, rate in observed.items():
            out[(topic.name, index)] = given_rate(given, _shared(rate) if seen[index] else fallback)
    return out


class _GrowingSegment(TypedDict):
    """A :class:`Segment` while :func:`extended_partition` appends to it."""

    base: int
    next: int
    size: int
    sealed: bool
    timestamps: list[int]


def extended_partition(
    partition: Partition,
    rate: RefRate,
    segment_size: int,
    segment_roll: int | None,
    now: int,
    at: int,
    prune_interval: int,
) -> Partition:
    """``partition`` with the records that arrive by ``at`` appended and the cycles
    before ``at`` (one now, one every ``prune_interval``) run in between. The records
    come in appends of ``header_run`` (from the first), in the order of their
    timestamps; a record arrives at its stamp, so a cycle comes after the records
    stamped at or before its instant and before the rest, an append's too. A record
    goes into the active segment if that is empty, or if the record fits in
    ``segment_size`` and, where it begins an append, is stamped less than
    ``segment_roll`` after the segment's first record (the store checks the roll
    where an append begins, never inside one); otherwise the active segment is
    sealed and a new one begins. A cycle seals a non-empty active segment whose
    first record is ``segment_roll`` old, and an empty one begins."""
    segments: list[_GrowingSegment] = [
        {"base": s.base, "next": s.next, "size": s.size, "sealed": s.sealed, "timestamps": list(s.timestamps)}
        for s in partition.segments
    ]

    def begin() -> _GrowingSegment:
        start = segments[-1]["next"]
        segments.append({"base": start, "next": start, "size": 0, "sealed": False, "timestamps": []})
        return segments[-1]

    def roll_due(active: _GrowingSegment, timestamp: int) -> bool:
        return (
            segment_roll is not None
            and bool(active["timestamps"])
            and timestamp - active["timestamps"][0] >= segment_roll
        )

    def append(records: range) -> None:
        for j in records:
            timestamp = rate.timestamp(now, j)
            active = None if segments[-1]["sealed"] else segments[-1]
            # a batch's first record, or the first of its records in a segment, brings a header
            piece = rate.header if j % rate.header_run == 0 or active is None or not active["timestamps"] else 0
            full = active is not None and active["size"] and active["size"] + piece + rate.record_bytes > segment_size
            begins_append = j == records.start and j % rate.header_run == 0
            if active is None or full or (begins_append and roll_due(active, timestamp)):
                if active is not None:
                    active["sealed"] = True
                active = begin()
                piece = rate.header
            active["next"] += 1
            active["size"] += piece + rate.record_bytes
            active["timestamps"].append(timestamp)

    arrived, run = rate.arrived(at - now), rate.header_run
    cycle_times = range(now, at, prune_interval)
    # each run of records from the first stamped after a cycle (or beginning an append)
    # to the last before the next
    starts = [
        j
        for j in range(arrived)
        if j % run == 0 or _cycle_between(cycle_times, rate.timestamp(now, j - 1), rate.timestamp(now, j))
    ]
    pieces = [(rate.timestamp(now, j), 0, range(j, end)) for j, end in zip(starts, [*starts[1:], arrived])]
    cycles = [(cycle, 1, range(0)) for cycle in cycle_times]
    for timestamp, is_cycle, records in sorted(pieces + cycles, key=lambda event: event[:2]):
        active = None if segments[-1]["sealed"] else segments[-1]
        if not is_cycle:
            append(records)
        elif active is not None and roll_due(active, timestamp):
            active["sealed"] = True
            begin()
    return replace(
        partition,
        segments=tuple(Segment(s["base"], s["next"], s["size"], s["sealed"], tuple(s["timestamps"])) for s in segments),
    )


def _cycle_between(cycles: range, earlier: int, later: int) -> bool:
    """Whether a cycle of ``cycles`` runs at or after ``earlier`` and before ``later``."""
    i = bisect.bisect_left(cycles, earlier)
    return i < len(cycles) and cycles[i] < later


def pace(position: Position) -> Fraction | None:
    """Offsets per ms from the position's anchor to its last commit, if it has one
    that is earlier and not ahead of it."""
    if position.anchor is None:
        return None
    anchor_position, anchor_at = position.anchor
    if position.committed_at <= anchor_at or position.position < anchor_position:
        return None
    return Fraction(position.position - anchor_position, position.committed_at - anchor_at)


def extended_group(
    group: Group, partitions: dict[int, Partition], arrived: dict[int, int], now: int, at: int, reading: bool
) -> Group:
    """A group that reads has read what arrived (or, with an observed pace and not
    at the end of ``partitions`` now, at that pace up to the end by ``at``) and
    committed at ``at``."""
    if not reading:
        return group

    def moved(p: Position) -> int:
        observed = pace(p)
        end = partitions[p.partition].next_offset
        if observed is None or p.position == end:
            return p.position + arrived[p.partition]
        return min(end + arrived[p.partition], p.position + math.floor(observed * (at - now)))

    return replace(group, positions=tuple(Position(p.partition, moved(p), at, p.anchor) for p in group.positions))


def never_committed(group: Group, created_at: int) -> bool:
    """No consumer has committed for ``group`` since it was created at ``created_at``
    (load_into_catalog creates every group at the catalog's now): its positions all
    have their creation's time, and none an anchor (a commit sets one)."""
    return all(p.committed_at == created_at and p.anchor is None for p in group.positions)


def idle(group: Group, now: int, window: int) -> bool:
    """``group`` reads nothing from ``now`` on: no commit in the window, or none since
    it was created (its creation's time is no read)."""
    latest = model.last_commit(group)
    # a group has a position on each partition of its topic, and a topic has one at least
    assert latest is not None
    return latest < now - window or never_committed(group, now)


def reads(
    catalog: RefCatalog, window: int, stalled: frozenset[str]
) -> dict[tuple[str, str, int], tuple[str, Fraction | None]]:
    """(topic, group, partition) -> how the group reads it: its source and its pace."""
    out = {}
    for topic in catalog.topics:
        for g in topic.groups:
            for p in g.positions:
                observed = pace(p)
                end = next(q.next_offset for q in topic.partitions if q.index == p.partition)
                if g.name in stalled:
                    source = "stalled"
                elif idle(g, catalog.now, window):
                    source = "idle"
                else:
                    source = "keeps_up" if observed is None or p.position == end else "observed"
                out[(topic.name, g.name, p.partition)] = (source, observed if source == "observed" else None)
    return out


def extended(
    catalog: RefCatalog,
    at: int,
    rates_: dict[tuple[str, int], RefRate],
    window: int,
    stalled: frozenset[str],
    prune_interval: int,
) -> RefCatalog:
    """``catalog`` as it will be at ``at``, its ``max_deletes_per_cycle`` once per cycle
    run by then (one now, one every ``prune_interval``)."""
    now = catalog.now
    cycles = 1 + (at - now) // prune_interval
    topics = []
    for topic in catalog.topics:
        arrived = {p.index: rates_[(topic.name, p.index)].arrived(at - now) for p in topic.partitions}
        partitions = tuple(
            extended_partition(
                p,
                rates_[(topic.name, p.index)],
                topic.policy.segment_size,
                topic.policy.segment_roll,
                now,
                at,
                prune_interval,
            )  # fmt: skip
            for p in topic.partitions
        )
        by_index = {p.index: p for p in topic.partitions}
        groups = tuple(
            extended_group(g, by_index, arrived, now, at, not idle(g, now, window) and g.name not in stalled)
            for g in topic.groups
        )
        budget = topic.policy.max_deletes_per_cycle
        policy = replace(topic.policy, max_deletes_per_cycle=None if budget is None else budget * cycles)
        topics.append(replace(topic, partitions=partitions, groups=groups, policy=policy))
    return replace(catalog, topics=tuple(topics), now=at)


def moved_up(catalog: RefCatalog, partitions: list[dict]) -> RefCatalog:
    """``catalog`` with each group position below a partition's
    ``new_log_start_offset`` in ``partitions`` (a plan's rows) moved up to it, as a
    cycle leaves them."""
    start = {(p["topic"], p["partition"]): p["new_log_start_offset"] for p in partitions}
    return replace(
        catalog,
        topics=tuple(
            replace(
                topic,
                groups=tuple(
                    replace(
                        group,
                        positions=tuple(
                            replace(p, position=max(p.position, start[(topic.name, p.partition)]))
                            for p in group.positions
                        ),
                    )
                    for group in topic.groups
                ),
            )
            for topic in catalog.topics
        ),
    )


def forecast(
    catalog: RefCatalog,
    instants: list[int],
    window: int,
    *,
    prune_interval: int,
    given: int | None = None,
    stalled: frozenset[str] = frozenset(),
) -> dict[str, list[dict]]:
    """Topic -> per instant: bytes and segments kept after that instant's cycle, per
    partition (partition, bytes, segments, new log start), bytes and segments deleted
    since now, bytes deleted since now by the reason each segment went for, quota
    state and groups over quota as the cycle at the instant reads them: with each
    group the log start of the cycle before passed moved up to it."""
    rates_ = rates(catalog, window, given)
    out: dict[str, list[dict]] = {t.name: [] for t in catalog.topics}
    #: topic -> reason -> bytes deleted since now, each segment for the reason it had
    #: at the first instant it went (what its cycle journals)
    by_reason: dict[str, dict[str, int]] = {t.name: {} for t in catalog.topics}
    gone: set[tuple[str, int, int]] = set()
    for at in instants:
        future = extended(catalog, at, rates_, window, stalled, prune_interval)
        rows = model.plan(future, at)
        quotas = rows
        if at > catalog.now:
            # the cycle before reads no quota here; the groups it passed are where it left them
            before = catalog.now + (at - catalog.now - 1) // prune_interval * prune_interval
            starts = model.plan(extended(catalog, before, rates_, window, stalled, prune_interval), before)
            quotas = model.plan(moved_up(future, starts["partitions"]), at)
        for topic in catalog.topics:
            segments = [r for r in rows["segments"] if r["topic"] == topic.name]
            kept = [r for r in segments if r["decision"] == "keep"]
            deleted = [r for r in segments if r["decision"] == "delete"]
            for r in deleted:
                if (key := (topic.name, r["partition"], r["base_offset"])) not in gone:
                    gone.add(key)
                    reasons = by_reason[topic.name]
                    reasons[r["reason"]] = reasons.get(r["reason"], 0) + r["size_bytes"]
            # the cycle's roll seals the active segment and begins an empty one
            partitions = [
                (
                    p["partition"],
                    sum(r["size_bytes"] for r in kept if r["partition"] == p["partition"]),
                    sum(1 for r in kept if r["partition"] == p["partition"]) + p["roll"],
                    p["new_log_start_offset"],
                )
                for p in rows["partitions"]
                if p["topic"] == topic.name
            ]
            out[topic.name].append(
                {
                    "at": at,
                    "bytes": sum(r["size_bytes"] for r in kept),
                    "segments": sum(segments for _, _, segments, _ in partitions),
                    "partitions": sorted(partitions),
                    "bytes_deleted": sum(r["size_bytes"] for r in deleted),
                    "segments_deleted": len(deleted),
                    "deleted_by_reason": dict(sorted(by_reason[topic.name].items())),
                    "quota_exceeded": next(t["quota_exceeded"] for t in quotas["topics"] if t["topic"] == topic.name),
                    "over_quota": sorted(
                        (g["group"], g["partition"])
                        for g in quotas["groups"]
                        if g["topic"] == topic.name and g["over_quota"]
                    ),
                }
            )
    return out
