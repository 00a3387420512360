"""The forecast as a timeline: per segment, the first instant each rule holds, and
from those the first instant it goes; every instant in one Spark job over the
segments once, not once per instant.

Every rule a segment-granularity plan applies holds from some instant on: time
passes, data arrives, a subscriber reads on, and nothing comes back
(engine/forecast/extend.py argues it). So each rule is one number per segment, the
index of the first instant of the forecast at which it holds, and the plan of the
virtual topic at an instant (extend.py) deletes exactly the segments whose instant
of going has come. Per segment ``s`` of a partition, in offset order:

- ``k_sealed``: the next segment has a record, or a cycle before the instant
  found it ``segment_roll`` old (it is sealed at the snapshot: 0);
- ``k_time``, ``k_max_time``: the instant is past its newest record plus the limit;
- ``k_size``, ``k_max_size``: the partition's bytes before that instant's cycle
  exceed the bytes through ``s`` (before ``s``) plus the limit;
- ``k_barrier``: the barrier has passed it: every protecting subscriber's position
  after ``message_ttl``, or the subscriber expired (``subscription_expiry``); with
  ``consumer_backlog_eviction``, lifted to each backlog quota's cut
  (engine/forecast/backlog.py);
- ``k_allowed``: the cycles may delete it: never under a hold; with
  ``max_deletes_per_cycle``, once the cycles run by then reach its rank;
- the cut's target holds below ``s`` from ``m_target``, the running maximum of
  ``min(k_time, k_size)`` over the partition's live segments up to ``s`` (Iggy's
  ``leading_expired_end`` as a function of time); the hard cut from ``m_hard``, the
  same over ``min(k_max_time, k_max_size)``;
- ``s`` goes at ``max(k_sealed, k_allowed, min(m_hard, max(m_target, k_barrier)))``
  (the cut of docs/RETENTION.md: ``max(H, hard, min(target, barrier))``), or at
  ``max(k_sealed, k_allowed)`` below the log start; its reason is the plan's at
  that instant.

No rule is written here: each is the planner's own expression
(engine/prune/plan/rules.py). The eligibility measures and the roll are solved for
the first instant they hold (engine/forecast/thresholds.py); the budget is asked at
the instants a search tries (``_allowed``); the barrier, the quotas and the log start
inside a segment are evaluated at every instant (backlog.py, record_level.py). How
the rules combine into the bounds, the cut and the reason is generated into the
query from the same statement, read in instants where the planner reads offsets
(``Holds``: either of two rules holds from the earlier instant, both from the
later). What is the timeline's own is how the rules' inputs move with time: records
arrive, segments fill and roll, subscribers read on, cycles run.

What Spark computes is the running maxima, the instants and reasons, and the bytes
and segments that go per partition, instant and reason; the rest is read here by
running sums over the instants.

At message granularity the time rules cut at a record: ``k_time`` and
``k_max_time`` are the first instants the record cut passes the segment (sealed or
not), and the target holds below ``s`` from ``min(k_time, m_size)`` (``m_size`` the
running maximum of ``k_size``), the hard cut likewise: ``max(tc_r, first_not(e_size))``
as instants. The log start inside a segment is engine/forecast/record_level.py's.

A backlog quota is read as the cycles read it (engine/forecast/quotas.py says why):
a group's position at least the log start the cycle before the instant left. So
the same rules are read a second time, at the cycle before each instant (the columns
suffixed :data:`BEFORE`, for the topics with a quota), in the same job; the verdicts
are engine/forecast/backlog.py's.

Asked ``by_plans``, engine/forecast/forecast.py plans the virtual topics themselves
with the planner's own query instead; tests/prune/test_forecast.py holds both to the
reference model, and to each other, breaches included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast import backlog, record_level
from engine.forecast.extend import (
    Partitions,
    Starts,
    grown,
    last_cycle,
    partitions_of,
    synthetic_starts,
)
from engine.forecast.rates import Rate
from engine.forecast.reading import Reading, by_topic
from engine.forecast.record_level import NO_CUT, record_cuts
from engine.forecast.result import Breach, Forecast, PartitionPoint, Point, TopicForecast, many_points
from engine.forecast.thresholds import threshold
from engine.forecast.vectorised import Nullable, Value, evaluate, first_holding, holds
from engine.prune.by_partition import partition_rows
from engine.prune.plan.expr import Expr, case, col, lit, names
from engine.prune.plan.rules import (
    BOUNDS,
    ELIGIBILITY,
    INSTANTS,
    NOT_HELD,
    PASSED,
    ROLL,
    WITHIN_BUDGET,
    Bound,
    Eligibility,
    bound,
    delete_reason,
    passed_by_record,
    the_cut,
)
from engine.prune.planner import Planner
from engine.prune.record_times import RecordTimes
from engine.prune.snapshot import Snapshot

#: the suffix of the columns that hold the instant, of those of the cycle before each
#: instant, at which each rule holds
BEFORE = "_before"


#: an instant past every forecast's: a rule that never holds in the query's own terms
_NEVER = 1 << 62


def _gone(suffix: str) -> dict[str, str]:
    """The running maxima, the bounds of the cut and the instant a segment goes
    (``gone``), over the rules' columns with ``suffix``, as SQL by name: the
    planner's statement of them (engine/prune/plan/rules.py) read as instants."""

    def rules(names: tuple[str, ...]) -> Expr:
        return INSTANTS.either(*(col(f"k_{name}{suffix}") for name in names))

    def prefix(of: Bound) -> str:
        # first_not as an instant: the latest of the live segments' up to this one
        latest = case((~col("live"), 0), (col("message"), rules(of.at_message)), otherwise=rules(of.by_segment))
        return f"max({latest}) OVER upto"

    def ruled(name: str, of: Bound) -> Expr:
        # the running maximum is the prefix at either granularity: both arguments
        running = col(f"run_{name}{suffix}")
        return bound(INSTANTS, col(f"k_{of.by_record}{suffix}"), running, running)

    below_start = case((col("live"), _NEVER), otherwise=0)
    at = {name: col(f"{name}{suffix}") for name in ("m_hard", "m_target", "k_barrier", "k_sealed", "k_allowed")}
    cut = the_cut(INSTANTS, below_start, at["m_hard"], at["m_target"], at["k_barrier"])
    return {
        **{f"run_{name}": prefix(of) for name, of in BOUNDS.items()},
        **{f"m_{name}": str(ruled(name, of)) for name, of in BOUNDS.items()},
        "gone": str(INSTANTS.both(at["k_sealed"], at["k_allowed"], cut)),
    }


