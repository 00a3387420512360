"""A what-if: what a proposed policy would do now that the saved one would not.

Two plans of one topic at one instant, one with the saved policy and one with the
proposed overrides (``Pruner.plan(overrides=...)``, SPEC §4: the same decision
function), compared: the segments that would go now only with the proposed policy,
how each partition's log start would move, and which groups would skip data they
have not consumed (docs/RETENTION.md: positions moved by the TTL, by backlog
eviction or by the log start passing them, and groups expired).

Pure functions of two :class:`~engine.prune.planner.Plan`; no Spark, no Textual.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from console.model.plan_preview import GroupEffect
from engine.prune.planner import Plan


@dataclass(frozen=True)
class PartitionWhatIf:
    """One partition under both policies."""

    partition: int
    #: segments (and their bytes) the proposed policy deletes now and the saved one keeps
    segments: int
    bytes: int
    #: segments (and bytes) the saved policy deletes now and the proposed one keeps
    spared_segments: int
    spared_bytes: int
    log_start: int
    #: the log start after the cycle, with the saved and with the proposed policy
    saved_log_start: int
    new_log_start: int


@dataclass(frozen=True)
class GroupSkip:
    """A group's position on one partition that the proposed policy moves past data
    the group has not consumed (or a group it expires)."""

    group: str
    kind: str
    partition: int
    position: int
    #: the position after the cycle with the proposed policy (None: expired)
    new_position: int | None
    #: messages skipped with the proposed and with the saved policy
    skipped: int
    saved_skipped: int
    #: why: ``ttl``, ``eviction``, ``log start`` (comma-joined), or ``expired``
    why: str
    expired: bool
    saved_expired: bool

    @property
    def worse(self) -> bool:
        """Whether the proposed policy loses more of this group's data than the saved."""
        return self.skipped > self.saved_skipped or (self.expired and not self.saved_expired)


@dataclass(frozen=True)
class WhatIf:
    topic: str
    now: int
    partitions: tuple[PartitionWhatIf, ...]
    #: groups that would skip unconsumed data (or expire) with the proposed policy
    groups: tuple[GroupSkip, ...]

    @property
    def segments(self) -> int:
        return sum(p.segments for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def spared_segments(self) -> int:
        return sum(p.spared_segments for p in self.partitions)

    @property
    def spared_bytes(self) -> int:
        return sum(p.spared_bytes for p in self.partitions)


def _rows(plan: Plan, table: str, topic: str) -> list[dict[str, Any]]:
    rows: pa.Table = plan.tables[table]
    return rows.filter(pc.equal(rows["topic"], topic)).to_pylist()


def _deletions(plan: Plan, topic: str) -> dict[tuple[int, int], int]:
    """(partition, base offset) -> bytes of the segments the plan deletes."""
    return {
        (r["partition"], r["base_offset"]): r["size_bytes"]
        for r in _rows(plan, "segments", topic)
        if r["decision"] == "delete"
    }


def _sum(keys: Iterable[tuple[int, int]], sizes: dict[tuple[int, int], int], partition: int) -> tuple[int, int]:
    mine = [sizes[k] for k in keys if k[0] == partition]
    return len(mine), sum(mine)


def same_store(topic: str, saved: Plan, proposed: Plan) -> bool:
    """Whether two plans of ``topic`` read the same log starts: each plan reads the
    catalog itself, and a cycle between the two (any process's) moves them, which
    compared as the saved policy moving a log start backwards."""

    def starts(plan: Plan) -> dict[int, int]:
        return {r["partition"]: r["log_start_offset"] for r in _rows(plan, "partitions", topic)}

    return starts(saved) == starts(proposed)


def compare(topic: str, saved: Plan, proposed: Plan) -> WhatIf:
    """What ``proposed`` does to ``topic`` that ``saved`` does not (plans at one instant)."""
    saved_deleted, new_deleted = _deletions(saved, topic), _deletions(proposed, topic)
    only_new, only_saved = new_deleted.keys() - saved_deleted.keys(), saved_deleted.keys() - new_deleted.keys()
    saved_starts = {r["partition"]: r["new_log_start_offset"] for r in _rows(saved, "partitions", topic)}
    partitions = []
    for row in sorted(_rows(proposed, "partitions", topic), key=lambda r: r["partition"]):
        p = row["partition"]
        segments, size = _sum(only_new, new_deleted, p)
        spared, spared_size = _sum(only_saved, saved_deleted, p)
        partitions.append(
            PartitionWhatIf(
                partition=p,
                segments=segments,
                bytes=size,
                spared_segments=spared,
                spared_bytes=spared_size,
                log_start=row["log_start_offset"],
                saved_log_start=saved_starts.get(p, row["log_start_offset"]),
                new_log_start=row["new_log_start_offset"],
            )
        )
    saved_groups = {(r["group"], r["partition"]): GroupEffect.from_row(r) for r in _rows(saved, "groups", topic)}
    groups = []
    for row in sorted(_rows(proposed, "groups", topic), key=lambda r: (r["group"], r["partition"])):
        effect = GroupEffect.from_row(row)
        if not (effect.expired or effect.skipped):
            continue
        before = saved_groups.get((effect.group, effect.partition))
        groups.append(
            GroupSkip(
                group=effect.group,
                kind=effect.kind,
                partition=effect.partition,
                position=effect.position,
                new_position=None if effect.expired else effect.new_position,
                skipped=effect.skipped,
                saved_skipped=before.skipped if before else 0,
                why=", ".join(effect.causes),
                expired=effect.expired,
                saved_expired=bool(before and before.expired),
            )
        )
    return WhatIf(topic, proposed.now, tuple(partitions), tuple(groups))
