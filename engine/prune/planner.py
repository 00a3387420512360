"""The planner: docs/RETENTION.md as DataFrame operations on Spark.

The snapshot goes in as Parquet, the plan comes back as Arrow. The planner puts every
row of a partition (the partition itself, its segments, its group positions) in one
frame, tagged by ``row``, so that every per-partition quantity (prefixes, barrier,
cut, new log start) is a window aggregate over ``(topic, partition)`` attached to
each row: one shuffle of narrow rows, local sorts, no joins back, and one Spark job
that returns the whole plan. Per-partition facts (extent, record-level time cuts,
topic policy) are small and joined by broadcast. No Python UDFs; nothing is
collected into Python loops: the plan leaves Spark as one Arrow table, split by row
kind.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.prune import tables
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, SnapshotFiles

#: stands for "no limit" where a number is compared (the budget)
UNLIMITED = 1 << 62

KEYS = ["topic", "partition"]

#: numeric policy fields the planner reads (null: infinite)
_POLICY_NUMBERS = [
    "segment_roll", "retention_time", "retention_size", "max_time", "max_partition_size",
    "subscription_expiry", "message_ttl", "backlog_size", "backlog_age", "max_deletes_per_cycle",
]  # fmt: skip

#: partitions per topic that the partition key leaves room for (Broker's MAX_PARTITIONS)
_KEY_STRIDE = 10_000

#: reason codes (docs/RETENTION.md); Spark computes an index into this tuple, the
#: plan tables carry the names
REASONS = (
    "DELETE_BELOW_LOG_START", "DELETE_TIME", "DELETE_SIZE", "DELETE_MAX_TIME", "DELETE_MAX_SIZE",
    "KEEP_HOLD", "KEEP_ACTIVE", "KEEP_BUDGET", "KEEP_BARRIER", "KEEP_PREFIX", "KEEP_FUTURE_TIMESTAMP",
    "KEEP_WITHIN_TIME", "KEEP_SIZE_TARGET", "KEEP_NO_LIMIT",
)  # fmt: skip
_REASON_CODES = {name: code for code, name in enumerate(REASONS)}


def _code(reason: str) -> int:
    return _REASON_CODES[reason]


# Row kinds of the planning frame.
PARTITION_ROW, SEGMENT_ROW, GROUP_ROW = 0, 1, 2


@dataclass(frozen=True)
class Plan:
    """Decisions for one instant: the four tables of :mod:`engine.prune.tables`."""

    now: int
    tables: dict[str, pa.Table]
    #: topics the snapshot left out (invalid effective policy): topic -> reason
    rejected: dict[str, str]

    def deletions(self) -> pa.Table:
        segments = self.tables["segments"]
        return segments.filter(pc.equal(segments["decision"], "delete"))


class Planner:
    """Plans cycles on one :class:`SparkEngine`; Parquet goes through ``scratch``."""

    def __init__(self, engine: SparkEngine, scratch: Path) -> None:
        self.engine = engine
        self.scratch = scratch

    def plan(self, snapshot: Snapshot, *, tag: str | None = None) -> Plan:
        """Plan ``snapshot``; ``tag`` names the Spark job for :meth:`cancel`."""
        keyed = Snapshot(snapshot.now, _with_partition_keys(snapshot.tables), snapshot.rejected)
        with SnapshotFiles(keyed, self.scratch) as files:
            frame = self.engine.run(
                lambda spark: _plan(spark, self.engine.functions(), self.engine.window(), files.paths, snapshot.now),
                tag or f"plan-{uuid.uuid4().hex}",
            )
        return Plan(snapshot.now, _split(frame, keyed.tables), snapshot.rejected)

    def cancel(self, tag: str) -> None:
        self.engine.cancel(tag)


def _plan(spark: Any, F: Any, Window: Any, paths: dict[str, str], now: int) -> pa.Table:
    return _planning_frame(spark, F, Window, paths, now).toArrow()


_DDL_TYPES = {pa.string(): "STRING", pa.int32(): "INT", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN"}


def _ddl(schema: pa.Schema) -> str:
    """A Spark DDL schema string: given to the reader, it spares a schema-inference job."""
    return ", ".join(f"`{f.name}` {_DDL_TYPES[f.type]}" for f in schema)


def _with_partition_keys(snapshot: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Add ``pid``, one integer per (topic, partition), to the tables keyed by both:
    Spark then shuffles, sorts and windows on an integer instead of comparing topic
    names on every row."""
    topics = snapshot["topics"]["topic"]

    def keyed(table: pa.Table) -> pa.Table:
        topic_index = pc.cast(pc.index_in(table["topic"], value_set=topics), pa.int64())
        pid = pc.add(pc.multiply(topic_index, _KEY_STRIDE), pc.cast(table["partition"], pa.int64()))
        return table.append_column("pid", pid)

    return {name: keyed(t) if "partition" in t.column_names else t for name, t in snapshot.items()}


