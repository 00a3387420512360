"""What a plan would do, summed up for an operator: per partition the segments and
bytes it deletes and why, what it keeps back that it wanted to delete, and per group
what happens to its position. Plain Python over the plan's Arrow tables (no Textual),
built in a worker thread: on a large catalog only the rows that matter are read out of
Arrow (deletions, held-back segments, groups that move), never every segment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.prune.planner import Plan

#: kept-segment reasons that mean "wanted, but not deleted this cycle" (docs/RETENTION.md)
HELD_BACK_REASONS = ("KEEP_BARRIER", "KEEP_BUDGET")


@dataclass(frozen=True)
class PartitionPreview:
    """One partition a plan changes, or that something keeps it from changing."""

    topic: str
    partition: int
    segments: int
    bytes: int
    log_start_offset: int
    new_log_start_offset: int
    #: reason code -> segments deleted for it
    reasons: dict[str, int] = field(default_factory=dict)
    #: reason code -> segments wanted but kept (a subscriber's barrier, the budget)
    held_back: dict[str, int] = field(default_factory=dict)
    #: the KEEP_BARRIER detail (``group G at P``), when a subscriber holds data back
    barrier: str | None = None

    @property
    def messages(self) -> int:
        return self.new_log_start_offset - self.log_start_offset


@dataclass(frozen=True)
class GroupEffect:
    """A group whose position the plan moves, or which it expires."""

    topic: str
    group: str
    kind: str
    partition: int
    position: int
    new_position: int
    expired: bool
    ttl_skipped: int
    evicted_skipped: int
    moved_skipped: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GroupEffect:
        """The effect a row of a plan's groups table describes."""
        return cls(
            topic=row["topic"], group=row["group"], kind=row["kind"], partition=row["partition"],
            position=row["position"], new_position=row["new_position"], expired=bool(row["expired"]),
            ttl_skipped=row["ttl_skipped"] or 0, evicted_skipped=row["evicted_skipped"] or 0,
            moved_skipped=row["moved_skipped"] or 0,
        )  # fmt: skip

    @property
    def causes(self) -> tuple[str, ...]:
        """What moves the group, in one word each: ``expired`` alone, or ``ttl``,
        ``eviction``, ``log start``."""
        if self.expired:
            return ("expired",)
        counts = (("ttl", self.ttl_skipped), ("eviction", self.evicted_skipped), ("log start", self.moved_skipped))
        return tuple(cause for cause, skipped in counts if skipped)

    @property
    def skipped(self) -> int:
        """Messages the group had not read that it will never see."""
        return self.ttl_skipped + self.evicted_skipped + self.moved_skipped

    @property
    def why(self) -> str:
        """The causes, in the words of the journal's action kinds."""
        causes = []
        if self.expired:
            causes.append("expired (subscription_expiry)")
        if self.ttl_skipped:
            causes.append(f"message_ttl skips {self.ttl_skipped:,}")
        if self.evicted_skipped:
            causes.append(f"backlog eviction skips {self.evicted_skipped:,}")
        if self.moved_skipped:
            causes.append(f"log start passes it, skips {self.moved_skipped:,}")
        return "; ".join(causes) or "moved up to the new log start"


