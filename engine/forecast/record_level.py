"""The timeline (engine/forecast/timeline.py) at message granularity: where the log
start stands inside a segment at each instant.

At message granularity the time rules cut at a record (docs/RETENTION.md, "Per
partition, the cut"): ``target = max(tc_r, first_not(e_size))`` and ``hard =
max(tc_m, first_not(e_max_size))``, and the new log start is the cut itself, held
back to the first segment the deletion budget kept. Every part of it only moves up
as time passes, so a segment is still deleted at the first instant its ``next`` is
at most the cut (the timeline's instants, from the per-instant record cuts here);
what needs more is the log start, a record offset per (partition, instant): the
planner's own bounds, cut and new log start (engine/prune/plan/rules.py's
``OFFSET_BOUNDS``, ``CUT``, ``NEW_LOG_START``) evaluated over every instant at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast.extend import Partitions, cut_offsets
from engine.forecast.vectorised import NULL, Nullable, Value, holds, values
from engine.prune.by_partition import partition_rows
from engine.prune.plan.expr import col
from engine.prune.plan.rules import (
    CUT,
    ELIGIBILITY,
    INSTANTS,
    NEW_LOG_START,
    OFFSET_BOUNDS,
    PREFIXES,
    PREFIXES_AT_MESSAGE,
    wanted,
)
from engine.prune.record_times import RecordTimes
from engine.prune.snapshot import Snapshot

#: a partition without a cut of a kind: below every offset, so that a position lifted
#: to the cut stays where it is
NO_CUT = -1


def record_cuts(
    snapshot: Snapshot, parts: Partitions, arrived: np.ndarray, instants: Sequence[int], records: RecordTimes,
    read: np.ndarray | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Per kind of the snapshot's time cuts, the cut of each partition (columns) at
    each instant (rows), as the virtual topic at that instant has it (extend.py's
    ``cut_offsets``, ``read`` as there); :data:`NO_CUT` where the partition has none
    of that kind. A cut only moves up: later instants have later thresholds and more
    records."""
    partitions, cuts = snapshot.tables["partitions"], snapshot.tables["time_cuts"]
    kinds = sorted(set(cuts["kind"].to_pylist()))
    by_kind = {kind: np.full(arrived.shape, NO_CUT, np.int64) for kind in kinds}
    if not kinds:
        return by_kind
    rows = partition_rows(cuts, partitions)
    offsets = cut_offsets(snapshot, parts, arrived, instants, records, read)
    for kind, cut in by_kind.items():
        # the cut rows of the kind (one per partition and kind)
        mine = np.flatnonzero(pc.equal(cuts["kind"], kind).to_numpy(zero_copy_only=False))
        cut[:, rows[mine]] = offsets[:, mine]
    return by_kind


@dataclass(frozen=True)
class Segments:
    """The segments of the timeline's message-granularity partitions, in (partition,
    offset) order: their partition's row, offsets, whether they are past the
    snapshot's log start, the first instant each is sealed (the timeline's
    ``k_sealed``) and each eligibility rule holds of it (``holds_from``: the
    timeline's ``k_time``, ``k_size``, ... by those names)."""

    row: np.ndarray
    base_offset: np.ndarray
    next_offset: np.ndarray
    live: np.ndarray
    k_sealed: np.ndarray
    holds_from: dict[str, np.ndarray]