def _named(suffix: str, *names: str) -> str:
    return ", ".join(f"{_gone(suffix)[name]} AS {name}{suffix}" for name in names)


#: the instant the target and the barrier have both passed a segment
_BY_TARGET = INSTANTS.both(col("m_target"), col("k_barrier"))
#: the reason a segment goes, at the instant it goes
_REASON = delete_reason(
    ~col("live"), col("k_by_target") <= col("gone"), col("k_time") <= col("gone"), col("k_max_time") <= col("gone"), lit
)

TIMELINE_QUERY = f"""WITH
running AS (SELECT *, {_named("", "run_target", "run_hard")}, {_named(BEFORE, "run_target", "run_hard")}
  FROM {{rows}}
  WINDOW upto AS (PARTITION BY pid ORDER BY base_offset ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)),
ruled AS (SELECT *, {_named("", "m_target", "m_hard")}, {_named(BEFORE, "m_target", "m_hard")} FROM running),
gone AS (SELECT *, {_BY_TARGET} AS k_by_target, {_named("", "gone")}, {_named(BEFORE, "gone")}
  FROM ruled),
reasoned AS (SELECT pid, gone, gone{BEFORE}, next_offset, size_bytes,
    {_REASON} AS reason,
    CASE WHEN live AND greatest(gone, k_max_time) < k_by_target THEN greatest(gone, k_max_time) END AS max_time_from,
    CASE WHEN live AND gone < least(k_by_target, k_max_time) THEN gone END AS max_size_from,
    CASE WHEN stopped AND live AND NOT message AND k_max_time < gone THEN k_max_time END AS kept_past_max_time_from
  FROM gone)
SELECT pid, gone, gone{BEFORE}, reason, sum(size_bytes) AS bytes, count(*) AS segments,
    max(next_offset) AS last_next, min(max_time_from) AS max_time_from, min(max_size_from) AS max_size_from,
    min(kept_past_max_time_from) AS kept_past_max_time_from
  FROM reasoned GROUP BY pid, gone, gone{BEFORE}, reason"""
"""Per partition, instant, instant at the cycle before and reason: what goes first at
that instant; and per partition the first instant a cap is a deleted segment's reason
(``max_time_from``, ``max_size_from``: the plan's reason at an instant after a
segment went can be a cap until the target's rules reach it). An instant past the
horizon is never."""


