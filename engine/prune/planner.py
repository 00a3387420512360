"""The planner: docs/RETENTION.md as DataFrame operations on Spark.

The snapshot goes in as Parquet, the plan comes back as Arrow. The planner puts every
row of a partition (the partition itself, its segments, its group positions) in one
frame, tagged by ``row``, so that every per-partition quantity (prefixes, barrier,
cut, new log start) is a window aggregate over ``(topic, partition)`` attached to
each row: one shuffle of narrow rows, one local sort, no joins back, and one Spark
job that returns the whole plan. Per-partition facts (extent, record-level time
cuts, topic policy) are small: assembled with Arrow, a row per partition, and joined
by broadcast wherever a step reads them. No Python UDFs; nothing is collected into
Python loops: the plan leaves Spark as one Arrow table, split by row kind.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
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

#: numeric policy fields the planner reads (null: infinite)
_POLICY_NUMBERS = [
    "segment_roll", "retention_time", "retention_size", "max_time", "max_partition_size",
    "subscription_expiry", "message_ttl", "backlog_size", "backlog_age", "max_deletes_per_cycle",
]  # fmt: skip

#: partitions per topic that the partition key leaves room for (Broker's MAX_PARTITIONS)
_KEY_STRIDE = 10_000

#: per-partition facts (:func:`_planner_tables`): extent, record-level time cuts
#: (null: none), topic policy (numbers as in the snapshot, choices as flags)
_FACTS = pa.schema(
    [
        ("pid", pa.int64()),
        ("H", pa.int64()),
        ("T", pa.int64()),
        *((f"tc_{kind}", pa.int64()) for kind in tables.TIME_CUT_KINDS),
        *((name, pa.int64()) for name in _POLICY_NUMBERS),
        ("hold", pa.bool_()),
        ("message", pa.bool_()),  # granularity = message
        ("protect", pa.bool_()),  # consumption = protect
        ("evicting", pa.bool_()),  # backlog_policy = consumer_backlog_eviction
    ]
)

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
        keyed = Snapshot(snapshot.now, _planner_tables(snapshot.tables), snapshot.rejected)
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


def _planner_tables(snapshot: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The snapshot tables with ``pid`` added to those keyed by (topic, partition),
    and ``facts``: a row per partition with its extent, its record-level time cut of
    each kind and its topic's policy, as the planner reads them.

    ``pid`` is the partition's row in the partitions table. Spark then shuffles,
    sorts and windows on an integer instead of comparing topic names on every row;
    being consecutive, the keys make each broadcast join on ``pid`` a lookup in a
    dense array rather than a hash table, and the plan's rows find their topic and
    partition by position. The facts are assembled here, by position too, because
    Spark would rebuild them (a pivot, two joins, three broadcasts) in every plan."""
    topics = snapshot["topics"]

    def key(table: pa.Table) -> pa.Array:
        topic_index = pc.cast(pc.index_in(table["topic"], value_set=topics["topic"]), pa.int64())
        return pc.add(pc.multiply(topic_index, _KEY_STRIDE), pc.cast(table["partition"], pa.int64()))

    partition_keys = key(snapshot["partitions"])

    def keyed(table: pa.Table) -> pa.Table:
        pid = pc.index_in(key(table), value_set=partition_keys, skip_nulls=True)
        return table.append_column("pid", pc.cast(pid, pa.int64()))

    keyed_tables = {name: keyed(t) if "partition" in t.column_names else t for name, t in snapshot.items()}
    return {**keyed_tables, "facts": _facts(keyed_tables)}