def log_starts(
    topics: pa.Table, partition_topic: np.ndarray, segments: Segments, cuts: dict[str, np.ndarray],
    log_end: np.ndarray, barrier: np.ndarray, cycles: np.ndarray, log_start: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """The log start of each partition (columns) at each instant (rows) after that
    instant's cycle, for message-granularity partitions; -1 for the others.
    ``partition_topic``: each partition's row of ``topics``; ``log_end``: the next
    offset at each instant; ``barrier``: the lowest protecting position (past the
    log end where there is none); ``cycles``: how many cycles have run by each
    instant; ``log_start``: the snapshot's, which the virtual topics keep
    (extend.py)."""
    count = log_end.shape[0]
    message = np.array([g == "message" for g in topics["granularity"].to_pylist()])[partition_topic]
    hold = topics["hold"].to_numpy(zero_copy_only=False)[partition_topic]
    columns: dict[str, Value] = {
        "message": True,
        "hold": hold,
        "H": log_start,
        "T": log_end,
        "barrier": barrier,
        **{
            name: _first_not(segments, _either(rules, segments, count), log_start, count)
            for name, rules in PREFIXES_AT_MESSAGE.items()
        },
        **dict.fromkeys(_AT_SEGMENT_ONLY, NULL),
        **{f"tc_{kind}": Nullable(cut, cut != NO_CUT) for kind, cut in cuts.items()},
        **{f"tc_{kind}": NULL for kind in _RECORD_CUTS if kind not in cuts},
        **{limit: Nullable.of_arrow(topics[limit])[partition_topic] for limit in _LIMITS},
    }
    for name, rule in OFFSET_BOUNDS.items():
        columns[name] = values(rule, columns, null=NO_CUT)
    columns["cut"] = cut = values(CUT, columns, null=NO_CUT)
    columns["first_kept_by_budget"] = _kept_by_budget(topics, partition_topic, segments, cut, cycles, hold)
    return np.where(message, values(NEW_LOG_START, columns, null=NO_CUT), -1)


#: what the planner's bounds and new log start read of segment granularity only: not
#: read where ``message`` holds
_AT_SEGMENT_ONLY = (*PREFIXES, "last_deleted_next")


def _either(rules: tuple[str, ...], segments: Segments, count: int) -> np.ndarray:
    """The first instant any of ``rules`` holds of each segment, as the planner's
    prefixes combine them (rules.INSTANTS)."""
    return values(INSTANTS.either(*(col(rule) for rule in rules)), segments.holds_from, null=count)


#: the record cuts and limits of the time rules (rules.ELIGIBILITY)
_RECORD_CUTS = [rule.record_cut for rule in ELIGIBILITY.values() if rule.record_cut]
_LIMITS = [rule.limit for rule in ELIGIBILITY.values() if rule.record_cut]


def past_max_time(
    topics: pa.Table, partition_topic: np.ndarray, cuts: dict[str, np.ndarray], starts: np.ndarray
) -> np.ndarray:
    """Per partition, the first instant its records older than ``max_time`` outlive
    the cycle (the ``max_time`` cut past the log start, where a hold or
    ``max_deletes_per_cycle`` stops the cap; engine/forecast/summary.py): the number
    of instants if never."""
    count = starts.shape[0]
    if "max_time" not in cuts:
        return np.full(starts.shape[1], count)
    stopped = (topics["hold"].to_numpy(zero_copy_only=False) | topics["max_deletes_per_cycle"].is_valid().to_numpy())[
        partition_topic
    ]
    past = (cuts["max_time"] > starts) & (starts >= 0) & stopped
    return np.where(past.any(axis=0), past.argmax(axis=0), count)


def _first_not(segments: Segments, holds_from: np.ndarray, log_start: np.ndarray, count: int) -> np.ndarray:
    """``first_not(P)`` at each instant (rows) per partition (columns), for the rule
    ``P`` that holds of each segment from ``holds_from``: the next offset of the last
    live segment of the prefix where it holds, at least the log start. A segment is in
    that prefix from the running maximum of ``holds_from`` over the live segments up
    to it."""
    row, live = segments.row, segments.live
    shift = row.astype(np.int64) * (count + 1)  # each partition's maxima above the one's before
    running = np.maximum.accumulate(np.where(live, np.minimum(holds_from, count), 0) + shift) - shift
    last = np.full((count + 1, len(log_start)), -1, np.int64)
    np.maximum.at(last, (running[live], row[live]), segments.next_offset[live])
    return np.maximum(np.maximum.accumulate(last, axis=0)[:count], log_start)


def _kept_by_budget(
    topics: pa.Table, partition_topic: np.ndarray, segments: Segments, cut: np.ndarray, cycles: np.ndarray,
    hold: np.ndarray,
) -> Nullable:  # fmt: skip
    """Per instant (rows) and partition (columns), the base of the first segment the
    deletion budget keeps though wanted (the planner's rules.wanted): the one ranked
    after the ``max_deletes_per_cycle`` once per cycle run by then, where it is
    wanted; null where none is."""
    count, width = cut.shape
    kept = np.full((count, width), _NONE_KEPT)
    per_cycle = topics["max_deletes_per_cycle"]
    limited = per_cycle.is_valid().to_numpy(zero_copy_only=False)[partition_topic]
    n = per_cycle.fill_null(0).to_numpy()[partition_topic]
    first = np.searchsorted(segments.row, np.arange(width), side="left")
    end = np.searchsorted(segments.row, np.arange(width), side="right")
    for k in range(count):
        index = first + n * cycles[k]
        there = limited & (index < end)
        s = index[there]
        columns = {
            "is_sealed": segments.k_sealed[s] <= k, "hold": hold[there], "next_offset": segments.next_offset[s],
            "cut": cut[k, there],
        }  # fmt: skip
        chosen = holds(_WANTED, columns)
        kept[k, np.flatnonzero(there)[chosen]] = segments.base_offset[s][chosen]
    return Nullable(kept, kept != _NONE_KEPT)


_NONE_KEPT = np.iinfo(np.int64).max
#: a segment the cycle would delete but for the budget, sealed at the instant (``is_sealed``)
_WANTED = wanted(col("is_sealed"))