@dataclass(frozen=True)
class PlanPreview:
    """See the module docstring."""

    now: int
    partitions: tuple[PartitionPreview, ...]
    groups: tuple[GroupEffect, ...]
    #: topics in the plan's scope that are on hold: nothing of them is deleted
    held_topics: tuple[str, ...]
    #: topics left out of the plan (invalid effective policy): topic -> reason
    rejected: dict[str, str]

    @property
    def segments(self) -> int:
        return sum(p.segments for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def topics(self) -> tuple[str, ...]:
        """Topics the plan deletes from."""
        return tuple(sorted({p.topic for p in self.partitions if p.segments or p.messages}))

    @property
    def skipping_groups(self) -> tuple[GroupEffect, ...]:
        """Groups that lose data they have not read."""
        return tuple(g for g in self.groups if g.skipped or g.expired)

    def differences(self, later: PlanPreview) -> list[str]:
        """What ``later`` (a plan of the same scope) does otherwise, one line per
        partition or group: ``orders/0: 2 → 1 segment(s) to delete, log start to 32 → to 16``
        (``not moved`` where a plan leaves the log start where the store has it)."""
        return [line for line, _covered in self._compared(later)]

    def dropped(self, later: PlanPreview) -> list[str]:
        """The :meth:`differences` where ``later`` no longer does what this plan does:
        deletes fewer segments of a partition, from another log start (a cycle ran in
        between), or moves a group less far. Empty when ``later`` does all of it and
        perhaps more: producers appended since, so a size cap or a backlog eviction
        reaches further; this plan's part of it is still exactly what it was."""
        return [line for line, covered in self._compared(later) if not covered]

    def _compared(self, later: PlanPreview) -> list[tuple[str, bool]]:
        """(line, whether ``later`` still does all of this plan's part) per difference."""
        lines = []
        before = {(p.topic, p.partition): p for p in self.partitions}
        after = {(p.topic, p.partition): p for p in later.partitions}
        for key in sorted(before.keys() | after.keys()):
            old, new = before.get(key), after.get(key)
            old_cut = (old.segments, old.new_log_start_offset) if old else (0, None)
            new_cut = (new.segments, new.new_log_start_offset) if new else (0, None)
            if old_cut != new_cut:
                line = (
                    f"{key[0]}/{key[1]}: {old_cut[0]} → {new_cut[0]} segment(s) to delete, "
                    f"log start {_offset(old_cut[1])} → {_offset(new_cut[1])}"
                )
                lines.append((line, _partition_covered(old, new)))
        moves_before = {(g.topic, g.group, g.partition): g for g in self.groups}
        moves_after = {(g.topic, g.group, g.partition): g for g in later.groups}
        for topic, group, partition in sorted(moves_before.keys() | moves_after.keys()):
            old_g, new_g = moves_before.get((topic, group, partition)), moves_after.get((topic, group, partition))
            if (old_g and (old_g.new_position, old_g.expired)) != (new_g and (new_g.new_position, new_g.expired)):
                line = f"group {group} on {topic}/{partition}: {_move(old_g)} → {_move(new_g)}"
                lines.append((line, _group_covered(old_g, new_g)))
        return lines


def _partition_covered(old: PartitionPreview | None, new: PartitionPreview | None) -> bool:
    if old is None:
        return True
    return (
        new is not None
        and new.log_start_offset == old.log_start_offset
        and new.segments >= old.segments
        and new.new_log_start_offset >= old.new_log_start_offset
    )


def _group_covered(old: GroupEffect | None, new: GroupEffect | None) -> bool:
    if old is None:
        return True
    if new is None:
        return False
    return new.expired or (not old.expired and new.new_position >= old.new_position)


def _offset(offset: int | None) -> str:
    # "unchanged" read as a contradiction when a cycle since had moved it
    return "not moved" if offset is None else f"to {offset:,}"


def _move(group: GroupEffect | None) -> str:
    if group is None:
        return "not moved"
    return "expired" if group.expired else f"to {group.new_position:,}"


def _counts(table: pa.Table) -> dict[tuple[str, int], Counter[str]]:
    """(topic, partition) -> reason -> segments, grouped in Arrow."""
    out: dict[tuple[str, int], Counter[str]] = {}
    if table.num_rows == 0:
        return out
    grouped = table.group_by(["topic", "partition", "reason"]).aggregate([("base_offset", "count")])
    for row in grouped.to_pylist():
        out.setdefault((row["topic"], row["partition"]), Counter())[row["reason"]] = row["base_offset_count"]
    return out


def _barriers(segments: pa.Table) -> dict[tuple[str, int], str]:
    """(topic, partition) -> the barrier's detail, from its first KEEP_BARRIER segment."""
    barred = segments.filter(pc.equal(segments["reason"], "KEEP_BARRIER"))
    out: dict[tuple[str, int], str] = {}
    for row in barred.select(["topic", "partition", "detail"]).to_pylist():
        out.setdefault((row["topic"], row["partition"]), row["detail"])
    return out


def preview(plan: Plan) -> PlanPreview:
    """Sum ``plan`` up; see the module docstring."""
    segments = plan.tables["segments"]
    deletions = plan.deletions()
    held = segments.filter(pc.is_in(segments["reason"], pa.array(HELD_BACK_REASONS)))
    deleted, held_back, barriers = _counts(deletions), _counts(held), _barriers(held)
    deleted_bytes: dict[tuple[str, int], int] = {}
    if deletions.num_rows:
        sums = deletions.group_by(["topic", "partition"]).aggregate([("size_bytes", "sum")])
        deleted_bytes = {(r["topic"], r["partition"]): r["size_bytes_sum"] for r in sums.to_pylist()}
    on_hold = pc.unique(segments.filter(pc.equal(segments["reason"], "KEEP_HOLD"))["topic"]).to_pylist()

    partitions = []
    # One row per partition: few enough to read out whole.
    for row in plan.tables["partitions"].sort_by([("topic", "ascending"), ("partition", "ascending")]).to_pylist():
        key = (row["topic"], row["partition"])
        if key not in deleted and key not in held_back and row["new_log_start_offset"] == row["log_start_offset"]:
            continue
        reasons = deleted.get(key, Counter())
        partitions.append(
            PartitionPreview(
                topic=row["topic"],
                partition=row["partition"],
                segments=sum(reasons.values()),
                bytes=deleted_bytes.get(key, 0),
                log_start_offset=row["log_start_offset"],
                new_log_start_offset=row["new_log_start_offset"],
                reasons=dict(sorted(reasons.items())),
                held_back=dict(sorted(held_back.get(key, Counter()).items())),
                barrier=barriers.get(key),
            )
        )

    groups_table = plan.tables["groups"]
    changed = pc.or_(pc.not_equal(groups_table["new_position"], groups_table["position"]), groups_table["expired"])
    groups = tuple(
        GroupEffect.from_row(r)
        for r in groups_table.filter(changed)
        .sort_by([("topic", "ascending"), ("group", "ascending"), ("partition", "ascending")])
        .to_pylist()
    )
    return PlanPreview(plan.now, tuple(partitions), groups, tuple(sorted(on_hold)), dict(plan.rejected))
