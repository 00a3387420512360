"""Arrow schemas of the planner's input (the catalog snapshot) and output (the plan).

The snapshot is one pure input: the planner on Spark, the reference model of the
tests and every consumer of a plan agree on these columns and nothing else. Policy
numbers are milliseconds or bytes; null means infinite (docs/RETENTION.md).
"""

from __future__ import annotations

import pyarrow as pa

# -- snapshot (planner input) ---------------------------------------------------------

TOPICS = pa.schema(
    [
        ("topic", pa.string()),
        ("partitions", pa.int32()),
        ("segment_roll", pa.int64()),
        ("retention_time", pa.int64()),
        ("retention_size", pa.int64()),
        ("max_time", pa.int64()),
        ("max_partition_size", pa.int64()),
        ("granularity", pa.string()),  # segment | message
        ("consumption", pa.string()),  # ignore | protect
        ("subscription_expiry", pa.int64()),
        ("message_ttl", pa.int64()),
        ("backlog_size", pa.int64()),
        ("backlog_age", pa.int64()),
        ("backlog_policy", pa.string()),
        ("max_deletes_per_cycle", pa.int64()),
        ("hold", pa.bool_()),
        #: id of the topic's latest policy change: the executor re-plans a topic whose
        #: policy changed after the snapshot
        ("policy_version", pa.int64()),
    ]
)

PARTITIONS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_start_offset", pa.int64()),
        ("next_offset", pa.int64()),
    ]
)

SEGMENTS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("size_bytes", pa.int64()),
        ("first_timestamp", pa.int64()),
        ("max_timestamp", pa.int64()),
        ("sealed", pa.bool_()),
    ]
)

POSITIONS = pa.schema(
    [
        ("topic", pa.string()),
        ("group", pa.string()),
        ("kind", pa.string()),  # subscriber | reader
        ("partition", pa.int32()),
        ("position", pa.int64()),
        ("committed_at", pa.int64()),
        #: the group's latest commit on any partition of the topic (for expiry)
        ("group_last_commit", pa.int64()),
    ]
)

#: kinds of record-level time cut (docs/RETENTION.md, "Time cuts at record level"),
#: each with the policy limit its threshold is taken at (θ = now - limit)
TIME_CUT_LIMITS = {
    "retention": "retention_time",
    "max_time": "max_time",
    "ttl": "message_ttl",
    "backlog_age": "backlog_age",
}
TIME_CUT_KINDS = tuple(TIME_CUT_LIMITS)

TIME_CUTS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("kind", pa.string()),
        ("offset", pa.int64()),
    ]
)

SNAPSHOT_TABLES = {
    "topics": TOPICS,
    "partitions": PARTITIONS,
    "segments": SEGMENTS,
    "positions": POSITIONS,
    "time_cuts": TIME_CUTS,
}

# -- plan (planner output) ----------------------------------------------------------

PLAN_SEGMENTS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("size_bytes", pa.int64()),
        ("sealed", pa.bool_()),
        ("decision", pa.string()),  # delete | keep
        ("reason", pa.string()),
        ("eligible_at", pa.int64()),
        ("detail", pa.string()),  # KEEP_BARRIER: "group G at P"; else null
    ]
)

PLAN_PARTITIONS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_start_offset", pa.int64()),
        ("new_log_start_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("roll", pa.bool_()),
        ("barrier", pa.int64()),  # null: no barrier
        ("segments_deleted", pa.int64()),
        ("bytes_deleted", pa.int64()),
    ]
)

PLAN_GROUPS = pa.schema(
    [
        ("topic", pa.string()),
        ("group", pa.string()),
        ("kind", pa.string()),
        ("partition", pa.int32()),
        ("position", pa.int64()),  # as in the snapshot
        ("new_position", pa.int64()),  # after TTL, eviction and moving up to the new log start
        ("expired", pa.bool_()),
        ("ttl_skipped", pa.int64()),  # messages skipped by message_ttl
        ("evicted_skipped", pa.int64()),  # messages skipped by consumer_backlog_eviction
        ("moved_skipped", pa.int64()),  # messages skipped because the log start passed them
        ("over_quota", pa.bool_()),  # over backlog_size or backlog_age (before eviction)
        ("over_backlog_size", pa.bool_()),  # which of the two
        ("over_backlog_age", pa.bool_()),
    ]
)

PLAN_TOPICS = pa.schema(
    [
        ("topic", pa.string()),
        ("quota_exceeded", pa.bool_()),  # only with the two producer backlog policies
        ("policy_version", pa.int64()),
    ]
)

PLAN_TABLES = {
    "segments": PLAN_SEGMENTS,
    "partitions": PLAN_PARTITIONS,
    "groups": PLAN_GROUPS,
    "topics": PLAN_TOPICS,
}