def _facts(snapshot: dict[str, pa.Table]) -> pa.Table:
    """The ``facts`` table (schema :data:`_FACTS`) of :func:`_planner_tables`; a
    partition of a topic the snapshot does not hold has none."""
    partitions, cuts = snapshot["partitions"], snapshot["time_cuts"]
    topic = pc.index_in(partitions["topic"], value_set=snapshot["topics"]["topic"])
    partitions = partitions.filter(pc.is_valid(topic))
    policy = snapshot["topics"].take(topic.drop_null())
    columns = {"pid": partitions["pid"], "H": partitions["log_start_offset"], "T": partitions["next_offset"]}
    for kind in tables.TIME_CUT_KINDS:
        of_kind = cuts.filter(pc.equal(cuts["kind"], kind)).group_by("pid").aggregate([("offset", "min")])
        columns[f"tc_{kind}"] = of_kind["offset_min"].take(pc.index_in(partitions["pid"], value_set=of_kind["pid"]))
    columns.update({name: policy[name] for name in (*_POLICY_NUMBERS, "hold")})
    columns["message"] = pc.equal(policy["granularity"], "message")
    columns["protect"] = pc.equal(policy["consumption"], "protect")
    columns["evicting"] = pc.equal(policy["backlog_policy"], "consumer_backlog_eviction")
    return pa.table(columns, schema=_FACTS)


def _planning_frame(spark: Any, F: Any, Window: Any, paths: dict[str, str], now: int) -> Any:
    """The plan as one frame: a row per partition, per segment and per group position.

    Rows are shuffled by (topic, partition) while narrow, and they stay narrow: a
    window operator copies every column of every row it passes, so the per-partition
    facts (extent, record-level time cuts, topic policy) never go through one. They
    are joined by broadcast, which keeps the partitioning (no other exchange), before
    each step that reads them and dropped before its windows; what a rule derives
    from them is evaluated where it is needed (:func:`_rules`). Three levels of
    window aggregates, each depending on the one before, on one sort: sizes and the
    furthest-behind subscriber; the prefixes; what is deleted."""
    col = F.col

    def read(name: str) -> Any:
        schema = {**tables.SNAPSHOT_TABLES, "facts": _FACTS}[name]
        if "partition" in schema.names:
            schema = schema.append(pa.field("pid", pa.int64()))
        return spark.read.schema(_ddl(schema)).parquet(paths[name])

    facts = read("facts")
    with_facts = _fact_joiner(facts, F)
    rows = (
        facts.select("pid", F.lit(PARTITION_ROW).alias("row"))
        .unionByName(
            read("segments").select(
                "pid",
                F.lit(SEGMENT_ROW).alias("row"),
                *_SEGMENT_COLUMNS,
                # of the first timestamps only the active segment's is read (idle roll)
                F.when(~col("sealed") & (col("size_bytes") > 0), col("first_timestamp")).alias("active_first_ts"),
            ),
            allowMissingColumns=True,
        )
        .unionByName(
            read("positions").select("pid", F.lit(GROUP_ROW).alias("row"), *_GROUP_COLUMNS),
            allowMissingColumns=True,
        )
        .repartition("pid")
    )
    rules = _rules(F, now)
    w = Window.partitionBy("pid")
    frame = _level_one(rows, with_facts, rules, F, Window, w)
    frame = _level_two(frame, with_facts, rules, F, w)
    frame = _decide(frame, with_facts, rules, F, now)
    frame = _level_three(frame, F, w)
    return with_facts(frame).select(*_output_columns(rules, F))


def _fact_joiner(facts: Any, F: Any) -> Callable[[Any], Any]:
    """A function that adds the per-partition facts to a frame, as columns, by a
    broadcast join on ``pid``.

    The facts travel packed in one array, so that every join broadcasts the very
    same relation and Spark reads and broadcasts it once: with separate columns (or
    a struct) it prunes each join's side to the facts that step reads, and then
    reads and broadcasts them once per join."""
    fields = [field for field in _FACTS if field.name != "pid"]
    packed = F.broadcast(facts.select("pid", F.array(*(F.col(f.name).cast("bigint") for f in fields)).alias("facts")))

    def join(frame: Any) -> Any:
        unpacked = (F.col("facts")[i].cast(_DDL_TYPES[f.type]).alias(f.name) for i, f in enumerate(fields))
        return frame.join(packed, "pid").select(*frame.columns, *unpacked)

    return join


#: snapshot columns that rows carry through the windows (null on the other row kinds)
_SEGMENT_COLUMNS = ["base_offset", "next_offset", "size_bytes", "max_timestamp", "sealed"]
_GROUP_COLUMNS = ["group", "kind", "position", "group_last_commit"]
_SNAPSHOT_COLUMNS = ["pid", "row", *_SEGMENT_COLUMNS, *_GROUP_COLUMNS]


