"""An in-memory catalog for the reference model, and its loading into a real SQLite
:class:`engine.catalog.catalog.Catalog` (random ones: :mod:`tests.reference.strategies`).

Unlike the real catalog, a segment here carries every record's timestamp, so that the
model can find record-level time cuts by scanning records itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

import numpy as np

from engine.catalog.catalog import Catalog, GroupKind
from engine.policy.fields import exact_text
from engine.prune.record_times import NO_RECORD, FirstRecord
from engine.prune.time_cuts import RecordReads
from engine.store.segment import SegmentInfo

# -- the in-memory catalog ----------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """A topic's effective policy as numbers: ms or bytes, ``None`` = infinite.

    The same fields and units as the TOPICS table, plus ``segment_size`` (not used by
    retention, but part of a valid policy)."""

    segment_size: int = 1024
    segment_roll: int | None = None
    retention_time: int | None = None
    retention_size: int | None = None
    max_time: int | None = None
    max_partition_size: int | None = None
    granularity: str = "segment"
    consumption: str = "ignore"
    subscription_expiry: int | None = None
    message_ttl: int | None = None
    backlog_size: int | None = None
    backlog_age: int | None = None
    backlog_policy: str = "producer_request_hold"
    max_deletes_per_cycle: int | None = None
    hold: bool = False

    def texts(self) -> dict[str, str]:
        """Every field as a text the policy parser reads back to exactly this value."""
        return {f.name: exact_text(f.name, getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Segment:
    """One segment: offsets ``[base, next)``, one timestamp per record, in offset order."""

    base: int
    next: int
    size: int
    sealed: bool
    timestamps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        assert self.next - self.base == len(self.timestamps), "one timestamp per offset"

    @property
    def empty(self) -> bool:
        return self.next == self.base

    @property
    def first_ts(self) -> int | None:
        return self.timestamps[0] if self.timestamps else None

    @property
    def max_ts(self) -> int | None:
        return max(self.timestamps) if self.timestamps else None

    def records(self) -> list[tuple[int, int]]:
        """``(offset, timestamp)`` of every record, in offset order."""
        return [(self.base + i, ts) for i, ts in enumerate(self.timestamps)]


@dataclass(frozen=True)
class Partition:
    """``[log_start, T)`` and its segments ``S_0 .. S_n`` (``S_n`` active)."""

    index: int
    log_start: int  # H
    segments: tuple[Segment, ...]

    @property
    def next_offset(self) -> int:  # T
        return self.segments[-1].next


@dataclass(frozen=True)
class Position:
    partition: int
    position: int
    committed_at: int
    #: (position, committed at) of an earlier commit the group's reading pace is
    #: measured from (engine/catalog/anchors.py); None: no pace observed
    anchor: tuple[int, int] | None = None


@dataclass(frozen=True)
class Group:
    name: str
    kind: GroupKind
    positions: tuple[Position, ...]


@dataclass(frozen=True)
class Topic:
    name: str
    policy: Policy
    partitions: tuple[Partition, ...]
    groups: tuple[Group, ...] = ()
    #: the policy texts saved on the topic (the rest comes from the defaults)
    overrides: Mapping[str, str] = field(default_factory=dict)
    #: id of the topic's latest policy change (0: none); filled by load_into_catalog
    policy_version: int = 0


@dataclass(frozen=True)
class RefCatalog:
    topics: tuple[Topic, ...]
    now: int
    #: the engine defaults (config file texts) the overrides apply on top of
    defaults: Mapping[str, str] = field(default_factory=dict)


# -- record timestamps for the snapshot -----------------------------------------------


class FakeRecordTimes:
    """The snapshot's ``RecordTimes`` protocol answered from the in-memory catalog."""

    def __init__(self, catalog: RefCatalog) -> None:
        self.segments = {(t.name, p.index, s.base): s for t in catalog.topics for p in t.partitions for s in p.segments}
        self.calls: list[tuple[str, int, int, int, int]] = []

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        """The first record at or after ``start_offset`` in that segment whose
        timestamp is >= ``theta``, or None."""
        self.calls.append((topic, partition, segment_base, start_offset, theta))
        segment = self.segments.get((topic, partition, segment_base))
        if segment is None:
            return None
        for offset, ts in segment.records():
            if offset >= start_offset and ts >= theta:
                return FirstRecord(offset, ts)
        return None

    def first_offsets(self, reads: RecordReads) -> np.ndarray:
        found = [
            self.first_at_or_after(reads.topics[topic], partition, base, start, theta)
            for topic, partition, base, start, theta in zip(
                reads.topic.tolist(), reads.partition.tolist(), reads.segment_base.tolist(),
                reads.start_offset.tolist(), reads.theta.tolist(),
            )
        ]  # fmt: skip
        return np.array([NO_RECORD if record is None else record.offset for record in found], np.int64)


# -- loading into a real catalog -------------------------------------------------------


def load_into_catalog(generated: RefCatalog, catalog: Catalog) -> RefCatalog:
    """Write ``generated`` into ``catalog`` (topics, policy overrides, partitions, the
    exact segment rows, groups and positions) in one transaction.

    Returns ``generated`` with each topic's ``policy_version`` set to the id of its
    latest policy change in the catalog's journal (0 if none)."""
    now = generated.now
    with catalog.write():
        for topic in generated.topics:
            catalog.add_topic(topic.name, len(topic.partitions), now)
            catalog.replace_overrides(topic.name, dict(topic.overrides), actor="test", now_ms=now)
            for partition in topic.partitions:
                infos = [
                    SegmentInfo(s.base, s.next, s.size, s.first_ts, s.max_ts, s.sealed) for s in partition.segments
                ]
                catalog.db.execute(
                    "DELETE FROM segments WHERE topic = ? AND partition = ?", (topic.name, partition.index)
                )
                catalog.update_segments(topic.name, partition.index, infos, partition.next_offset)
                catalog.db.execute(
                    "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition = ?",
                    (partition.log_start, topic.name, partition.index),
                )
            for group in topic.groups:
                catalog.add_group(topic.name, group.name, group.kind, "earliest", {}, now)
                for p in group.positions:
                    if p.anchor is None:
                        catalog.set_position(topic.name, group.name, p.partition, p.position, p.committed_at)
                        continue
                    # Two commits, the anchor's then this one, rotated with no least span.
                    for position, at in (p.anchor, (p.position, p.committed_at)):
                        catalog.commit_position(topic.name, group.name, p.partition, position, at, span_ms=0)
        versions = dict(catalog.db.execute("SELECT topic, MAX(id) FROM policy_changes GROUP BY topic").fetchall())
    return replace(
        generated,
        topics=tuple(replace(t, policy_version=versions.get(t.name) or 0) for t in generated.topics),
    )
