"""The planner's input: one consistent snapshot of the catalog, with effective policies
as numbers and the record-level time cuts, as Arrow tables.

The snapshot is read in one SQLite read transaction, so topics, partitions, segments
and positions are from the same instant even while producers and consumers write.
Record-level time cuts (docs/RETENTION.md) need record timestamps, which the catalog
does not hold: for each cut the catalog names the one segment that can contain it and
the store finds the record there (:class:`RecordTimes`), like Kafka's offsetsForTimes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from engine.catalog.catalog import Catalog
from engine.datadir import DataDir
from engine.errors import InvalidPolicy
from engine.policy.effective import EffectivePolicy, resolve
from engine.prune import tables
from engine.store.segment import Segment, SegmentMissing

#: policy fields the planner reads, with the snapshot column each becomes
_NUMERIC_FIELDS = (
    "segment_roll",
    "retention_time",
    "retention_size",
    "max_time",
    "max_partition_size",
    "subscription_expiry",
    "message_ttl",
    "backlog_size",
    "backlog_age",
    "max_deletes_per_cycle",
)


class RecordTimes(Protocol):
    """Where record timestamps come from (the store; a fake in the tests)."""

    def first_at_or_after(self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int) -> int | None:
        """The first offset >= ``start_offset`` in the segment at ``segment_base``
        whose record timestamp is >= ``theta``, or None."""


@dataclass(frozen=True)
class StoreRecordTimes:
    """Record timestamps read from the segment files of a data directory."""

    data: DataDir

    def first_at_or_after(self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int) -> int | None:
        directory = self.data.partition_dir(topic, partition)
        try:
            # Sealed: nothing past the valid data is cut, and nothing is repaired here.
            segment = Segment.open(directory, segment_base, sealed=True, repair=False)
        except SegmentMissing:
            return None  # pruned since the snapshot was read: the next segment decides
        return segment.first_at_or_after(start_offset, theta)


@dataclass(frozen=True)
class Snapshot:
    """Planner input for one instant ``now`` (epoch ms)."""

    now: int
    tables: dict[str, pa.Table]
    #: topics left out because their effective policy is invalid (topic -> reason),
    #: e.g. after a change of the config file's defaults
    rejected: dict[str, str]


def _arrow(rows: Sequence[tuple], schema: pa.Schema) -> pa.Table:
    columns: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


def _in(column: str, names: Sequence[str] | None) -> tuple[str, tuple]:
    # ``column`` is a literal of this module; the names go as parameters, one "?" each.
    if names is None:
        return "", ()
    return f" WHERE {column} IN ({','.join('?' * len(names))})", tuple(names)


def _topic_row(name: str, partitions: int, policy: EffectivePolicy, version: int) -> tuple:
    return (
        name,
        partitions,
        *(policy[f] for f in _NUMERIC_FIELDS[:5]),
        policy["granularity"],
        policy["consumption"],
        *(policy[f] for f in _NUMERIC_FIELDS[5:9]),
        policy["backlog_policy"],
        policy["max_deletes_per_cycle"],
        bool(policy["hold"]),
        version,
    )


def _thresholds(policy: EffectivePolicy, now: int, has_subscribers: bool) -> dict[str, int]:
    """The record-level time cuts a topic needs: kind -> threshold θ (RETENTION.md)."""
    wanted: dict[str, int | None] = {}
    if policy["granularity"] == "message":
        wanted["retention"] = policy.limit("retention_time")
        wanted["max_time"] = policy.limit("max_time")
    if has_subscribers:
        wanted["ttl"] = policy.limit("message_ttl")
        wanted["backlog_age"] = policy.limit("backlog_age")
    return {kind: now - limit for kind, limit in wanted.items() if limit is not None}


def build_snapshot(
    catalog: Catalog,
    records: RecordTimes,
    *,
    defaults: Mapping[str, str],
    now: int,
    topics: Sequence[str] | None = None,
    overrides: Mapping[str, Mapping[str, str]] | None = None,
) -> Snapshot:
    """Snapshot ``topics`` (all if None) at ``now``; ``overrides`` replaces the saved
    policy overrides of some topics (a what-if that is not saved)."""
    overrides = overrides or {}
    db = catalog.db
    with catalog.read():  # every table from the same instant
        where, params = _in("name", topics)
        topic_rows = list(db.conn.execute(f"SELECT name, partitions FROM topics{where} ORDER BY name", params))
        versions = dict(db.conn.execute("SELECT topic, MAX(id) FROM policy_changes GROUP BY topic"))
        subscribed = {r[0] for r in db.conn.execute("SELECT DISTINCT topic FROM groups WHERE kind = 'subscriber'")}
        policies: dict[str, EffectivePolicy] = {}
        rejected: dict[str, str] = {}
        for name, _count in topic_rows:
            try:
                policies[name] = resolve(overrides.get(name, catalog.overrides(name)), defaults)
            except InvalidPolicy as error:
                rejected[name] = str(error)
        names = sorted(policies)
        where, params = _in("topic", names)
        partition_rows = list(
            db.conn.execute(
                f"SELECT topic, partition, log_start_offset, next_offset FROM partitions{where}"
                " ORDER BY topic, partition",
                params,
            )
        )
        segment_rows = list(
            db.conn.execute(
                "SELECT topic, partition, base_offset, next_offset, size_bytes, first_timestamp, max_timestamp, sealed"
                f" FROM segments{where} ORDER BY topic, partition, base_offset",
                params,
            )
        )
        position_rows = list(
            db.conn.execute(
                "SELECT p.topic, p.group_name, g.kind, p.partition, p.position, p.committed_at,"
                " MAX(p.committed_at) OVER (PARTITION BY p.topic, p.group_name)"
                " FROM positions p JOIN groups g ON g.topic = p.topic AND g.name = p.group_name"
                f"{where.replace('topic', 'p.topic')} ORDER BY p.topic, p.group_name, p.partition",
                params,
            )
        )
        time_cut_rows = _time_cuts(catalog, records, policies, now, subscribed, partition_rows)
    topic_table = [
        _topic_row(name, count, policies[name], versions.get(name, 0)) for name, count in topic_rows if name in policies
    ]
    return Snapshot(
        now,
        {
            "topics": _arrow(topic_table, tables.TOPICS),
            "partitions": _arrow(partition_rows, tables.PARTITIONS),
            "segments": _arrow([(*r[:7], bool(r[7])) for r in segment_rows], tables.SEGMENTS),
            "positions": _arrow(position_rows, tables.POSITIONS),
            "time_cuts": _arrow(time_cut_rows, tables.TIME_CUTS),
        },
        rejected,
    )


def _time_cuts(
    catalog: Catalog,
    records: RecordTimes,
    policies: Mapping[str, EffectivePolicy],
    now: int,
    subscribed: set[str],
    partitions: Sequence[tuple[str, int, int, int]],
) -> list[tuple[str, int, str, int]]:
    """Per topic needing them, per partition (``(topic, partition, log start, next
    offset)`` rows of the snapshot) and kind: the record-level time cut."""
    thresholds = {topic: _thresholds(policy, now, topic in subscribed) for topic, policy in policies.items()}
    rows: list[tuple[str, int, str, int]] = []
    for topic, partition, log_start, log_end in partitions:
        for kind, theta in thresholds.get(topic, {}).items():
            cut = time_cut(catalog, records, topic, partition, log_start, theta)
            rows.append((topic, partition, kind, log_end if cut is None else cut))
    return rows


def time_cut(catalog: Catalog, records: RecordTimes, topic: str, partition: int, log_start: int, theta: int) -> int | None:
    """The first offset >= the log start whose timestamp is >= θ; None if none is.

    Every record of a segment whose max timestamp is below θ is below θ, so only
    segments at or above θ are candidates, oldest first; the first one usually holds
    the cut. It may not when its newer records lie below the log start."""
    candidates = catalog.db.conn.execute(
        "SELECT base_offset FROM segments WHERE topic = ? AND partition = ? AND next_offset > ?"
        " AND max_timestamp >= ? ORDER BY base_offset",
        (topic, partition, log_start, theta),
    )
    for (base,) in candidates:
        found = records.first_at_or_after(topic, partition, base, max(base, log_start), theta)
        if found is not None:
            return found
    return None