def _flag(condition: Any, F: Any) -> Any:
    """A rule with an infinite limit compares with null: never true."""
    return F.coalesce(condition, F.lit(False))


def _rules(F: Any, now: int) -> dict[str, Any]:
    """The row-level rules of docs/RETENTION.md as column expressions, by name.

    They read snapshot columns, per-partition facts and window values of earlier
    levels by name: each step evaluates the ones it needs on its own rows rather
    than carrying their results (or the facts) through the windows."""
    col = F.col
    now_ = F.lit(now)
    segment = col("row") == SEGMENT_ROW
    subscriber = _flag((col("row") == GROUP_ROW) & (col("kind") == "subscriber"), F)
    expired = _flag(now_ - col("group_last_commit") > col("subscription_expiry"), F)
    pos_eff = F.greatest(col("position"), col("H"))
    pos_ttl = F.when(subscriber & col("message_ttl").isNotNull(), F.greatest(pos_eff, col("tc_ttl"))).otherwise(pos_eff)
    sealed = _flag(segment & col("sealed"), F)
    suffix_from = col("suffix_after") + col("size_bytes")
    return {
        "segment": segment,
        "subscriber": subscriber,
        "expired": expired,
        "pos_eff": pos_eff,
        "pos_ttl": pos_ttl,
        "holding": subscriber & ~expired & col("protect"),
        "roll": _flag(now_ - col("active_first_ts") >= col("segment_roll"), F),
        "is_sealed": sealed,
        "suffix_from": suffix_from,
        "e_time": _flag(sealed & (col("max_timestamp") < now_ - col("retention_time")), F),
        "e_size": _flag(sealed & (col("suffix_after") >= col("retention_size")), F),
        "e_max_time": _flag(sealed & (col("max_timestamp") < now_ - col("max_time")), F),
        "e_max_size": _flag(sealed & (suffix_from > col("max_partition_size")), F),
        "live": _flag(segment & (col("next_offset") > col("H")), F),
    }


def _level_one(rows: Any, with_facts: Callable[[Any], Any], rules: dict[str, Any], F: Any, Window: Any, w: Any) -> Any:
    """Over the partition: running sizes, segment ranks, the subscriber furthest
    behind (after TTL) and the active segment's first timestamp.

    One window operator: the whole-partition aggregates use the running sums'
    ordering, and windows with the same partitioning and ordering share one (every
    other ordering would add an operator)."""
    col = F.col
    holding = F.when(rules["holding"], F.struct(rules["pos_ttl"].alias("pos"), col("group").alias("name")))
    frame = with_facts(rows).select(*_SNAPSHOT_COLUMNS, "active_first_ts", holding.alias("holding"))
    # Non-segment rows have no base offset: they sort first and count nothing.
    ordered = w.orderBy("base_offset")
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return frame.select(
        *_SNAPSHOT_COLUMNS,
        (F.sum("size_bytes").over(whole) - F.sum("size_bytes").over(running)).alias("suffix_after"),
        F.count("base_offset").over(running).alias("rn"),
        F.min("holding").over(whole).alias("behind"),
        F.max("active_first_ts").over(whole).alias("active_first_ts"),
    )


#: level two's prefixes: name -> the segment-level flags it is the ``first_not`` of
_FIRST_NOT = {
    "fn_target": ("e_time", "e_size"),
    "fn_size": ("e_size",),
    "fn_hard": ("e_max_time", "e_max_size"),
    "fn_max_size": ("e_max_size",),
}
#: what rows carry out of level one
_LEVEL_ONE = [*_SNAPSHOT_COLUMNS, "suffix_after", "rn", "behind"]