def _planning_frame(spark: Any, F: Any, Window: Any, paths: dict[str, str], now: int) -> Any:
    """The plan as one frame: a row per partition, per segment and per group position.

    Rows are shuffled by (topic, partition) while still narrow; the per-partition
    facts (extent, record-level time cuts, topic policy) are then joined by
    broadcast, which keeps that partitioning, so the windows below need no other
    exchange. Three levels of window aggregates, each depending on the one before:
    sizes and the furthest-behind subscriber; the prefixes; what is deleted."""
    col = F.col

    def read(name: str) -> Any:
        schema = tables.SNAPSHOT_TABLES[name]
        if "partition" in schema.names:
            schema = schema.append(pa.field("pid", pa.int64()))
        return spark.read.schema(_ddl(schema)).parquet(paths[name])

    cuts = (
        read("time_cuts")
        .groupBy("pid")
        .pivot("kind", list(tables.TIME_CUT_KINDS))
        .agg(F.min("offset"))
        .select("pid", *(col(k).alias(f"tc_{k}") for k in tables.TIME_CUT_KINDS))
    )
    policies = read("topics").select(
        "topic",
        *_POLICY_NUMBERS,
        "hold",
        (col("granularity") == "message").alias("message"),
        (col("consumption") == "protect").alias("protect"),
        (col("backlog_policy") == "consumer_backlog_eviction").alias("evicting"),
    )
    partition_facts = (
        read("partitions")
        .select("pid", "topic", col("log_start_offset").alias("H"), col("next_offset").alias("T"))
        .join(cuts, "pid", "left")
        .join(F.broadcast(policies), "topic")
        .drop("topic")
    )
    rows = (
        read("partitions")
        .select("pid")
        .withColumn("row", F.lit(PARTITION_ROW))
        .unionByName(read("segments").drop(*KEYS).withColumn("row", F.lit(SEGMENT_ROW)), allowMissingColumns=True)
        .unionByName(
            read("positions").drop(*KEYS, "committed_at").withColumn("row", F.lit(GROUP_ROW)),
            allowMissingColumns=True,
        )
        .repartition("pid")
        .join(F.broadcast(partition_facts), "pid")
    )
    w = Window.partitionBy("pid")
    now_ = F.lit(now)
    frame = _level_one(rows, F, Window, w, now_)
    frame = _level_two(frame, F, w, now_)
    frame = _decide(frame, F, now_)
    frame = _level_three(frame, F, w)
    return _final_positions(frame, F).select(*_output_columns(F))


def _flag(condition: Any, F: Any) -> Any:
    """A rule with an infinite limit compares with null: never true."""
    return F.coalesce(condition, F.lit(False))


