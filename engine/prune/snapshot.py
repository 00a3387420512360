"""The planner's input: one consistent snapshot of the catalog, with effective policies
as numbers and the record-level time cuts, as Arrow tables.

The snapshot is read in one SQLite read transaction, so topics, partitions, segments
and positions are from the same instant even while producers and consumers write;
its tables come into Arrow in bulk (engine/catalog/bulk_reads.py).
Record-level time cuts (docs/RETENTION.md) need record timestamps, which the catalog
does not hold: for each cut the snapshot's segments name the one that can contain it
and the store finds the record there (:class:`RecordTimes`), like Kafka's
offsetsForTimes (engine/prune/time_cuts.py).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.catalog.bulk_reads import CatalogTables
from engine.catalog.catalog import Catalog
from engine.errors import InvalidPolicy
from engine.policy.effective import EffectivePolicy, resolve
from engine.prune import tables
from engine.prune.by_partition import partition_rows
from engine.prune.record_times import NO_RECORD, RecordTimes
from engine.prune.time_cuts import CutCandidates


@dataclass(frozen=True)
class Snapshot:
    """Planner input for one instant ``now`` (epoch ms)."""

    now: int
    tables: dict[str, pa.Table]
    #: topics left out because their effective policy is invalid (topic -> reason),
    #: e.g. after a change of the config file's defaults
    rejected: dict[str, str]
    #: the catalog's tables as read, the base of the next snapshot's read (``since``)
    read: CatalogTables | None = None


def _topic_row(name: str, partitions: int, policy: EffectivePolicy, version: int) -> tuple:
    """One row of :data:`tables.TOPICS`, whose other columns are the policy fields
    of their names."""
    own = {"topic": name, "partitions": partitions, "hold": bool(policy["hold"]), "policy_version": version}
    return tuple(own[column] if column in own else policy[column] for column in tables.TOPICS.names)


def _thresholds(policy: EffectivePolicy, now: int, has_subscribers: bool) -> dict[str, int]:
    """The record-level time cuts a topic needs: kind -> threshold θ (RETENTION.md)."""
    kinds: list[str] = []
    if policy["granularity"] == "message":
        kinds += ["retention", "max_time"]
    if has_subscribers:
        kinds += ["ttl", "backlog_age"]
    limits = {kind: policy.limit(tables.TIME_CUT_LIMITS[kind]) for kind in kinds}
    return {kind: now - limit for kind, limit in limits.items() if limit is not None}


def build_snapshot(
    catalog: Catalog,
    records: RecordTimes,
    *,
    defaults: Mapping[str, str],
    now: int,
    topics: Sequence[str] | None = None,
    overrides: Mapping[str, Mapping[str, str]] | None = None,
    since: CatalogTables | None = None,
) -> Snapshot:
    """Snapshot ``topics`` (all if None) at ``now``; ``overrides`` replaces the saved
    policy overrides of some topics (a what-if that is not saved); ``since``, an
    earlier snapshot's ``read`` of every topic, spares re-reading what nobody wrote since.

    The catalog's tables come as Arrow columns in bulk (:meth:`Catalog.bulk_tables`):
    Python loops only over topics and time cuts, never over segments."""
    overrides = overrides or {}
    read = catalog.bulk_tables(topics, since)  # every table from the same instant
    topic_table = _as(read.topics, pa.schema([("topic", pa.string()), ("partitions", pa.int32())]))
    policies: dict[str, EffectivePolicy] = {}
    rejected: dict[str, str] = {}
    for name in topic_table["topic"].to_pylist():
        try:
            policies[name] = _resolved(
                frozenset(overrides.get(name, read.overrides.get(name, {})).items()), frozenset(defaults.items())
            )
        except InvalidPolicy as error:
            rejected[name] = str(error)
    partitions = _without(_as(read.partitions, tables.PARTITIONS), rejected)
    segments = _without(_as(read.segments, tables.SEGMENTS), rejected)
    positions = _without(_as(read.positions, tables.POSITIONS), rejected)
    time_cuts = _time_cuts(segments, records, policies, now, read.subscribed, partitions)
    versions = read.versions
    topic_rows = [
        _topic_row(name, count, policies[name], versions.get(name, 0))
        for name, count in zip(topic_table["topic"].to_pylist(), topic_table["partitions"].to_pylist())
        if name in policies
    ]
    return Snapshot(
        now,
        {
            "topics": pa.Table.from_pylist(
                [dict(zip(tables.TOPICS.names, row)) for row in topic_rows], schema=tables.TOPICS
            ),
            "partitions": partitions,
            "segments": segments,
            "positions": positions,
            "time_cuts": time_cuts,
        },
        rejected,
        read,
    )


@functools.lru_cache(maxsize=1 << 16)
def _resolved(overrides: frozenset[tuple[str, str]], defaults: frozenset[tuple[str, str]]) -> EffectivePolicy:
    """:func:`resolve`, remembered: parsing and checking every topic's policy took a
    quarter of a 1M-segment snapshot, and from one cycle to the next they rarely change."""
    return resolve(dict(overrides), dict(defaults))


def _as(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` as read (engine/catalog/bulk_reads.py), in ``schema``'s names and types."""
    return table.rename_columns(schema.names).cast(schema)


def _without(table: pa.Table, topics: Mapping[str, str]) -> pa.Table:
    """``table`` without the rows of ``topics``."""
    if not topics:
        return table
    return table.filter(pc.invert(pc.is_in(table["topic"], value_set=pa.array(list(topics), pa.string()))))


def _time_cuts(
    segments: pa.Table,
    records: RecordTimes,
    policies: Mapping[str, EffectivePolicy],
    now: int,
    subscribed: set[str],
    partitions: pa.Table,
) -> pa.Table:
    """Per topic needing them, per partition of ``partitions`` (the snapshot's) and
    kind: the record-level time cut (engine/prune/time_cuts.py), the end of the log
    where no record is recent enough."""
    thresholds = {topic: _thresholds(policy, now, topic in subscribed) for topic, policy in policies.items()}
    wanted = [
        (row, kind, theta)
        for row, topic in enumerate(partitions["topic"].to_pylist())
        for kind, theta in thresholds.get(topic, {}).items()
    ]
    rows = np.array([w[0] for w in wanted], np.int64)
    theta = np.array([w[2] for w in wanted], np.int64)
    # Only the topics that need a cut are laid out.
    needing = segments.filter(pc.is_in(segments["topic"], value_set=pc.unique(partitions["topic"].take(rows))))
    candidates = CutCandidates.of(needing, partition_rows(needing, partitions), partitions)
    cuts = candidates.cuts(records, rows, theta, candidates.first(rows, theta))
    log_end = partitions["next_offset"].to_numpy()[rows]
    return pa.table(
        {
            "topic": partitions["topic"].take(rows),
            "partition": partitions["partition"].take(rows),
            "kind": pa.array([w[1] for w in wanted], pa.string()),
            "offset": pa.array(np.where(cuts == NO_RECORD, log_end, cuts), pa.int64()),
        },
        schema=tables.TIME_CUTS,
    )