def _level_two(frame: Any, with_facts: Callable[[Any], Any], rules: dict[str, Any], F: Any, w: Any) -> Any:
    """Over the partition: the first live segment outside each prefix and the first
    segment that fits the backlog size quota (before their bounds, see
    :func:`_decide`); per row the idle roll, while the facts are at hand."""
    col = F.col

    def outside(flags: tuple[str, ...]) -> Any:
        eligible = rules[flags[0]]
        for name in flags[1:]:
            eligible = eligible | rules[name]
        return F.when(rules["live"] & ~eligible, col("base_offset"))

    fits_quota = rules["segment"] & (rules["suffix_from"] <= col("backlog_size"))
    inputs = with_facts(frame).select(
        *_LEVEL_ONE,
        rules["roll"].alias("roll"),
        *(outside(flags).alias(name) for name, flags in _FIRST_NOT.items()),
        F.when(fits_quota, col("base_offset")).alias("fits_quota"),
    )
    return inputs.select(
        *_LEVEL_ONE,
        "roll",
        *(F.min(name).over(w).alias(name) for name in (*_FIRST_NOT, "fits_quota")),
    )


def _decide(frame: Any, with_facts: Callable[[Any], Any], rules: dict[str, Any], F: Any, now: int) -> Any:
    """Per row, with the facts: the quota, eviction, barrier, target, hard cut and
    cut; per segment decision, reason, eligibility time and detail (RETENTION.md
    tables); per group row its position after eviction and its quota state."""
    col = F.col
    now_ = F.lit(now)

    def first_not(name: str) -> Any:
        return F.greatest(col("H"), F.coalesce(col(name), col("T")))

    size_evict_cut = F.coalesce(col("fits_quota"), col("T"))
    evicting = col("evicting")
    size_floor = F.when(col("backlog_size").isNotNull(), size_evict_cut)
    age_floor = F.when(col("backlog_age").isNotNull(), col("tc_backlog_age"))
    subscriber, pos_ttl = rules["subscriber"], rules["pos_ttl"]
    over_size = _flag(subscriber & col("backlog_size").isNotNull() & (pos_ttl < size_evict_cut), F)
    over_age = _flag(subscriber & (pos_ttl < col("tc_backlog_age")), F)
    # Eviction lifts every subscriber of the partition to the same floor, so the
    # lowest position after eviction is the lowest after TTL, lifted to that floor.
    furthest = col("behind.pos")
    barrier = F.when(furthest.isNotNull() & evicting, F.greatest(furthest, size_floor, age_floor)).otherwise(furthest)
    message = col("message")

    def record_cut(kind: str, limit: str) -> Any:
        return F.when(col(limit).isNotNull(), col(f"tc_{kind}")).otherwise(col("H"))

    target = F.when(message, F.greatest(record_cut("retention", "retention_time"), first_not("fn_size"))).otherwise(
        first_not("fn_target")
    )
    hard = F.when(message, F.greatest(record_cut("max_time", "max_time"), first_not("fn_max_size"))).otherwise(
        first_not("fn_hard")
    )
    cut = F.least(col("T"), F.greatest(col("H"), hard, F.least(target, barrier)))
    nxt = col("next_offset")
    is_sealed = rules["is_sealed"]
    e_time, e_max_time = rules["e_time"], rules["e_max_time"]
    wanted = _flag(is_sealed & ~col("hold") & (nxt <= cut), F)
    deleted = wanted & _flag(col("rn") <= F.coalesce(col("max_deletes_per_cycle"), F.lit(UNLIMITED)), F)
    by_target = nxt <= F.least(target, barrier)
    time_rule = F.when(message, _flag(nxt <= col("tc_retention"), F)).otherwise(e_time)
    max_time_rule = F.when(message, _flag(nxt <= col("tc_max_time"), F)).otherwise(e_max_time)
    delete_reason = (
        F.when(nxt <= col("H"), _code("DELETE_BELOW_LOG_START"))
        .when(by_target & time_rule, _code("DELETE_TIME"))
        .when(by_target, _code("DELETE_SIZE"))
        .when(max_time_rule, _code("DELETE_MAX_TIME"))
        .otherwise(_code("DELETE_MAX_SIZE"))
    )
    held_by_barrier = (nxt <= target) & _flag(nxt > barrier, F)
    eligible_itself = e_time | rules["e_size"] | e_max_time | rules["e_max_size"]
    time_limited = col("retention_time").isNotNull()
    keep_reason = (
        F.when(col("hold"), _code("KEEP_HOLD"))
        .when(~col("sealed"), _code("KEEP_ACTIVE"))
        .when(wanted, _code("KEEP_BUDGET"))
        .when(held_by_barrier, _code("KEEP_BARRIER"))
        .when(eligible_itself, _code("KEEP_PREFIX"))
        .when(time_limited & (col("max_timestamp") > now_), _code("KEEP_FUTURE_TIMESTAMP"))
        .when(time_limited, _code("KEEP_WITHIN_TIME"))
        .when(col("retention_size").isNotNull(), _code("KEEP_SIZE_TARGET"))
        .otherwise(_code("KEEP_NO_LIMIT"))
    )
    barrier_named = ~col("hold") & col("sealed") & ~wanted & held_by_barrier
    max_ts = col("max_timestamp")
    return with_facts(frame).select(
        *_DECIDED_SNAPSHOT,
        "roll",
        barrier.alias("barrier"),
        cut.alias("cut"),
        wanted.alias("wanted"),
        deleted.alias("deleted"),
        F.when(deleted, delete_reason).otherwise(keep_reason).alias("reason_code"),
        F.when(is_sealed, F.least(max_ts + col("retention_time") + 1, max_ts + col("max_time") + 1)).alias(
            "eligible_at"
        ),
        F.when(
            barrier_named, F.concat(F.lit("group "), col("behind.name"), F.lit(" at "), barrier.cast("string"))
        ).alias("detail"),
        F.when(subscriber & evicting, F.greatest(pos_ttl, size_floor, age_floor)).otherwise(pos_ttl).alias("pos_new"),
        (~rules["expired"] & (over_size | over_age)).alias("over_quota"),
    )