def _level_one(rows: Any, F: Any, Window: Any, w: Any, now: Any) -> Any:
    """Per row: group expiry and TTL; over the partition: running sizes, segment
    ranks, the subscriber furthest behind and the active segment's first timestamp.

    Each stage is one ``withColumns``: Spark analyses the plan once per call, so a
    chain of single ``withColumn`` calls costs seconds on a plan this size."""
    col = F.col
    segment = col("row") == SEGMENT_ROW
    subscriber = _flag((col("row") == GROUP_ROW) & (col("kind") == "subscriber"), F)
    expired = _flag(now - col("group_last_commit") > col("subscription_expiry"), F)
    pos_eff = F.greatest(col("position"), col("H"))
    pos_ttl = F.when(subscriber & col("message_ttl").isNotNull(), F.greatest(pos_eff, col("tc_ttl"))).otherwise(pos_eff)
    holding = subscriber & ~expired & col("protect")
    # Non-segment rows have no base offset: they sort first and count nothing.
    ordered = w.orderBy("base_offset").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    frame = rows.withColumns(
        {
            "subscriber": subscriber,
            "expired": expired,
            "pos_eff": pos_eff,
            "pos_ttl": pos_ttl,
            "suffix_after": F.sum("size_bytes").over(w) - F.sum("size_bytes").over(ordered),
            "rn": F.count("base_offset").over(ordered),
            "behind": F.min(F.when(holding, F.struct(pos_ttl.alias("pos"), col("group").alias("name")))).over(w),
            "active_first_ts": F.max(
                F.when(segment & ~col("sealed") & (col("size_bytes") > 0), col("first_timestamp"))
            ).over(w),
        }
    )
    sealed = _flag(segment & col("sealed"), F)
    suffix_from = col("suffix_after") + col("size_bytes")
    return frame.withColumns(
        {
            "suffix_from": suffix_from,
            "is_sealed": sealed,
            "e_time": _flag(sealed & (col("max_timestamp") < now - col("retention_time")), F),
            "e_size": _flag(sealed & (col("suffix_after") >= col("retention_size")), F),
            "e_max_time": _flag(sealed & (col("max_timestamp") < now - col("max_time")), F),
            "e_max_size": _flag(sealed & (suffix_from > col("max_partition_size")), F),
            "live": _flag(segment & (col("next_offset") > col("H")), F),
        }
    )


def _level_two(frame: Any, F: Any, w: Any, now: Any) -> Any:
    """Over the partition: the segment-level prefixes (``first_not``) and the backlog
    size cut; then per row the quota, eviction, barrier, target, hard cut and cut."""
    col = F.col
    segment = col("row") == SEGMENT_ROW

    def first_not(condition: Any) -> Any:
        first = F.min(F.when(col("live") & ~condition, col("base_offset"))).over(w)
        return F.greatest(col("H"), F.coalesce(first, col("T")))

    fits_quota = segment & (col("suffix_from") <= col("backlog_size"))
    frame = frame.withColumns(
        {
            "fn_target": first_not(col("e_time") | col("e_size")),
            "fn_size": first_not(col("e_size")),
            "fn_hard": first_not(col("e_max_time") | col("e_max_size")),
            "fn_max_size": first_not(col("e_max_size")),
            "size_evict_cut": F.coalesce(F.min(F.when(fits_quota, col("base_offset"))).over(w), col("T")),
        }
    )
    evicting = col("evicting")
    size_floor = F.when(col("backlog_size").isNotNull(), col("size_evict_cut"))
    age_floor = F.when(col("backlog_age").isNotNull(), col("tc_backlog_age"))
    subscriber = col("subscriber")
    over_size = _flag(subscriber & col("backlog_size").isNotNull() & (col("pos_ttl") < col("size_evict_cut")), F)
    over_age = _flag(subscriber & (col("pos_ttl") < col("tc_backlog_age")), F)
    # Eviction lifts every subscriber of the partition to the same floor, so the
    # lowest position after eviction is the lowest after TTL, lifted to that floor.
    furthest = col("behind.pos")
    barrier = F.when(furthest.isNotNull() & evicting, F.greatest(furthest, size_floor, age_floor)).otherwise(furthest)
    message = col("message")

    def record_cut(kind: str, limit: str) -> Any:
        return F.when(col(limit).isNotNull(), col(f"tc_{kind}")).otherwise(col("H"))

    target = F.when(message, F.greatest(record_cut("retention", "retention_time"), col("fn_size"))).otherwise(
        col("fn_target")
    )
    hard = F.when(message, F.greatest(record_cut("max_time", "max_time"), col("fn_max_size"))).otherwise(col("fn_hard"))
    return frame.withColumns(
        {
            "over_quota": ~col("expired") & (over_size | over_age),
            "pos_new": F.when(subscriber & evicting, F.greatest(col("pos_ttl"), size_floor, age_floor)).otherwise(
                col("pos_ttl")
            ),
            "barrier": barrier,
            "barrier_group": col("behind.name"),
            "target": target,
            "hard": hard,
            "cut": F.least(col("T"), F.greatest(col("H"), hard, F.least(target, barrier))),
            "roll": _flag(now - col("active_first_ts") >= col("segment_roll"), F),
        }
    )


