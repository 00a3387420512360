"""The timeline's subscribers (engine/forecast/timeline.py): where each one stands at
each instant, the barrier the protecting ones hold, how far eviction lifts it, and
who is over a backlog quota (docs/RETENTION.md, "Per topic, before the cut", 1 to 3).

Each is read as the plan of the virtual topic at that instant reads it
(engine/forecast/extend.py), and each only moves up as time passes: a position, the
log end, the bytes on disk and every time cut. So the barrier, lifted or not, stays
one series per partition the timeline can search for the first instant it passes
a segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast.extend import moved
from engine.forecast.reading import Reading
from engine.prune.by_partition import Runs, partition_rows
from engine.prune.snapshot import Snapshot

_NO_POSITION = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Subscribers:
    """The snapshot's subscribers on its partitions (columns: ``rows`` of its
    positions) at each instant (rows): position after ``message_ttl`` (``pos_ttl``)
    and whether the group has not expired by then."""

    rows: np.ndarray
    partition: np.ndarray  # the row of its partition
    protect: np.ndarray  # its topic protects what its subscribers have not read
    position: np.ndarray
    live: np.ndarray


def subscribers(
    snapshot: Snapshot, arrived: np.ndarray, instants: Sequence[int], reads: Sequence[Reading], ttl: np.ndarray
) -> Subscribers:
    """The subscribers at ``instants`` (``arrived``: records by each; ``ttl``: the
    ``message_ttl`` cut of each partition then, record_level.py's), their commits
    shifted back to now, as the plan of the virtual topic at the instant reads them:
    at least the snapshot's log start, which the virtual topics keep."""
    positions, partitions = snapshot.tables["positions"], snapshot.tables["partitions"]
    topics = snapshot.tables["topics"]
    row = partition_rows(positions, partitions)
    policy = topics.take(pc.index_in(positions["topic"], value_set=topics["topic"]))
    subscriber = pc.equal(positions["kind"], "subscriber").to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(subscriber & (row >= 0))
    partition, taken = row[rows], pa.array(rows)
    expiry = policy["subscription_expiry"].take(taken)
    log_start = partitions["log_start_offset"].to_numpy()[partition]
    at = moved(snapshot, arrived, instants, reads)
    since_commit = snapshot.now - at.group_last_commit[:, rows]
    live = ~(expiry.is_valid().to_numpy(zero_copy_only=False) & (since_commit > expiry.fill_null(0).to_numpy()))
    position = np.maximum(at.position[:, rows], np.maximum(log_start, ttl[:, partition]))
    protect = pc.equal(policy["consumption"].take(taken), "protect").fill_null(False)
    return Subscribers(rows, partition, protect.to_numpy(zero_copy_only=False), position, live)


@dataclass(frozen=True)
class QuotaCuts:
    """Per partition (columns) at each instant (rows), where each backlog quota
    ends: a subscriber below it is over the quota (docs/RETENTION.md,
    ``size_evict_cut`` and ``time_cut(now - backlog_age)``); and per partition
    whether its topic sets each quota and evicts."""

    size: np.ndarray
    age: np.ndarray
    size_set: np.ndarray
    age_set: np.ndarray
    evicting: np.ndarray


@dataclass(frozen=True)
class SizedSegments:
    """The segments a partition has by the horizon, in (partition, offset) order:
    the partition's row, base offsets and the bytes of the partition before each,
    laid out once for every instant's search (:func:`quota_cuts`)."""

    row: np.ndarray
    base_offset: np.ndarray
    before: Runs

    @classmethod
    def of(cls, row: np.ndarray, base_offset: np.ndarray, before: np.ndarray) -> SizedSegments:
        return cls(row, base_offset, Runs.of(row, before))


def quota_cuts(
    topics: pa.Table, partition_topic: np.ndarray, segments: SizedSegments, bytes_at: np.ndarray, log_end: np.ndarray,
    age_cut: np.ndarray,
) -> QuotaCuts:  # fmt: skip
    """The quota cuts at each instant (``bytes_at``, ``log_end``: the partitions' then;
    ``age_cut``: the ``backlog_age`` record cut, record_level.py's).

    ``size_evict_cut`` is the smallest base of a segment there whose bytes and the
    later ones' fit the quota, else the log end: the first segment with at least
    ``bytes_at - backlog_size`` before it. A segment past the log end has not begun
    by then: the log end is the cut."""
    quota = topics["backlog_size"]
    size_set = quota.is_valid().to_numpy(zero_copy_only=False)[partition_topic]
    age_set = topics["backlog_age"].is_valid().to_numpy(zero_copy_only=False)[partition_topic]
    evicting = pc.equal(topics["backlog_policy"], "consumer_backlog_eviction").fill_null(False)
    wanted = bytes_at - quota.fill_null(0).to_numpy()[partition_topic]
    partition = np.broadcast_to(np.arange(bytes_at.shape[1]), bytes_at.shape)
    first = segments.before.first_at_least(partition, wanted)
    there = first < len(segments.row)
    base = np.append(segments.base_offset, 0)[np.where(there, first, len(segments.row))]
    size = np.where(there, np.minimum(base, log_end), log_end)
    return QuotaCuts(size, age_cut, size_set, age_set, evicting.to_numpy(zero_copy_only=False)[partition_topic])


def barriers(subs: Subscribers, cuts: QuotaCuts, beyond: np.ndarray) -> np.ndarray:
    """Per instant (rows) and partition (columns), the barrier of the virtual topic
    at that instant: the lowest position of a protecting subscriber not expired by
    then, lifted by eviction to each quota's cut; ``beyond`` (past every offset of
    the partition) where there is none, and none after: an expired group never holds
    again. No barrier is one that passes every segment."""
    lowest = np.full(cuts.size.shape, _NO_POSITION)
    holding = subs.live & subs.protect
    for k, row in enumerate(lowest):
        np.minimum.at(row, subs.partition[holding[k]], subs.position[k, holding[k]])
    evicted = np.maximum(
        lowest, np.maximum(np.where(cuts.size_set, cuts.size, lowest), np.where(cuts.age_set, cuts.age, lowest))
    )
    barrier = np.where(cuts.evicting, evicted, lowest)
    return np.where(lowest == _NO_POSITION, beyond, barrier)


@dataclass(frozen=True)
class Verdicts:
    """Per instant (rows) and subscriber (columns, as :class:`Subscribers`), whether
    it is over each backlog quota."""

    size: np.ndarray
    age: np.ndarray


def verdicts(subs: Subscribers, cuts: QuotaCuts, floor: np.ndarray) -> Verdicts:
    """Who is over a quota at each instant, before eviction, with each position at
    least its partition's ``floor`` then (the log start the cycle before the instant
    left: engine/forecast/quotas.py says why)."""
    position = np.maximum(subs.position, floor[:, subs.partition])
    size = subs.live & cuts.size_set[subs.partition] & (position < cuts.size[:, subs.partition])
    age = subs.live & cuts.age_set[subs.partition] & (position < cuts.age[:, subs.partition])
    return Verdicts(size, age)
