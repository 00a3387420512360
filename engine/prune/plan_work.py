"""The work a plan asks for (:mod:`engine.prune.work`), selected from its tables.

A plan (engine/prune/tables.py) has a row per segment, partition and group position,
most of which change nothing: a large store has a million segment rows and a few
deletions. The rows that change something are selected with Arrow compute filters,
and only those become Python objects.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from engine.catalog.bulk_reads import keys_of
from engine.prune.work import (
    ExpiredGroup,
    GroupMove,
    MoveAction,
    PartitionWork,
    SegmentDeletion,
    Skip,
    TopicWork,
)


def _positive(table: pa.Table, column: str) -> pa.ChunkedArray:
    return pc.greater(pc.fill_null(table[column], 0), 0)


def _skips(row: Mapping) -> tuple[Skip, ...]:
    """The causes of a group row's move, in the order the planner applies them."""
    moved: MoveAction = "reader_moved" if row["kind"] == "reader" else "subscriber_overrun"
    causes: tuple[tuple[MoveAction, int], ...] = (
        ("ttl_advance", row["ttl_skipped"]),
        ("backlog_eviction", row["evicted_skipped"]),
        (moved, row["moved_skipped"]),
    )
    # Moved without skipping anything: the group was below a log start that an
    # earlier cycle had moved (those messages were gone already).
    return tuple(Skip(action, n) for action, n in causes if n) or (Skip(moved, 0),)


def work_from_plan(plan: Mapping[str, pa.Table]) -> list[TopicWork]:
    """The changes a plan asks for, per topic (every topic of the plan, so that its
    quota state is recorded even when nothing else changes), in topic order."""
    segments = plan["segments"]
    deleted = segments.filter(pc.equal(segments["decision"], "delete")).sort_by(
        [("topic", "ascending"), ("partition", "ascending"), ("base_offset", "ascending")]
    )

    groups = plan["groups"]
    expired = pc.fill_null(groups["expired"], False)
    changed = pc.or_(
        pc.not_equal(groups["new_position"], groups["position"]),
        pc.or_(
            _positive(groups, "ttl_skipped"),
            pc.or_(_positive(groups, "evicted_skipped"), _positive(groups, "moved_skipped")),
        ),
    )
    expired_rows = groups.filter(expired).to_pylist()
    moved_rows = (
        groups.filter(pc.and_(pc.invert(expired), pc.fill_null(changed, False)))
        .sort_by([("topic", "ascending"), ("partition", "ascending"), ("group", "ascending")])
        .to_pylist()
    )

    partitions = plan["partitions"]
    touched = pa.concat_arrays(
        [
            keys_of(deleted),
            pa.array([f"{r['topic']}\x1f{r['partition']}" for r in moved_rows], pa.string()),
        ]
    )
    wanted = pc.or_(
        pc.or_(
            pc.not_equal(partitions["new_log_start_offset"], partitions["log_start_offset"]),
            pc.fill_null(partitions["roll"], False),
        ),
        pc.is_in(keys_of(partitions), value_set=touched),
    )
    partition_rows = partitions.filter(wanted).sort_by([("topic", "ascending"), ("partition", "ascending")]).to_pylist()

    deletions: dict[tuple[str, int], list[SegmentDeletion]] = {}
    for r in deleted.select(["topic", "partition", "base_offset", "next_offset", "size_bytes", "reason"]).to_pylist():
        deletions.setdefault((r["topic"], r["partition"]), []).append(
            SegmentDeletion(r["base_offset"], r["next_offset"], r["size_bytes"], r["reason"])
        )
    moves: dict[tuple[str, int], list[GroupMove]] = {}
    for r in moved_rows:
        moves.setdefault((r["topic"], r["partition"]), []).append(
            GroupMove(r["group"], r["kind"], r["partition"], r["position"], r["new_position"], _skips(r))
        )
    expired_groups: dict[str, dict[str, ExpiredGroup]] = {}
    for r in expired_rows:
        expired_groups.setdefault(r["topic"], {})[r["group"]] = ExpiredGroup(r["group"], r["kind"])

    by_topic: dict[str, list[PartitionWork]] = {}
    for r in partition_rows:
        key = (r["topic"], r["partition"])
        by_topic.setdefault(r["topic"], []).append(
            PartitionWork(
                r["topic"],
                r["partition"],
                r["log_start_offset"],
                r["new_log_start_offset"],
                tuple(deletions.get(key, ())),
                tuple(moves.get(key, ())),
                bool(r["roll"]),
            )
        )
    return [
        TopicWork(
            t["topic"],
            t["policy_version"] or 0,
            bool(t["quota_exceeded"]),
            tuple(sorted(expired_groups.get(t["topic"], {}).values(), key=lambda g: g.group)),
            tuple(by_topic.get(t["topic"], ())),
        )
        for t in plan["topics"].sort_by("topic").to_pylist()
    ]