def _first_above(series: np.ndarray, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each of ``rows`` (columns of ``series``, each nondecreasing down its
    instants), the first instant at which ``series`` is above ``x``; the number of
    instants if none. One search over every column laid end to end, each shifted
    above the one before."""
    count = series.shape[0]
    if len(rows) == 0 or count == 0:
        return np.full(len(rows), count, np.int64)
    low, high = series[0], series[-1]
    base = np.concatenate([[0], np.cumsum(high - low + 2)[:-1]])
    flat = (series - low + base).T.ravel()
    query = np.clip(x, low[rows] - 1, high[rows]) - low[rows] + base[rows]
    return np.searchsorted(flat, query, side="right") - rows.astype(np.int64) * count


def _on_disk(
    snapshot: Snapshot, segment_rows: np.ndarray, parts: Partitions, starts: Starts, arrived: np.ndarray,
    instants: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Bytes and segments of each partition (columns) at each instant (rows), before
    that instant's cycle: the snapshot's, the records its active segment took, and
    the synthetic segments begun by then (what extend.py's segments hold, summed);
    and an empty active segment where a roll has sealed the last one."""
    count = arrived.shape[1]
    sizes = snapshot.tables["segments"]["size_bytes"].to_numpy()
    every = np.broadcast_to(np.arange(count), arrived.shape).ravel()
    flat = arrived.ravel()
    none = np.zeros_like(flat)
    filled = parts.bytes_of(every, none, np.minimum(flat, parts.room[every]))
    total = np.bincount(segment_rows, weights=sizes, minlength=count)[every] + np.where(
        parts.active[every] >= 0, filled, 0
    )
    segments = np.bincount(segment_rows, minlength=count)[every]
    # a partition's synthetic segments begun by an instant: a run from its first
    width = int(flat.max(initial=0)) + 1
    first = np.searchsorted(starts.of, every, side="left")
    begun = np.searchsorted(starts.of * width + starts.start, every * width + flat, side="left") - first
    last = np.maximum(first + begun - 1, 0)  # the last begun, if any: only it may be partly filled
    if len(starts.of):
        before = np.concatenate([[0], np.cumsum(parts.bytes_of(starts.of, starts.start, starts.end))])
        partly = parts.bytes_of(every, starts.start[last], np.minimum(starts.end[last], flat))
        total = total + np.where(begun > 0, before[last] - before[first] + partly, 0)
        segments = segments + begun
    at = np.broadcast_to(np.asarray(instants, np.int64)[:, None], arrived.shape).ravel()
    segments = segments + _rolled(snapshot, parts, starts, every, flat, np.where(begun > 0, last, -1), at)
    return total.reshape(arrived.shape).astype(np.int64), segments.reshape(arrived.shape)


def _rolled(
    snapshot: Snapshot, parts: Partitions, starts: Starts, rows: np.ndarray, arrived: np.ndarray,
    last: np.ndarray, at: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """Whether partition ``rows``, ``arrived`` records in (``last``: its last
    synthetic segment begun, -1: none), has a segment more at instant ``at`` by a
    roll: its last segment with a record, active, is ``segment_roll`` old then. A
    cycle before the instant sealed it and began an empty one, or the instant's own
    cycle rolls it after its plan (engine/forecast/summary.py counts that one)."""
    segments = snapshot.tables["segments"]
    active = parts.active[rows]
    first_ts, sizes = segments["first_timestamp"], segments["size_bytes"].to_numpy()
    # the real active segment's first record, else the first synthetic one's once it arrived
    stamped = np.append(first_ts.is_valid().to_numpy(zero_copy_only=False) & (sizes > 0), False)[active]
    first = np.where(
        stamped,
        np.append(first_ts.fill_null(0).to_numpy(), 0)[active],
        parts.timestamp(rows, np.zeros_like(rows), snapshot.now),
    )
    has_one = ((active >= 0) & (stamped | (arrived > 0))) | (last >= 0)
    if len(starts.of):
        first = np.where(last >= 0, parts.timestamp(rows, starts.start[np.maximum(last, 0)], snapshot.now), first)
    roll = parts.roll[rows]
    columns: dict[str, Value] = {
        "now": at,
        "active_first_ts": Nullable(first, has_one),
        "segment_roll": Nullable(roll, roll >= 0),
    }
    return holds(ROLL, columns)


def _allowed(policy: pa.Table, rank: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """Per segment (``policy``: its topic's, a row each), the first instant from which
    the cycles may delete it by the planner's budget (rules.NOT_HELD and
    WITHIN_BUDGET). Its ``rank`` in the partition is the planner's ``rn`` at the
    first cycle; the cycles delete a partition's first segments, so by the c-th
    cycle (``cycles``: run by each instant) those ranked before it have gone
    ``max_deletes_per_cycle`` N at a time: its ``rn`` is then ``rank - N(c - 1)``
    (extend.py's ``_topics_at``: N once per cycle)."""
    hold, per_cycle = policy["hold"].to_numpy(zero_copy_only=False), Nullable.of_arrow(policy["max_deletes_per_cycle"])

    def at(rows: np.ndarray, instant: np.ndarray) -> dict[str, Value]:
        n = per_cycle[rows]
        return {"hold": hold[rows], "max_deletes_per_cycle": n, "rn": rank[rows] - n.values * (cycles[instant] - 1)}

    return first_holding(NOT_HELD & WITHIN_BUDGET, at, len(rank), end=len(cycles))


@dataclass(frozen=True)
class _Layout:
    """What is the same at every instant: the partitions (extend.py's ``Partitions``,
    their synthetic segments' ``starts``) and the segments they hold by the horizon
    (``columns``: extend.py's ``grown``, in (partition, offset) order); per segment
    its topic's policy (a row each), whether it is past the snapshot's log start and
    its topic cuts at a record, its rank in the partition (from 1) and the bytes of the
    partition through it; per partition its topic's row and an offset past every
    segment's; the segments as the backlog size quota searches them (``sized``)."""

    snapshot: Snapshot
    parts: Partitions
    starts: Starts
    segment_rows: np.ndarray
    columns: dict[str, np.ndarray]
    policy: pa.Table
    live: np.ndarray
    message: np.ndarray
    rank: np.ndarray
    through: np.ndarray
    partition_topic: np.ndarray
    beyond: np.ndarray
    sized: backlog.SizedSegments


def _layout(
    snapshot: Snapshot, rates: Sequence[Rate], segment_sizes: Mapping[str, int], horizon: int, prune_interval_ms: int
) -> _Layout:
    now = snapshot.now
    partitions, topics = snapshot.tables["partitions"], snapshot.tables["topics"]
    segment_rows = partition_rows(snapshot.tables["segments"], partitions)
    parts = partitions_of(snapshot, segment_rows, rates, segment_sizes, prune_interval_ms)
    arrived = parts.arrived(slice(None), horizon - now)
    starts = synthetic_starts(parts, arrived, now)
    columns = grown(snapshot, segment_rows, parts, starts, arrived, now)
    row = columns["row"]
    partition_topic = pc.index_in(partitions["topic"], value_set=topics["topic"]).to_numpy()
    policy = topics.take(pa.array(partition_topic[row]))
    size = columns["size_bytes"]
    starts_of_partition = np.flatnonzero(np.concatenate([[True], row[1:] != row[:-1]])) if len(row) else row
    first = np.repeat(starts_of_partition, np.diff(np.append(starts_of_partition, len(row))))  # of its partition
    cumulative = np.cumsum(size)
    through = cumulative - (cumulative[first] - size[first])
    return _Layout(
        snapshot, parts, starts, segment_rows, columns, policy,
        live=columns["next_offset"] > partitions["log_start_offset"].to_numpy()[row],
        message=pc.equal(policy["granularity"], "message").to_numpy(zero_copy_only=False),
        rank=np.arange(1, len(row) + 1) - first,
        through=through,
        partition_topic=partition_topic,
        beyond=parts.next_offset + arrived + 1,
        sized=backlog.SizedSegments.of(row, columns["base_offset"], through - size),
    )  # fmt: skip


#: the rules of the timeline's docstring whose instants the Spark job reads, per segment
_RULES = ("k_sealed", *(f"k_{name}" for name in ELIGIBILITY), "k_barrier", "k_allowed")


@dataclass(frozen=True)
class _Grid:
    """The timeline at a grid of instants: per segment the first of them at which
    each of :data:`_RULES` holds; per partition (columns) at each (rows) the bytes and
    segments before its cycle, the log start after it at message granularity (-1
    elsewhere), the record cuts (record_level.py's), the subscribers and the quota
    cuts (backlog.py's)."""

    rules: dict[str, np.ndarray]
    bytes_at: np.ndarray
    segments_at: np.ndarray
    record_starts: np.ndarray
    cuts: dict[str, np.ndarray]
    subscribers: backlog.Subscribers
    quota_cuts: backlog.QuotaCuts


def _grid(
    laid: _Layout, reads: Sequence[Reading], instants: Sequence[int], arrived: np.ndarray,
    cuts: dict[str, np.ndarray],
) -> _Grid:  # fmt: skip
    """The instants of the module's docstring at ``instants`` (``arrived``: per
    partition the synthetic records by each; ``cuts``: record_level.py's record cuts
    then), and per partition and instant what needs no Spark."""
    snapshot, parts, columns, policy = laid.snapshot, laid.parts, laid.columns, laid.policy
    now, count = snapshot.now, len(instants)
    topics = snapshot.tables["topics"]
    bytes_at, segments_at = _on_disk(snapshot, laid.segment_rows, parts, laid.starts, arrived, instants)
    row, next_offset, size = columns["row"], columns["next_offset"], columns["size_bytes"]
    log_start = snapshot.tables["partitions"]["log_start_offset"].to_numpy()

    # sealed once a record after it arrives, or by the first cycle that finds it
    # segment_roll old (before the instant: the instant's own cycle rolls after it plans)
    moments = np.asarray(instants)
    rolled = np.searchsorted(moments, parts.rolling_cycle(row, columns["first"], now), side="right")
    by_roll = np.where((parts.roll[row] >= 0) & columns["first_valid"], rolled, count)
    k_sealed = np.minimum(_first_above(arrived, row, columns["sealed_after"]), by_roll)

    def reached(series: np.ndarray, base: np.ndarray | int = 0) -> Callable[[np.ndarray], np.ndarray]:
        return lambda least: _first_above(series, row, base + least - 1)

    # the first instant each quantity rising with time reaches a threshold, per segment
    reaching: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "now": lambda due: np.searchsorted(moments, due, side="left"),
        "suffix_after": reached(bytes_at, laid.through),
        **{f"tc_{kind}": reached(cut) for kind, cut in cuts.items()},
    }
    segment: dict[str, Value] = {
        "max_timestamp": Nullable(columns["newest"], columns["newest_valid"]),
        "size_bytes": size,
        "next_offset": next_offset,
    }

    def first_passed(rule: Expr, limit: str) -> np.ndarray:
        """The first instant ``rule`` holds of each segment, by its threshold in the
        one rising quantity it reads (thresholds.py)."""
        (rising,) = names(rule) & reaching.keys()
        due = evaluate(threshold(rule, rising), {**segment, limit: Nullable.of_arrow(policy[limit])})
        return np.where(due.valid, reaching[rising](due.values), count)

    def eligible(rule: Eligibility) -> np.ndarray:
        """The first instant ``rule`` holds of a segment: the planner's test of its
        measure (rules.PASSED), once it is sealed. At message granularity an ``age``
        rule is its record cut passing the segment (rules.passed_by_record), sealed
        or not."""
        by_segment = np.maximum(first_passed(PASSED[rule.measure](col(rule.limit)), rule.limit), k_sealed)
        if rule.record_cut not in cuts:
            return by_segment
        return np.where(laid.message, first_passed(passed_by_record(rule), rule.limit), by_segment)

    def cut(kind: str) -> np.ndarray:
        return cuts.get(kind, np.full(arrived.shape, NO_CUT, np.int64))

    log_end = parts.next_offset + arrived
    subscribers = backlog.subscribers(snapshot, arrived, instants, reads, cut("ttl"))
    quota_cuts = backlog.quota_cuts(topics, laid.partition_topic, laid.sized, bytes_at, log_end, cut("backlog_age"))
    barrier = backlog.barriers(subscribers, quota_cuts, laid.beyond)
    # the cycles run by each instant: one now, one every prune interval
    cycles = 1 + (np.asarray(instants) - now) // parts.prune_interval_ms
    rules = {
        "k_sealed": k_sealed,
        **{f"k_{name}": eligible(rule) for name, rule in ELIGIBILITY.items()},
        "k_barrier": _first_above(barrier, row, next_offset - 1),
        "k_allowed": _allowed(policy, laid.rank, cycles),
    }
    at_message = np.flatnonzero(laid.message)
    of_message = record_level.Segments(
        row[at_message], columns["base_offset"][at_message], next_offset[at_message], laid.live[at_message],
        rules["k_sealed"][at_message], {name: rules[f"k_{name}"][at_message] for name in ELIGIBILITY},
    )  # fmt: skip
    record_starts = record_level.log_starts(
        topics, laid.partition_topic, of_message, cuts, log_end, barrier, cycles, log_start
    )
    return _Grid(rules, bytes_at, segments_at, record_starts, cuts, subscribers, quota_cuts)


def _rows(laid: _Layout, at: _Grid, before: _Grid | None, count: int) -> pa.Table:
    """The rows the Spark job reads, one per segment there by the horizon: the
    instants of each rule at the forecast's instants, and (suffixed
    :data:`BEFORE`) at the cycle before each, where its topic has a backlog quota
    (``before``; never elsewhere)."""
    columns, row = laid.columns, laid.columns["row"]
    if before is None:
        earlier = dict.fromkeys(_RULES, np.full(len(row), count))
    else:
        quota = before.quota_cuts.set[row]
        earlier = {name: np.where(quota, ruled, count) for name, ruled in before.rules.items()}
    return pa.table(
        {
            "pid": row.astype(np.int32),
            "base_offset": columns["base_offset"],
            "next_offset": columns["next_offset"],
            "size_bytes": columns["size_bytes"],
            "live": laid.live,
            "message": laid.message,
            "stopped": pc.or_(laid.policy["hold"], laid.policy["max_deletes_per_cycle"].is_valid()),
            **at.rules,
            **{name + BEFORE: ruled for name, ruled in earlier.items()},
        }
    )


def timeline(
    planner: Planner,
    snapshot: Snapshot,
    rates: Sequence[Rate],
    reads: Sequence[Reading],
    segment_sizes: Mapping[str, int],
    instants: Sequence[int],
    window_ms: int,
    *,
    prune_interval_ms: int,
    records: RecordTimes,
    tag: str | None = None,
) -> Forecast:
    """The forecast of every topic of ``snapshot`` at ``instants`` (the first its
    ``now``), without a disk budget; ``rates`` per row of its partitions, ``reads``
    per row of its positions."""
    now, count = snapshot.now, len(instants)
    laid = _layout(snapshot, rates, segment_sizes, instants[-1], prune_interval_ms)
    # The cycle before each instant, where its log start moves a group over a quota up
    # (quotas.py says why); at now there is none: the groups are where the catalog has them.
    cycles = [last_cycle(instant - now, prune_interval_ms, now) for instant in instants]
    after_a_cycle = np.array([cycle is not None for cycle in cycles])
    topics = snapshot.tables["topics"]
    quota = pc.or_(pc.is_valid(topics["backlog_size"]), pc.is_valid(topics["backlog_age"]))
    quota = quota.to_numpy(zero_copy_only=False)[laid.partition_topic]
    grids, read = [list(instants)], [np.ones(len(quota), bool)]
    if quota.any() and after_a_cycle.any():
        grids.append([now if cycle is None else cycle for cycle in cycles])
        read.append(quota)
    arrived = [np.stack([laid.parts.arrived(slice(None), at - now) for at in grid]) for grid in grids]
    # Both grids' record cuts at once: a segment holds the cut of an instant and of
    # the cycle before it alike, and is read once for both. The cycles' of the
    # partitions with a quota only: the others' are not read.
    reading = np.concatenate([np.broadcast_to(mask, (count, len(mask))) for mask in read])
    every = [t for grid in grids for t in grid]
    cuts = record_cuts(snapshot, laid.parts, np.concatenate(arrived), every, records, reading)
    at, *earlier = (
        _grid(laid, reads, grid, got, {kind: cut[g * count : (g + 1) * count] for kind, cut in cuts.items()})
        for g, (grid, got) in enumerate(zip(grids, arrived))
    )
    before = earlier[0] if earlier else None
    gone = planner.query_partitions(TIMELINE_QUERY, _rows(laid, at, before, count), tag=tag)
    width = at.bytes_at.shape[1]
    within = gone.filter(pc.less(gone["gone"], count))
    by_instant, pid = within["gone"].to_numpy(), within["pid"].to_numpy()
    freed = np.zeros((count, width), np.int64)
    np.add.at(freed, (by_instant, pid), within["bytes"].to_numpy())
    taken = np.zeros((count, width), np.int64)
    np.add.at(taken, (by_instant, pid), within["segments"].to_numpy())
    freed, taken = np.cumsum(freed, axis=0), np.cumsum(taken, axis=0)
    first_log_start = snapshot.tables["partitions"]["log_start_offset"].to_numpy()
    log_start = _log_starts(gone, "gone", at.record_starts, first_log_start)
    floor = np.broadcast_to(first_log_start, (count, width))
    if before is not None:
        floor = np.where(after_a_cycle[:, None], _log_starts(gone, "gone" + BEFORE, before.record_starts, floor), floor)
    verdicts = backlog.verdicts(at.subscribers, at.quota_cuts, floor)
    held, kept = at.bytes_at - freed, at.segments_at - taken
    cap_from = {
        kind: _first_per_partition(gone, column, width, count)
        for kind, column in (
            ("max_time", "max_time_from"),
            ("max_partition_size", "max_size_from"),
            ("kept_past_max_time", "kept_past_max_time_from"),
        )
    }
    past_max_time = record_level.past_max_time(
        snapshot.tables["topics"], laid.partition_topic, at.cuts, at.record_starts
    )
    cap_from["kept_past_max_time"] = np.minimum(cap_from["kept_past_max_time"], past_max_time)
    over = _over_quota(snapshot, at.subscribers, verdicts)
    with many_points():
        return _forecast(
            snapshot, rates, reads, instants, window_ms, within, held, kept, freed, taken, log_start, cap_from, over
        )


def _log_starts(gone: pa.Table, column: str, record_starts: np.ndarray, log_start: np.ndarray) -> np.ndarray:
    """Per instant (rows, as ``column`` of the timeline's query counts them) and
    partition (columns), the log start after that instant's cycle: past the last
    segment gone by then, at least the snapshot's ``log_start``; at message
    granularity ``record_starts`` (record_level.py's)."""
    count, width = record_starts.shape
    within = gone.filter(pc.less(gone[column], count))
    last = np.full((count, width), -1, np.int64)
    np.maximum.at(last, (within[column].to_numpy(), within["pid"].to_numpy()), within["last_next"].to_numpy())
    starts = np.maximum(log_start, np.maximum.accumulate(last, axis=0))
    return np.where(record_starts >= 0, record_starts, starts)


#: (topic, instant's index) -> (group, partition, the quota it is over), in order
_OverQuota = dict[tuple[str, int], list[tuple[str, int, str]]]


def _over_quota(snapshot: Snapshot, subscribers: backlog.Subscribers, verdicts: backlog.Verdicts) -> _OverQuota:
    """The groups over a backlog quota, per topic and instant: over ``backlog_size``
    if over both, as engine/forecast/summary.py names it."""
    positions = snapshot.tables["positions"].take(pa.array(subscribers.rows, pa.int64()))
    topic, group, partition = (positions[c].to_pylist() for c in ("topic", "group", "partition"))
    over: _OverQuota = {}
    for k, j in zip(*(a.tolist() for a in np.nonzero(verdicts.size | verdicts.age))):
        exceeded = "backlog_size" if verdicts.size[k, j] else "backlog_age"
        over.setdefault((topic[j], k), []).append((group[j], partition[j], exceeded))
    return {key: sorted(found) for key, found in over.items()}


def _first_per_partition(gone: pa.Table, column: str, width: int, never: int) -> np.ndarray:
    first = np.full(width, never, np.int64)
    valid = gone.filter(pc.is_valid(gone[column]))
    np.minimum.at(first, valid["pid"].to_numpy(), valid[column].to_numpy())
    return first


def _forecast(
    snapshot: Snapshot, rates: Sequence[Rate], reads: Sequence[Reading], instants: Sequence[int], window_ms: int,
    within: pa.Table, held: np.ndarray, kept: np.ndarray, freed: np.ndarray, taken: np.ndarray,
    log_start: np.ndarray, cap_from: Mapping[str, np.ndarray], over: _OverQuota,
) -> Forecast:  # fmt: skip
    """The forecast's points and breaches per topic, from the timeline's sums per
    partition (columns) and instant (rows) and the groups ``over`` a quota."""
    partitions, topics = snapshot.tables["partitions"], snapshot.tables["topics"]
    topic_of = partitions["topic"].to_pylist()
    number = partitions["partition"].to_numpy()
    by_reason = (
        within.append_column("topic", partitions["topic"].take(within["pid"]))
        .group_by(["topic", "gone", "reason"])
        .aggregate([("bytes", "sum")])
    )
    reason_bytes: dict[tuple[str, int], dict[str, int]] = {}
    for topic, k, reason, size in zip(*(by_reason[c].to_pylist() for c in ("topic", "gone", "reason", "bytes_sum"))):
        reason_bytes.setdefault((topic, k), {})[reason] = size
    reads_of = by_topic(snapshot.tables["positions"], reads)
    rows_of: dict[str, list[int]] = {}
    for p in np.argsort(number, kind="stable").tolist():
        rows_of.setdefault(topic_of[p], []).append(p)
    numbers = number.tolist()
    result = []
    for policy in topics.to_pylist():
        topic = policy["topic"]
        mine = rows_of.get(topic, [])
        over_at = [over.get((topic, k), []) for k in range(len(instants))]
        breaches = _breaches(policy, instants, np.array(mine, np.int64), number, held, cap_from, over_at)
        # an evicting topic never blocks its producers (docs/RETENTION.md)
        blocks = policy["backlog_policy"] != "consumer_backlog_eviction"
        # Python ints per topic, each list once: a million partition points are built of them.
        on_disk, segments, bytes_deleted, segments_deleted = (
            a[:, mine].sum(axis=1).tolist() for a in (held, kept, freed, taken)
        )
        of_mine = [numbers[p] for p in mine]
        held_, kept_, starts_ = (a[:, mine].tolist() for a in (held, kept, log_start))
        since_now: dict[str, int] = {}
        points = []
        for k, at in enumerate(instants):
            for reason, size in reason_bytes.get((topic, k), {}).items():
                since_now[reason] = since_now.get(reason, 0) + size
            parts = list(map(PartitionPoint, of_mine, held_[k], kept_[k], starts_[k]))
            deleted = (bytes_deleted[k], segments_deleted[k], dict(sorted(since_now.items())))
            quota = [(group, partition) for group, partition, _ in over_at[k]]
            points.append(Point(at, on_disk[k], segments[k], parts, *deleted, blocks and bool(quota), quota))
        rates_of = {numbers[p]: rates[p] for p in mine}
        result.append(TopicForecast(topic, rates_of, points, breaches, reads_of.get(topic, [])))
    return Forecast(instants[0], list(instants), window_ms, result, None, None)


def _breaches(
    policy: Mapping[str, Any], instants: Sequence[int], mine: np.ndarray, number: np.ndarray, held: np.ndarray,
    cap_from: Mapping[str, np.ndarray], over_at: Sequence[list[tuple[str, int, str]]],
) -> list[Breach]:  # fmt: skip
    """The topic's first breach of each cap (engine/forecast/summary.py): the first
    instant a cap is a deleted segment's reason, or a partition keeps more than it
    after the cycle (bytes; data older than ``max_time``, where a hold or
    ``max_deletes_per_cycle`` stops the cap); and the first a group is over a backlog
    quota (``over_at``, per instant); in the order summary.py finds them."""
    count = len(instants)
    found: list[tuple[int, int, int, int, Breach]] = []
    for order, kind in enumerate(("max_partition_size", "max_time")):
        first = cap_from[kind][mine] if len(mine) else np.zeros(0, np.int64)
        if len(first) and first.min() < count:
            k = int(first.min())
            partition = int(number[mine[first == k]].min())
            found.append((k, 0, partition, order, Breach(kind, instants[k], policy[kind], partition=partition)))
    cap = policy["max_partition_size"]
    if cap is not None and len(mine):
        over = held[:, mine] > cap
        if over.any():
            k = int(np.flatnonzero(over.any(axis=1))[0])
            partition = int(number[mine[over[k]]].min())
            found.append((k, 1, partition, 0, Breach("max_partition_size", instants[k], cap, partition=partition)))
    aged = cap_from["kept_past_max_time"][mine] if len(mine) else np.zeros(0, np.int64)
    if len(aged) and aged.min() < count:
        k = int(aged.min())
        partition = int(number[mine[aged == k]].min())
        found.append((k, 2, partition, 0, Breach("max_time", instants[k], policy["max_time"], partition=partition)))
    quota = next(((k, over[0]) for k, over in enumerate(over_at) if over), None)
    if quota is not None:
        k, (group, partition, exceeded) = quota
        breach = Breach("backlog_quota", instants[k], policy[exceeded], partition, group, exceeded)
        found.append((k, 3, partition, 0, breach))
    first_of: dict[str, Breach] = {}
    for *_, breach in sorted(found, key=lambda f: f[:4]):
        first_of.setdefault(breach.kind, breach)
    return sorted(first_of.values(), key=lambda b: b.at)