def _decide(frame: Any, F: Any, now: Any) -> Any:
    """Per segment: decision, reason, eligibility time and detail (RETENTION.md tables)."""
    col = F.col
    message = col("message")
    nxt = col("next_offset")
    wanted = _flag(col("is_sealed") & ~col("hold") & (nxt <= col("cut")), F)
    deleted = wanted & _flag(col("rn") <= F.coalesce(col("max_deletes_per_cycle"), F.lit(UNLIMITED)), F)
    by_target = nxt <= F.least(col("target"), col("barrier"))
    time_rule = F.when(message, _flag(nxt <= col("tc_retention"), F)).otherwise(col("e_time"))
    max_time_rule = F.when(message, _flag(nxt <= col("tc_max_time"), F)).otherwise(col("e_max_time"))
    delete_reason = (
        F.when(nxt <= col("H"), _code("DELETE_BELOW_LOG_START"))
        .when(by_target & time_rule, _code("DELETE_TIME"))
        .when(by_target, _code("DELETE_SIZE"))
        .when(max_time_rule, _code("DELETE_MAX_TIME"))
        .otherwise(_code("DELETE_MAX_SIZE"))
    )
    held_by_barrier = (nxt <= col("target")) & _flag(nxt > col("barrier"), F)
    eligible_itself = col("e_time") | col("e_size") | col("e_max_time") | col("e_max_size")
    time_limited = col("retention_time").isNotNull()
    keep_reason = (
        F.when(col("hold"), _code("KEEP_HOLD"))
        .when(~col("sealed"), _code("KEEP_ACTIVE"))
        .when(wanted, _code("KEEP_BUDGET"))
        .when(held_by_barrier, _code("KEEP_BARRIER"))
        .when(eligible_itself, _code("KEEP_PREFIX"))
        .when(time_limited & (col("max_timestamp") > now), _code("KEEP_FUTURE_TIMESTAMP"))
        .when(time_limited, _code("KEEP_WITHIN_TIME"))
        .when(col("retention_size").isNotNull(), _code("KEEP_SIZE_TARGET"))
        .otherwise(_code("KEEP_NO_LIMIT"))
    )
    barrier_named = ~col("hold") & col("sealed") & ~wanted & held_by_barrier
    return frame.withColumns(
        {
            "wanted": wanted,
            "deleted": deleted,
            "reason_code": F.when(deleted, delete_reason).otherwise(keep_reason),
            "eligible_at": F.when(
                col("is_sealed"),
                F.least(col("max_timestamp") + col("retention_time") + 1, col("max_timestamp") + col("max_time") + 1),
            ),
            "detail": F.when(
                barrier_named,
                F.concat(F.lit("group "), col("barrier_group"), F.lit(" at "), col("barrier").cast("string")),
            ),
        }
    )


def _level_three(frame: Any, F: Any, w: Any) -> Any:
    """Over the partition: what the cycle deletes; then the new log start H'."""
    col = F.col
    frame = frame.withColumns(
        {
            "last_deleted_next": F.max(F.when(col("deleted"), col("next_offset"))).over(w),
            "first_kept_by_budget": F.min(F.when(col("wanted") & ~col("deleted"), col("base_offset"))).over(w),
            "segments_deleted": F.count(F.when(col("deleted"), True)).over(w),
            "bytes_deleted": F.coalesce(F.sum(F.when(col("deleted"), col("size_bytes"))).over(w), F.lit(0)),
        }
    )
    new_start = (
        F.when(col("hold"), col("H"))
        .when(col("message"), F.greatest(col("H"), F.least(col("cut"), col("first_kept_by_budget"))))
        .otherwise(F.greatest(col("H"), F.coalesce(col("last_deleted_next"), col("H"))))
    )
    return frame.withColumn("new_log_start_offset", new_start)