#: snapshot columns that rows carry out of :func:`_decide` (the output and the group
#: rules read them)
_DECIDED_SNAPSHOT = [c for c in _SNAPSHOT_COLUMNS if c != "max_timestamp"]


def _level_three(frame: Any, F: Any, w: Any) -> Any:
    """Over the partition: what the cycle deletes."""
    col = F.col
    return frame.select(
        "*",
        F.max(F.when(col("deleted"), col("next_offset"))).over(w).alias("last_deleted_next"),
        F.min(F.when(col("wanted") & ~col("deleted"), col("base_offset"))).over(w).alias("first_kept_by_budget"),
        F.count(F.when(col("deleted"), True)).over(w).alias("segments_deleted"),
        F.coalesce(F.sum(F.when(col("deleted"), col("size_bytes"))).over(w), F.lit(0)).alias("bytes_deleted"),
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


def _output_columns(rules: dict[str, Any], F: Any) -> list[Any]:
    """What leaves Spark, with the facts: the segment columns on segment rows, the
    group names on group rows, and the packed numbers of partition and group rows:
    the new log start H' and each group's final position and what moved it."""
    col = F.col
    new_start = (
        F.when(col("hold"), col("H"))
        .when(col("message"), F.greatest(col("H"), F.least(col("cut"), col("first_kept_by_budget"))))
        .otherwise(F.greatest(col("H"), F.coalesce(col("last_deleted_next"), col("H"))))
    )
    live = ~rules["expired"]
    pos_eff, pos_ttl, pos_new = rules["pos_eff"], rules["pos_ttl"], col("pos_new")
    new_position = F.when(live, F.greatest(pos_new, new_start)).otherwise(col("position"))
    numbers = {
        "H": col("H"),
        "new_log_start_offset": new_start,
        "T": col("T"),
        "roll": col("roll"),
        "barrier": col("barrier"),
        "segments_deleted": col("segments_deleted"),
        "bytes_deleted": col("bytes_deleted"),
        "position": col("position"),
        "new_position": new_position,
        "expired": rules["expired"],
        "ttl_skipped": F.when(live, pos_ttl - pos_eff).otherwise(0),
        "evicted_skipped": F.when(live, pos_new - pos_ttl).otherwise(0),
        "moved_skipped": F.when(live, new_position - pos_new).otherwise(0),
        "over_quota": col("over_quota"),
        "quota_blocks_producers": col("over_quota") & ~col("evicting"),
    }

    def packed(names: list[str]) -> Any:
        return F.array(*(numbers[n].cast("bigint") for n in names))

    segment = rules["segment"]
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
    frame = frame.append_column("topic", partitions["topic"].take(frame["pid"])).append_column(
        "partition", partitions["partition"].take(frame["pid"])
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
