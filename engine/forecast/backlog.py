"""The timeline's subscribers (engine/forecast/timeline.py): where each one stands at
each instant, the barrier the protecting ones hold, how far eviction lifts it, and
who is over a backlog quota (docs/RETENTION.md, "Per topic, before the cut", 1 to 3).

Each is the planner's own rule (engine/prune/plan/rules.py: ``pos_ttl``, ``expired``,
``holding``, ``BARRIER``, ``over_quotas``), evaluated over the columns of the virtual
topic at every instant (engine/forecast/extend.py); what is this module's is those
columns: where the subscribers stand, where each quota ends. Each only moves up as
time passes: a position, the log end, the bytes on disk and every time cut. So the
barrier, lifted or not, stays one series per partition the timeline can search for
the first instant it passes a segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast.extend import moved
from engine.forecast.reading import Reading
from engine.forecast.record_level import NO_CUT
from engine.forecast.thresholds import threshold
from engine.forecast.vectorised import Nullable, Value, evaluate, holds, values
from engine.prune.by_partition import Runs, partition_rows
from engine.prune.plan.expr import col, substituted
from engine.prune.plan.layout import GROUP_ROW
from engine.prune.plan.rules import BARRIER, FITS_QUOTA, over_quotas, row_rules
from engine.prune.snapshot import Snapshot

_NO_POSITION = np.iinfo(np.int64).max


#: the planner's rules of a group row (engine/prune/plan/rules.py), asked at every
#: instant of the subscribers' own columns
_RULES = row_rules(before_flags=True)
_OVER_QUOTAS = over_quotas(_RULES)
#: the bytes before a segment from which it fits the backlog size quota, the
#: partition's bytes then being ``bytes_at``: the planner's rule, solved
_FITS_FROM = threshold(substituted(FITS_QUOTA, {"bytes_from": col("bytes_at") - col("before")}), "before")


@dataclass(frozen=True)
class Subscribers:
    """The snapshot's subscribers on its partitions (``rows`` of its positions) at
    each instant: the planner's columns of their group rows (``columns``, each a
    column per subscriber or a grid of instants (rows) by subscribers (columns)),
    and from its rules their position after ``message_ttl`` (``position``) and
    whether they hold the barrier (``holding``)."""

    rows: np.ndarray
    partition: np.ndarray  # the row of its partition
    columns: dict[str, Value]
    position: np.ndarray
    holding: np.ndarray


def subscribers(
    snapshot: Snapshot, arrived: np.ndarray, instants: Sequence[int], reads: Sequence[Reading], ttl: np.ndarray
) -> Subscribers:
    """The subscribers at ``instants`` (``arrived``: records by each; ``ttl``: the
    ``message_ttl`` cut of each partition then, record_level.py's), their commits
    shifted back to now, as the plan of the virtual topic at the instant reads them:
    at least the snapshot's log start, which the virtual topics keep."""
    positions, partitions, topics = (snapshot.tables[name] for name in ("positions", "partitions", "topics"))
    row = partition_rows(positions, partitions)
    policy = topics.take(pc.index_in(positions["topic"], value_set=topics["topic"]))
    subscriber = pc.equal(positions["kind"], "subscriber").to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(subscriber & (row >= 0))
    partition, taken = row[rows], pa.array(rows)
    at = moved(snapshot, arrived, instants, reads)
    columns: dict[str, Value] = {
        "row": GROUP_ROW,
        "kind": "subscriber",
        "now": snapshot.now,
        "group_last_commit": at.group_last_commit[:, rows],
        "position": at.position[:, rows],
        "H": partitions["log_start_offset"].to_numpy()[partition],
        "tc_ttl": Nullable(ttl[:, partition], ttl[:, partition] != NO_CUT),
        "protect": pc.equal(policy["consumption"].take(taken), "protect").to_numpy(zero_copy_only=False),
        **{name: Nullable.of_arrow(policy[name].take(taken)) for name in ("subscription_expiry", "message_ttl")},
    }
    position = values(_RULES["pos_ttl"], columns, null=NO_CUT)
    return Subscribers(rows, partition, columns, position, holds(_RULES["holding"], columns))


@dataclass(frozen=True)
class QuotaCuts:
    """Per partition at each instant, what the planner reads of the backlog quotas
    (``columns``: ``fits_quota``, the log end ``T`` and ``tc_backlog_age``, each a grid
    of instants (rows) by partitions (columns); the quotas and ``evicting``, a column
    per partition)."""

    columns: dict[str, Nullable]

    @property
    def set(self) -> np.ndarray:
        """Per partition, whether its topic sets a backlog quota."""
        return self.columns["backlog_size"].valid | self.columns["backlog_age"].valid

    def at(self, partition: np.ndarray) -> dict[str, Nullable]:
        """The columns of the partitions of rows ``partition``."""
        return {name: value[..., partition] for name, value in self.columns.items()}


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

    ``fits_quota`` is the smallest base of a segment there that fits the quota
    (rules.FITS_QUOTA): the first with enough bytes before it (:data:`_FITS_FROM`). A
    segment past the log end has not begun by then: none fits."""
    quota = Nullable.of_arrow(topics["backlog_size"])[partition_topic]
    least = evaluate(_FITS_FROM, {"bytes_at": bytes_at, "backlog_size": quota})
    partition = np.broadcast_to(np.arange(bytes_at.shape[1]), bytes_at.shape)
    first = np.where(least.valid, segments.before.first_at_least(partition, least.values), len(segments.row))
    base = np.append(segments.base_offset, 0)[first]
    evicting = pc.equal(topics["backlog_policy"], "consumer_backlog_eviction").fill_null(False)
    columns = {
        "fits_quota": Nullable(base, (first < len(segments.row)) & (base < log_end)),
        "T": Nullable.of(log_end),
        "tc_backlog_age": Nullable(age_cut, age_cut != NO_CUT),
        "backlog_size": quota,
        "backlog_age": Nullable.of_arrow(topics["backlog_age"])[partition_topic],
        "evicting": Nullable.of(evicting.to_numpy(zero_copy_only=False)[partition_topic]),
    }
    return QuotaCuts(columns)


def barriers(subs: Subscribers, cuts: QuotaCuts, beyond: np.ndarray) -> np.ndarray:
    """Per instant (rows) and partition (columns), the barrier of the virtual topic
    at that instant: the planner's (rules.BARRIER) over the lowest position of a
    subscriber holding it then; ``beyond`` (past every offset of the partition)
    where none does, and none after: an expired group never holds again. No barrier
    is one that passes every segment."""
    lowest = np.full(cuts.columns["T"].values.shape, _NO_POSITION)
    for k, row in enumerate(lowest):
        np.minimum.at(row, subs.partition[subs.holding[k]], subs.position[k, subs.holding[k]])
    behind = Nullable(lowest, lowest != _NO_POSITION)
    return np.where(behind.valid, values(BARRIER, {**cuts.columns, "behind.pos": behind}, null=0), beyond)


@dataclass(frozen=True)
class Verdicts:
    """Per instant (rows) and subscriber (columns, as :class:`Subscribers`), whether
    it is over each backlog quota."""

    size: np.ndarray
    age: np.ndarray


def verdicts(subs: Subscribers, cuts: QuotaCuts, floor: np.ndarray) -> Verdicts:
    """Who is over a quota at each instant, before eviction, by the planner's rules
    (rules.over_quotas), with the log start its partition's ``floor`` then (the log
    start the cycle before the instant left: engine/forecast/quotas.py says why)."""
    columns = {**subs.columns, **cuts.at(subs.partition), "H": floor[:, subs.partition]}
    return Verdicts(*(holds(_OVER_QUOTAS[name], columns) for name in ("over_backlog_size", "over_backlog_age")))