def _final_positions(frame: Any, F: Any) -> Any:
    """Per group row: the final position and what moved it."""
    col = F.col
    live = ~col("expired")
    new_position = F.when(live, F.greatest(col("pos_new"), col("new_log_start_offset"))).otherwise(col("position"))
    return frame.withColumns(
        {
            "new_position": new_position,
            "ttl_skipped": F.when(live, col("pos_ttl") - col("pos_eff")).otherwise(0),
            "evicted_skipped": F.when(live, col("pos_new") - col("pos_ttl")).otherwise(0),
            "moved_skipped": F.when(live, new_position - col("pos_new")).otherwise(0),
            "quota_blocks_producers": col("over_quota") & ~col("evicting"),
        }
    )


#: columns of the planning frame that leave Spark (the union of the plan tables')
_SEGMENT_OUTPUT = ["base_offset", "next_offset", "size_bytes", "sealed", "deleted", "eligible_at", "detail"]
#: the numbers of partition rows and of group rows travel packed in one array column:
#: a null array costs a segment row 4 bytes, where a dozen null columns would cost 100
_PARTITION_NUMBERS = ["H", "new_log_start_offset", "T", "roll", "barrier", "segments_deleted", "bytes_deleted"]
_GROUP_NUMBERS = [
    "position", "new_position", "expired", "ttl_skipped", "evicted_skipped", "moved_skipped",
    "over_quota", "quota_blocks_producers",
]  # fmt: skip


def _output_columns(F: Any) -> list[Any]:
    """What leaves Spark: the segment columns on segment rows, the group names on
    group rows, and the packed numbers of partition and group rows."""
    col = F.col

    def packed(names: list[str]) -> Any:
        return F.array(*(col(n).cast("bigint") for n in names))

    segment = col("row") == SEGMENT_ROW
    return [
        col("row").cast("tinyint").alias("row"),
        col("pid"),
        *(F.when(segment, col(n)).alias(n) for n in _SEGMENT_OUTPUT),
        F.when(segment, col("reason_code")).cast("tinyint").alias("reason_code"),
        F.when(col("row") == GROUP_ROW, col("group")).alias("group"),
        F.when(col("row") == GROUP_ROW, col("kind")).alias("kind"),
        F.when(col("row") == PARTITION_ROW, packed(_PARTITION_NUMBERS))
        .when(col("row") == GROUP_ROW, packed(_GROUP_NUMBERS))
        .alias("numbers"),
    ]


def _split(frame: pa.Table, snapshot: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The plan tables from the planning frame's rows, by row kind, with the topic
    and partition of each row's key put back."""
    partitions = snapshot["partitions"]
    where = pc.index_in(frame["pid"], value_set=partitions["pid"])
    frame = frame.append_column("topic", partitions["topic"].take(where)).append_column(
        "partition", partitions["partition"].take(where)
    )

    def rows(kind: int, schema: pa.Schema, numbers: list[str], renames: dict[str, str] | None = None) -> pa.Table:
        part = frame.filter(pc.equal(frame["row"], kind))
        for i, name in enumerate(numbers):
            part = part.append_column(name, pc.list_element(part["numbers"], i))
        if kind == SEGMENT_ROW:
            names = pa.array(REASONS).take(part["reason_code"])
            decision = pc.if_else(part["deleted"], "delete", "keep")
            part = part.append_column("reason", names).append_column("decision", decision)
        if renames:
            part = part.rename_columns([renames.get(n, n) for n in part.column_names])
        return part.select(schema.names).cast(schema)

    groups = rows(GROUP_ROW, tables.PLAN_GROUPS.append(pa.field("quota_blocks_producers", pa.bool_())), _GROUP_NUMBERS)
    # The decision per group was made on Spark; a topic is in the quota-exceeded state
    # when any of its groups' rows says so.
    blocked = pc.unique(groups.filter(groups["quota_blocks_producers"])["topic"])
    topics = snapshot["topics"]
    renamed = {"H": "log_start_offset", "next_offset": "_segment_next", "T": "next_offset"}
    return {
        "segments": rows(SEGMENT_ROW, tables.PLAN_SEGMENTS, []),
        "partitions": rows(PARTITION_ROW, tables.PLAN_PARTITIONS, _PARTITION_NUMBERS, renamed),
        "groups": groups.drop_columns("quota_blocks_producers"),
        "topics": pa.table(
            {
                "topic": topics["topic"],
                "quota_exceeded": pc.is_in(topics["topic"], value_set=blocked),
                "policy_version": topics["policy_version"],
            },
            schema=tables.PLAN_TOPICS,
        ),
    }
