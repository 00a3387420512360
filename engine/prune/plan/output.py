"""The planner's output: the planning frame's rows split into the plan tables of
:mod:`engine.prune.tables`, by row kind, their packed numbers unpacked
(:mod:`~engine.prune.plan.layout`)."""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc

from engine.prune import tables
from engine.prune.plan.inputs import SparkInputs
from engine.prune.plan.layout import (
    GROUP_NUMBERS,
    GROUP_ROW,
    PARTITION_NUMBERS,
    PARTITION_ROW,
    REASONS,
    SEGMENT_ROW,
    Packed,
    code,
)


@functools.cache
def _decisions() -> pa.Array:
    """A segment's decision, by its reason code. Built on first use: ``pa.array`` of a
    list imports pandas, 0.4 s of every console launch when it ran at import."""
    return pa.array(["delete" if reason.startswith("DELETE_") else "keep" for reason in REASONS])


def split(frame: pa.Table, snapshot: dict[str, pa.Table], inputs: SparkInputs) -> dict[str, pa.Table]:
    """The plan tables from the planning frame's rows, by row kind: the topic and
    partition of each row's key put back, a segment's snapshot columns by its rank,
    the group names of their ids, and the detail of segments held back by a group:
    "group G at P"."""
    partitions, names = snapshot["partitions"], inputs.group_names

    def rows(kind: int, numbers: Packed) -> pa.Table:
        # Only the kind's own columns are filtered: the others are null on its rows.
        part = frame.select(["pid", "numbers"]).filter(pc.equal(frame["row"], kind))
        part = part.append_column("topic", partitions["topic"].take(part["pid"]))
        part = part.append_column("partition", partitions["partition"].take(part["pid"]))
        return numbers.unpacked(part, "numbers")

    partition_rows = rows(PARTITION_ROW, PARTITION_NUMBERS)
    decided = frame.select(["pid", "rn", "reason_code", "eligible_at"]).filter(pc.equal(frame["row"], SEGMENT_ROW))
    # A segment held back by a group names its partition's barrier: the detail is
    # written once per partition and taken by the segments that need it.
    barrier_detail = pc.binary_join_element_wise(
        "group ",
        names.take(partition_rows["barrier_group"]),
        " at ",
        pc.cast(partition_rows["barrier"], pa.string()),
        "",
    )
    held = pc.equal(decided["reason_code"], code("KEEP_BARRIER"))
    of_partition = pc.index_in(decided["pid"], value_set=partition_rows["pid"])
    segments = (
        snapshot["segments"]
        .take(inputs.snapshot_rows(decided["pid"].to_numpy(), decided["rn"].to_numpy()))
        .append_column("reason", pa.array(REASONS).take(decided["reason_code"]))
        .append_column("decision", _decisions().take(decided["reason_code"]))
        .append_column("eligible_at", decided["eligible_at"])
        .append_column("detail", barrier_detail.take(pc.if_else(held, of_partition, None)))
    )
    groups = rows(GROUP_ROW, GROUP_NUMBERS)
    groups = groups.append_column("group", names.take(groups["gid"]))
    groups = groups.append_column("kind", pc.if_else(pc.cast(groups["subscriber"], pa.bool_()), "subscriber", "reader"))
    over = [pc.cast(groups[name], pa.bool_()) for name in ("over_backlog_size", "over_backlog_age")]
    groups = groups.append_column("over_quota", pc.or_(*over))
    # The decision per group was made on Spark; a topic is in the quota-exceeded state
    # when any of its groups' rows says so.
    blocked = pc.unique(groups.filter(pc.cast(groups["quota_blocks_producers"], pa.bool_()))["topic"])
    topics = snapshot["topics"]
    renamed = {"H": "log_start_offset", "T": "next_offset"}
    partition_rows = partition_rows.rename_columns([renamed.get(n, n) for n in partition_rows.column_names])
    return {
        "segments": segments.select(tables.PLAN_SEGMENTS.names).cast(tables.PLAN_SEGMENTS),
        "partitions": partition_rows.select(tables.PLAN_PARTITIONS.names).cast(tables.PLAN_PARTITIONS),
        "groups": groups.select(tables.PLAN_GROUPS.names).cast(tables.PLAN_GROUPS),
        "topics": pa.table(
            {
                "topic": topics["topic"],
                "quota_exceeded": pc.is_in(topics["topic"], value_set=blocked),
                "policy_version": topics["policy_version"],
            },
            schema=tables.PLAN_TOPICS,
        ),
    }
