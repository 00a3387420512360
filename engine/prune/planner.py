"""The planner: docs/RETENTION.md as one Spark SQL query (windows, joins, aggregates).

The snapshot goes in as Parquet files or as Arrow (:mod:`engine.prune.transport`),
the plan comes back as Arrow. Every row of a partition (the partition itself, its
segments, its group positions) is in one relation, so that every per-partition
quantity is a window aggregate attached to each row (see "the planning query"
below). Where Spark can read files of ours, that relation is written as a bucketed
table (:mod:`engine.prune.bucketed`), so Spark reads each partition's rows together
and in order instead of shuffling and sorting them. Per-partition facts (the
instant, extent, record-level time cuts, topic policy) are small: assembled with
Arrow, a row per partition, and joined by broadcast wherever a step reads them. No
Python UDFs; nothing is collected into Python loops: the plan leaves Spark as one
Arrow table, split by row kind.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.prune import bucketed, tables
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot
from engine.prune.transport import TRANSPORTS, Scratch, private_directory, unreadable_by

#: stands for "no limit" where a number is compared (the budget)
UNLIMITED = 1 << 62

#: numeric policy fields the planner reads (null: infinite)
_POLICY_NUMBERS = [
    "segment_roll", "retention_time", "retention_size", "max_time", "max_partition_size",
    "subscription_expiry", "message_ttl", "backlog_size", "backlog_age", "max_deletes_per_cycle",
]  # fmt: skip

#: partitions per topic that the partition key leaves room for (Broker's MAX_PARTITIONS)
_KEY_STRIDE = 10_000

#: per-partition facts (:func:`_spark_inputs`): the planning instant, extent,
#: record-level time cuts (null: none), topic policy (numbers as in the snapshot,
#: choices as flags)
_FACTS = pa.schema(
    [
        ("pid", pa.int64()),
        ("now", pa.int64()),
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
    """Plans cycles on one :class:`SparkEngine`; the snapshot reaches Spark by
    ``transport`` (:mod:`engine.prune.transport`), files going through ``scratch``."""

    def __init__(self, engine: SparkEngine, scratch: Scratch | Path, transport: str = "auto") -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown snapshot transport {transport!r}: expected one of {', '.join(TRANSPORTS)}")
        self.engine = engine
        self.scratch = scratch if isinstance(scratch, Scratch) else Scratch.local(scratch)
        self.transport = transport
        self._lock = threading.Lock()
        #: the session the last plan ran on, and the transport chosen for it
        self._chosen: tuple[Any, str] | None = None

    @property
    def chosen(self) -> str | None:
        """How the last plan's snapshot reached Spark: ``files`` or ``arrow``."""
        return None if self._chosen is None else self._chosen[1]

    def plan(self, snapshot: Snapshot, *, tag: str | None = None) -> Plan:
        """Plan ``snapshot``; ``tag`` names the Spark job for :meth:`cancel`."""
        inputs = _spark_inputs(snapshot.tables, snapshot.now)
        frame = self.engine.run(lambda spark: self._plan(spark, inputs), tag or f"plan-{uuid.uuid4().hex}")
        return Plan(snapshot.now, _split(frame, snapshot.tables, inputs), snapshot.rejected)

    def cancel(self, tag: str) -> None:
        self.engine.cancel(tag)

    def _plan(self, spark: Any, inputs: SparkInputs) -> pa.Table:
        if self._transport_for(spark) == "arrow":
            return _arrow_frame(spark, inputs).toArrow()
        buckets = _buckets(spark)
        with private_directory(self.scratch) as directory:
            _write_inputs(inputs, directory, buckets)
            with _planning_frame(spark, directory, buckets) as frame:
                return frame.toArrow()

    def _transport_for(self, spark: Any) -> str:
        """``files`` or ``arrow`` on ``spark``: as configured, or (``auto``) as found
        once per session: files if Spark reads the scratch directory."""
        with self._lock:
            if self._chosen is not None and self._chosen[0] is spark:
                return self._chosen[1]
        if self.transport != "auto":
            chosen = self.transport
        elif self.engine.reads_local_files and self.scratch.is_local:
            chosen = "files"  # Spark runs on this machine: no probe needed
        else:
            why_not = unreadable_by(spark, self.scratch)
            chosen = "files" if why_not is None else "arrow"
            self.engine.note(
                f"snapshot transport for {self.engine.description}: {chosen}"
                + ("" if why_not is None else f" (Spark cannot read {self.scratch.location}: {why_not})")
            )
        with self._lock:
            self._chosen = (spark, chosen)
        return chosen


#: what Spark reads of the snapshot's segments and positions, keyed by ``pid``
_SEGMENT_INPUT = ["pid", "base_offset", "next_offset", "size_bytes", "first_timestamp", "max_timestamp", "sealed"]
_POSITION_INPUT = ["pid", "gid", "kind", "position", "group_last_commit"]
#: the rows of all kinds as Spark reads them (:func:`_write_inputs`): a column is
#: null on the rows of a kind that does not have it
_ROWS = pa.schema(
    [
        pa.field("pid", pa.int64()),
        pa.field("row", pa.int32()),
        *(tables.SEGMENTS.field(c) for c in _SEGMENT_INPUT[1:]),
        pa.field("gid", pa.int64()),
        *(tables.POSITIONS.field(c) for c in _POSITION_INPUT[2:]),
    ]
)
#: ... with, on segment rows, the bytes of the partition's later segments and the
#: segment's rank in its partition (:func:`_ranked`)
_BUCKETED_ROWS = pa.schema([*_ROWS, pa.field("suffix_after", pa.int64()), pa.field("rn", pa.int64())])
#: how the rows are laid out: a partition's rows in one bucket, in offset order
_ROW_KEY, _ROW_ORDER = "pid", ["pid", "base_offset"]


@dataclass(frozen=True)
class SparkInputs:
    """What Spark reads (:func:`_spark_inputs`), and where its segments came from."""

    #: segment rows (schema :data:`_ROWS`), by ``pid`` then offset
    segments: pa.Table
    #: partition and group rows (schema :data:`_ROWS`)
    others: pa.Table
    #: a row per partition (schema :data:`_FACTS`)
    facts: pa.Table
    #: the snapshot's row of each of ``segments``
    snapshot_row: np.ndarray
    #: the index in ``segments`` of each partition's first segment, by ``pid``
    first_segment: np.ndarray
    #: the snapshot's group names, sorted: a group's ``gid`` is its index here
    group_names: pa.Array

    def snapshot_rows(self, pid: np.ndarray, rn: np.ndarray) -> np.ndarray:
        """The snapshot's row of the segment of rank ``rn`` (from 1) in ``pid``."""
        return self.snapshot_row[self.first_segment[pid] + rn - 1]


def _spark_inputs(snapshot: dict[str, pa.Table], now: int) -> SparkInputs:
    """What Spark reads: the rows of the partitions, segments and positions
    (schema :data:`_ROWS`, tagged by ``row``), keyed by ``pid`` instead of (topic,
    partition), the positions' groups as ``gid``: ``segments`` in offset order and
    ``others`` (the partition and group rows), laid out by :func:`_write_inputs`;
    and ``facts``: a row per partition with the planning instant, its extent, its
    record-level time cut of each kind and its topic's policy.

    A segment's plan row names it by ``pid`` and rank, which
    :meth:`SparkInputs.snapshot_rows` turns back into its snapshot row: its
    offsets, size and names do not go through Spark and back.

    ``pid`` is the partition's row in the partitions table. Spark then buckets and
    windows on an integer instead of comparing topic names on every row; being
    consecutive, the keys make each broadcast join on ``pid`` a lookup in a dense
    array rather than a hash table, and the plan's rows find their topic and
    partition by position. ``gid`` is the group name's rank among the snapshot's
    group names (:func:`_group_names`): it orders groups as their names do, and is
    all of a group that Spark carries (a string would be copied with every row of
    the partition by each window). The facts are assembled here, by position too,
    because Spark would rebuild them (a pivot, two joins, three broadcasts) in every
    plan.

    The planning instant ``now`` is a fact too, not a literal: Spark compiles the
    generated code of each query stage once per distinct source text, and a literal
    ``now`` would make that text, and the compilation, new in every cycle."""
    topics = snapshot["topics"]

    def key(table: pa.Table) -> pa.Array:
        topic_index = pc.cast(pc.index_in(table["topic"], value_set=topics["topic"]), pa.int64())
        return pc.add(pc.multiply(topic_index, _KEY_STRIDE), pc.cast(table["partition"], pa.int64()))

    partition_keys = key(snapshot["partitions"])

    def keyed(table: pa.Table) -> pa.Table:
        pid = pc.index_in(key(table), value_set=partition_keys, skip_nulls=True)
        return table.append_column("pid", pc.cast(pid, pa.int64()))

    partitions = keyed(snapshot["partitions"])
    positions = snapshot["positions"]
    group_names = _group_names(positions)
    gid = pc.cast(pc.index_in(positions["group"], value_set=group_names), pa.int64())
    facts = _facts(snapshot["topics"], partitions, keyed(snapshot["time_cuts"]), now)
    segments = _rows_of(SEGMENT_ROW, keyed(snapshot["segments"]).select(_SEGMENT_INPUT))
    snapshot_row = np.arange(segments.num_rows)
    if not _in_offset_order(segments):
        # The snapshot reads them in this order; anything else pays for a sort.
        snapshot_row = pc.sort_indices(
            segments, sort_keys=[("pid", "ascending"), ("base_offset", "ascending")]
        ).to_numpy()
        segments = segments.take(snapshot_row)
    others = pa.concat_tables(
        [
            _rows_of(PARTITION_ROW, facts.select(["pid"])),
            _rows_of(GROUP_ROW, keyed(positions).append_column("gid", gid).select(_POSITION_INPUT)),
        ]
    )
    first_segment = np.searchsorted(segments["pid"].to_numpy(), np.arange(partitions.num_rows), side="left")
    return SparkInputs(segments, others, facts, snapshot_row, first_segment, group_names)


def _in_offset_order(segments: pa.Table) -> bool:
    """Whether ``segments`` are by ``pid``, then ``base_offset``."""
    pid, base = segments["pid"].to_numpy(), segments["base_offset"].to_numpy()
    return bool(np.all((pid[1:] > pid[:-1]) | ((pid[1:] == pid[:-1]) & (base[1:] > base[:-1]))))


def _rows_of(kind: int, table: pa.Table) -> pa.Table:
    """``table``'s rows as rows of ``kind`` (schema :data:`_ROWS`)."""
    columns = {field.name: pa.nulls(table.num_rows, field.type) for field in _ROWS}
    columns.update({name: table[name] for name in table.column_names})
    columns["row"] = pa.repeat(pa.scalar(kind, pa.int32()), table.num_rows)
    return pa.table(columns, schema=_ROWS)


def _buckets(spark: Any) -> int:
    """How many buckets the rows are spread over: the session's shuffle partitions,
    the parallelism its operator chose for the shuffle that bucketing replaces."""
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


def _write_inputs(inputs: SparkInputs, directory: Scratch, buckets: int) -> None:
    """Write :func:`_spark_inputs` into ``directory``: the rows as a bucketed
    table's files in ``rows/``, ranked; the facts as ``facts.parquet``."""
    rows, of_bucket = _laid_out(inputs.others, inputs.segments, buckets)
    files, facts = directory.child("rows"), directory.child("facts.parquet")
    bucketed.write(files.filesystem, files.path, buckets, lambda bucket: _ranked(rows.take(of_bucket[bucket])))
    pq.write_table(inputs.facts, facts.path, filesystem=facts.filesystem, compression="none", use_dictionary=False)


def _laid_out(others: pa.Table, segments: pa.Table, buckets: int) -> tuple[pa.Table, list[np.ndarray]]:
    """All rows, and for each bucket the indices of its rows in the order the
    bucketed table declares (:data:`_ROW_ORDER`, nulls first): each partition's
    other rows (no base offset) just before its segments, which are in offset order.

    Merged and grouped by index arithmetic, each bucket then taken once: a sort of
    the million rows by three keys cost three times as much."""
    others = others.take(pc.sort_indices(others["pid"]))
    before = np.searchsorted(segments["pid"].to_numpy(), others["pid"].to_numpy(), side="left")
    at = before + np.arange(others.num_rows)  # where each other row goes
    merged = np.empty(others.num_rows + segments.num_rows, dtype=np.int64)  # index into others + segments
    is_other = np.zeros(len(merged), dtype=bool)
    is_other[at] = True
    merged[at] = np.arange(others.num_rows)
    merged[~is_other] = others.num_rows + np.arange(segments.num_rows)
    both = pa.concat_tables([others, segments])
    return both, [merged[rows] for rows in bucketed.rows_by_bucket(both["pid"].to_numpy()[merged], buckets)]


def _ranked(rows: pa.Table) -> pa.Table:
    """``rows``, each partition's together and in offset order, with each segment's
    ``suffix_after`` (the bytes of the partition's later segments) and ``rn`` (its
    rank in the partition, from 1); null on other rows.

    Running sums over an ordered table are one pass here; on Spark they were a
    window level of their own, copying every row of the plan once more."""
    if rows.num_rows == 0:  # a bucket no partition fell in
        return rows.append_column("suffix_after", pa.nulls(0, pa.int64())).append_column("rn", pa.nulls(0, pa.int64()))
    pid = rows["pid"].to_numpy()
    segment = pc.equal(rows["row"], SEGMENT_ROW).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.concatenate([[True], pid[1:] != pid[:-1]]))
    partition = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pid))))
    bytes_through = np.cumsum(rows["size_bytes"].fill_null(0).to_numpy())
    last = np.append(starts[1:], len(pid)) - 1
    segments_through = np.cumsum(segment)
    segments_before = (segments_through - segment)[starts]
    others = ~segment
    return rows.append_column(
        "suffix_after", pa.array(bytes_through[last][partition] - bytes_through, mask=others)
    ).append_column("rn", pa.array(segments_through - segments_before[partition], mask=others))


def _group_names(positions: pa.Table) -> pa.Array:
    """The distinct group names of ``positions``, sorted: a group's ``gid`` is its
    index here."""
    names = pc.unique(positions["group"])
    return names.take(pc.array_sort_indices(names))


def _facts(topics: pa.Table, partitions: pa.Table, cuts: pa.Table, now: int) -> pa.Table:
    """The ``facts`` table (schema :data:`_FACTS`) of :func:`_spark_inputs`; a
    partition of a topic the snapshot does not hold has none."""
    topic = pc.index_in(partitions["topic"], value_set=topics["topic"])
    partitions = partitions.filter(pc.is_valid(topic))
    policy = topics.take(topic.drop_null())
    columns = {
        "pid": partitions["pid"],
        "now": pa.repeat(pa.scalar(now, pa.int64()), partitions.num_rows),
        "H": partitions["log_start_offset"],
        "T": partitions["next_offset"],
    }
    for kind in tables.TIME_CUT_KINDS:
        of_kind = cuts.filter(pc.equal(cuts["kind"], kind)).group_by("pid").aggregate([("offset", "min")])
        columns[f"tc_{kind}"] = of_kind["offset_min"].take(pc.index_in(partitions["pid"], value_set=of_kind["pid"]))
    columns.update({name: policy[name] for name in (*_POLICY_NUMBERS, "hold")})
    columns["message"] = pc.equal(policy["granularity"], "message")
    columns["protect"] = pc.equal(policy["consumption"], "protect")
    columns["evicting"] = pc.equal(policy["backlog_policy"], "consumer_backlog_eviction")
    return pa.table(columns, schema=_FACTS)


@contextmanager
def _planning_frame(spark: Any, directory: Scratch, buckets: int) -> Iterator[Any]:
    """The plan as one DataFrame: :data:`PLAN_QUERY` over the files of
    :func:`_write_inputs`, while the context lasts."""
    rows_location = directory.child("rows").location
    with bucketed.registered(spark, rows_location, _BUCKETED_ROWS, _ROW_KEY, _ROW_ORDER, buckets) as rows:
        # The schema given spares the reader a schema-inference job.
        facts = spark.read.schema(bucketed.ddl(_FACTS)).parquet(directory.child("facts.parquet").location)
        yield _planning_query(spark, rows, facts)


def _arrow_frame(spark: Any, inputs: SparkInputs) -> Any:
    """The plan as one DataFrame: :data:`PLAN_QUERY` over :func:`_spark_inputs` sent
    as Arrow through the session. The rows are those of the files (ranked, in the
    files' order), in one piece: Spark shuffles and sorts them by partition itself."""
    rows, (order,) = _laid_out(inputs.others, inputs.segments, 1)
    return _planning_query(spark, spark.createDataFrame(_ranked(rows.take(order))), spark.createDataFrame(inputs.facts))


def _planning_query(spark: Any, rows: Any, facts: Any) -> Any:
    """:data:`PLAN_QUERY` over the DataFrames ``rows`` (:data:`_BUCKETED_ROWS`) and
    ``facts`` (:data:`_FACTS`)."""
    return spark.sql(PLAN_QUERY, rows=rows, facts=facts)


# -- the planning query --------------------------------------------------------------
#
# The plan is one SQL query, written once: Spark parses and analyses it in one call,
# where the DataFrame API would cost a round trip to the JVM per column expression
# (thousands per plan). Every row of a partition (the partition itself, its
# segments, its group positions) is in one relation, tagged by ``row``, so that every
# per-partition quantity (prefixes, barrier, cut, new log start) is a window
# aggregate over ``pid`` attached to each row: no shuffle (the rows are bucketed by
# ``pid``), no sort (each bucket is in order), no joins back. Rows stay narrow: a
# window operator copies every column of every row it passes, so the per-partition
# facts never go through one; they are joined by broadcast (which keeps the
# partitioning) before each step that reads them, and what a rule derives from them
# is evaluated where it is needed. Two levels of window aggregates, the second
# depending on the first: the furthest-behind subscriber and the prefixes; what is
# deleted. The running sizes and ranks a third level would compute come with the rows.


def _names(columns: list[str]) -> str:
    return ", ".join(f"`{c}`" for c in columns)


def _flag(condition: str) -> str:
    """A rule with an infinite limit compares with null: never true."""
    return f"coalesce({condition}, false)"


#: the facts' columns after the pid, in the order they are packed
_FACT_FIELDS = [field for field in _FACTS if field.name != "pid"]


def _with_facts(source: str) -> str:
    """``source`` with the per-partition facts as columns, by a broadcast join on
    ``pid``.

    The facts travel packed in one array (``packed``), so that every join
    broadcasts the very same relation and Spark reads and broadcasts it once: with
    separate columns it prunes each join's side to the facts that step reads, and
    then reads and broadcasts them once per join."""
    unpacked = ", ".join(
        f"CAST(f.facts[{i}] AS {bucketed.SQL_TYPES[field.type]}) AS `{field.name}`"
        for i, field in enumerate(_FACT_FIELDS)
    )
    return f"(SELECT /*+ BROADCAST(f) */ s.*, {unpacked} FROM {source} s JOIN packed f ON s.pid = f.pid)"


#: the snapshot's columns the query reads of its rows (each null on the row kinds
#: that do not have it)
_SNAPSHOT_COLUMNS = [
    "pid", "row", "base_offset", "next_offset", "size_bytes", "max_timestamp", "sealed",
    "gid", "kind", "position", "group_last_commit",
]  # fmt: skip


#: What a row is, and a segment's own eligibility (and whether its timestamps are
#: in the future), are computed once, before level one, where the columns they read
#: are at hand, and carried as the bits of one number, ``flags``: every later step
#: tests bits instead of evaluating those rules again (the largest generated stage
#: is a fifth smaller), and the columns they read (the row kind, timestamps, sizes
#: after, the group's kind and last commit) go through no window: a window copies
#: every column of every row, and four fewer columns make level one a seventh
#: cheaper (docs/SPARK_NOTES.md).
_FLAG_BITS = {
    "segment": 1, "group": 2, "is_sealed": 4, "subscriber": 8, "expired": 16,
    "e_time": 32, "e_size": 64, "e_max_time": 128, "e_max_size": 256, "future": 512,
}  # fmt: skip
#: the bytes of a segment and the partition's later ones
_SUFFIX_FROM = "(suffix_after + size_bytes)"


def _marks() -> dict[str, str]:
    """The rules of :data:`_FLAG_BITS` over the snapshot's columns and the facts."""
    segment = f"(`row` = {SEGMENT_ROW})"
    sealed = _flag(f"{segment} AND sealed")
    # Each rule names its function in tests/reference/model.py and its section of
    # docs/RETENTION.md.
    return {
        "segment": segment,
        "group": f"(`row` = {GROUP_ROW})",
        "is_sealed": sealed,
        "subscriber": _flag(f"`row` = {GROUP_ROW} AND kind = 'subscriber'"),  # GroupState.is_subscriber
        # is_group_expired; "Per topic, before the cut" 1
        "expired": _flag("now - group_last_commit > subscription_expiry"),
        # e_time, e_size, e_max_time, e_max_size; "Per partition, the cut", eligibility table
        "e_time": _flag(f"{sealed} AND max_timestamp < now - retention_time"),
        "e_size": _flag(f"{sealed} AND suffix_after >= retention_size"),
        "e_max_time": _flag(f"{sealed} AND max_timestamp < now - max_time"),
        "e_max_size": _flag(f"{sealed} AND {_SUFFIX_FROM} > max_partition_size"),
        # keep_reason's KEEP_FUTURE_TIMESTAMP; "Decision and reason per segment"
        "future": _flag("retention_time IS NOT NULL AND max_timestamp > now"),
    }


def _rules(marked: bool) -> dict[str, str]:
    """The row-level rules of docs/RETENTION.md as SQL expressions, by name: those
    of :data:`_FLAG_BITS` over the snapshot's columns (before ``flags`` is
    computed) or as bits of ``flags`` (``marked``: after), and the others.

    They read snapshot columns, per-partition facts and window values of earlier
    levels by name: each step evaluates the ones it needs on its own rows rather
    than carrying their results (or the facts) through the windows."""
    rules = {name: f"((flags & {bit}) <> 0)" for name, bit in _FLAG_BITS.items()} if marked else _marks()
    subscriber, expired = rules["subscriber"], rules["expired"]
    pos_eff = "greatest(`position`, H)"
    return {
        **rules,
        "pos_eff": pos_eff,  # pos_eff; "Inputs"
        # pos_after_ttl; "Per topic, before the cut" 2
        "pos_ttl": f"(CASE WHEN {subscriber} AND message_ttl IS NOT NULL"
        f" THEN greatest({pos_eff}, tc_ttl) ELSE {pos_eff} END)",
        # barrier's candidates; "Per partition, the cut", Barrier
        "holding": f"({subscriber} AND NOT {expired} AND protect)",
        "roll": _flag("now - active_first_ts >= segment_roll"),  # idle_roll; "Per topic, before the cut" 4
        "live": _flag(f"{rules['segment']} AND next_offset > H"),  # first_not's candidates
    }


#: level one's prefixes: name -> the eligibility rules it is the ``first_not`` of
_FIRST_NOT = {
    "fn_target": ("e_time", "e_size"),
    "fn_size": ("e_size",),
    "fn_hard": ("e_max_time", "e_max_size"),
    "fn_max_size": ("e_max_size",),
}
#: what rows carry into level one (running sizes and ranks come with the rows)
_RANKED = [*_SNAPSHOT_COLUMNS, "suffix_after", "rn"]
#: what rows carry through level one: what ``flags`` stands for stays behind
_LEVEL_ONE_CARRIED = [
    "pid",
    "base_offset",
    "next_offset",
    "size_bytes",
    "gid",
    "position",
    "rn",
    "flags",
    "eligible_at",
]


def _level_one() -> str:
    """Over the partition: the subscriber furthest behind (after TTL), the active
    segment's first timestamp, the first live segment outside each prefix and the
    first segment that fits the backlog size quota (before their bounds, see
    :func:`_decide`); per row its ``flags`` and ``eligible_at`` (:data:`_FLAG_BITS`).

    One window operator, over the partition without an order: the running sizes
    it would need one for are in the rows already. Of the subscribers at the
    lowest position, the one first by name is named as the barrier."""
    rules = _rules(marked=False)

    def outside(eligibility: tuple[str, ...]) -> str:
        eligible = " OR ".join(rules[name] for name in eligibility)
        return f"CASE WHEN {rules['live']} AND NOT ({eligible}) THEN base_offset END"

    holding = f"CASE WHEN {rules['holding']} THEN named_struct('pos', {rules['pos_ttl']}, 'gid', gid) END"
    fits_quota = f"CASE WHEN {rules['segment']} AND {_SUFFIX_FROM} <= backlog_size THEN base_offset END"
    flags = " + ".join(f"CASE WHEN {rules[name]} THEN {bit} ELSE 0 END" for name, bit in _FLAG_BITS.items())
    inputs = ", ".join(
        [
            _names([*_RANKED, "active_first_ts"]),
            f"{flags} AS flags",
            f"CASE WHEN {rules['is_sealed']}"
            " THEN least(max_timestamp + retention_time + 1, max_timestamp + max_time + 1) END"
            " AS eligible_at",
            f"{holding} AS holding",
            *(f"{outside(eligibility)} AS {name}" for name, eligibility in _FIRST_NOT.items()),
            f"{fits_quota} AS fits_quota",
        ]
    )
    minima = ", ".join(f"min({name}) OVER whole AS {name}" for name in (*_FIRST_NOT, "fits_quota"))
    return f"""SELECT {_names(_LEVEL_ONE_CARRIED)},
    min(holding) OVER whole AS behind,
    max(active_first_ts) OVER whole AS active_first_ts,
    {minima}
  FROM (SELECT {inputs} FROM {_with_facts("rows")})
  WINDOW whole AS (PARTITION BY pid)"""


#: what rows carry out of :func:`_decide` (the output and the group rules read them)
_DECIDED_CARRIED = ["pid", "gid", "position", "rn", "flags", "eligible_at"]


def _decide() -> str:
    """Per row, with the facts: the quota, eviction, barrier (and its group),
    target, hard cut and cut; per segment decision, reason and eligibility time
    (RETENTION.md tables); per group row its position after eviction and its quota
    state.

    Three projections, each naming what the next reads; Spark merges them into one
    operator."""
    rules = _rules(marked=True)
    subscriber, pos_ttl = rules["subscriber"], rules["pos_ttl"]

    def first_not(name: str) -> str:
        return f"greatest(H, coalesce({name}, T))"

    def record_cut(kind: str, limit: str) -> str:
        return f"CASE WHEN {limit} IS NOT NULL THEN tc_{kind} ELSE H END"

    size_evict_cut = "coalesce(fits_quota, T)"
    size_floor = f"CASE WHEN backlog_size IS NOT NULL THEN {size_evict_cut} END"
    age_floor = "CASE WHEN backlog_age IS NOT NULL THEN tc_backlog_age END"
    over_size = _flag(f"{subscriber} AND backlog_size IS NOT NULL AND {pos_ttl} < {size_evict_cut}")
    over_age = _flag(f"{subscriber} AND {pos_ttl} < tc_backlog_age")
    # Eviction lifts every subscriber of the partition to the same floor, so the
    # lowest position after eviction is the lowest after TTL, lifted to that floor.
    # barrier (size_evict_cut, pos_after_eviction), then the_cut's target and hard;
    # RETENTION.md "Per topic, before the cut" 3 and "Per partition, the cut".
    limits = f"""SELECT *,
    CASE WHEN behind.pos IS NOT NULL AND evicting THEN greatest(behind.pos, {size_floor}, {age_floor})
      ELSE behind.pos END AS barrier,
    CASE WHEN message THEN greatest({record_cut("retention", "retention_time")}, {first_not("fn_size")})
      ELSE {first_not("fn_target")} END AS target,
    CASE WHEN message THEN greatest({record_cut("max_time", "max_time")}, {first_not("fn_max_size")})
      ELSE {first_not("fn_hard")} END AS hard
  FROM {_with_facts("level_one")}"""
    # the_cut: cut = min(T, max(H, hard, min(target, barrier)))
    cuts = "SELECT *, least(T, greatest(H, hard, least(target, barrier))) AS cut FROM limits"
    # plan_partition's wanted and deleted (within_budget); "Per partition, the cut"
    wanted = _flag(f"{rules['is_sealed']} AND NOT hold AND next_offset <= cut")
    within_budget = _flag(f"rn <= coalesce(max_deletes_per_cycle, {UNLIMITED})")
    chosen = f"SELECT *, {wanted} AS wanted, {wanted} AND {within_budget} AS deleted FROM cuts"

    by_target = "next_offset <= least(target, barrier)"
    time_rule = f"CASE WHEN message THEN {_flag('next_offset <= tc_retention')} ELSE {rules['e_time']} END"
    max_time_rule = f"CASE WHEN message THEN {_flag('next_offset <= tc_max_time')} ELSE {rules['e_max_time']} END"
    # delete_reason and keep_reason; "Decision and reason per segment"
    delete_reason = f"""CASE WHEN next_offset <= H THEN {_code("DELETE_BELOW_LOG_START")}
      WHEN {by_target} AND {time_rule} THEN {_code("DELETE_TIME")}
      WHEN {by_target} THEN {_code("DELETE_SIZE")}
      WHEN {max_time_rule} THEN {_code("DELETE_MAX_TIME")}
      ELSE {_code("DELETE_MAX_SIZE")} END"""
    held_by_barrier = f"(next_offset <= target AND {_flag('next_offset > barrier')})"
    eligible_itself = " OR ".join(rules[name] for name in ("e_time", "e_size", "e_max_time", "e_max_size"))
    keep_reason = f"""CASE WHEN hold THEN {_code("KEEP_HOLD")}
      WHEN NOT {rules["is_sealed"]} THEN {_code("KEEP_ACTIVE")}
      WHEN wanted THEN {_code("KEEP_BUDGET")}
      WHEN {held_by_barrier} THEN {_code("KEEP_BARRIER")}
      WHEN {eligible_itself} THEN {_code("KEEP_PREFIX")}
      WHEN {rules["future"]} THEN {_code("KEEP_FUTURE_TIMESTAMP")}
      WHEN retention_time IS NOT NULL THEN {_code("KEEP_WITHIN_TIME")}
      WHEN retention_size IS NOT NULL THEN {_code("KEEP_SIZE_TARGET")}
      ELSE {_code("KEEP_NO_LIMIT")} END"""
    # pos_after_eviction and backlog's over_quota; "Per topic, before the cut" 3
    evicted = (
        f"CASE WHEN {subscriber} AND evicting THEN greatest({pos_ttl}, {size_floor}, {age_floor}) ELSE {pos_ttl} END"
    )
    decided = f"""SELECT {_names(_DECIDED_CARRIED)}, {rules["roll"]} AS roll, barrier, behind.gid AS barrier_group,
    cut, wanted, deleted, base_offset, next_offset, size_bytes,
    CASE WHEN deleted THEN {delete_reason} ELSE {keep_reason} END AS reason_code,
    {evicted} AS pos_new,
    NOT {rules["expired"]} AND ({over_size} OR {over_age}) AS over_quota
  FROM chosen"""
    return f"limits AS ({limits}),\ncuts AS ({cuts}),\nchosen AS ({chosen}),\ndecided AS ({decided})"


def _level_two() -> str:
    """Over the partition: what the cycle deletes."""
    return """SELECT *,
    max(CASE WHEN deleted THEN next_offset END) OVER whole AS last_deleted_next,
    min(CASE WHEN wanted AND NOT deleted THEN base_offset END) OVER whole AS first_kept_by_budget,
    count(CASE WHEN deleted THEN true END) OVER whole AS segments_deleted,
    coalesce(sum(CASE WHEN deleted THEN size_bytes END) OVER whole, 0) AS bytes_deleted
  FROM decided
  WINDOW whole AS (PARTITION BY pid)"""


# What leaves Spark is what Spark decided, and as narrow as it can be: the Arrow
# conversion and collect of a million rows cost as much as both window levels, in
# proportion to the columns. A segment row carries its rank and its decision; the
# rest of its plan row is the snapshot's (:meth:`SparkInputs.snapshot_rows`), its
# decision and detail follow from its reason. The numbers of partition rows and of
# group rows travel packed in one array column: a null array costs a segment row 4
# bytes, where a dozen null columns would cost 100.
_PARTITION_NUMBERS = [
    "H", "new_log_start_offset", "T", "roll", "barrier", "barrier_group", "segments_deleted", "bytes_deleted",
]  # fmt: skip
_GROUP_NUMBERS = [
    "gid", "subscriber", "position", "new_position", "expired", "ttl_skipped", "evicted_skipped", "moved_skipped",
    "over_quota", "quota_blocks_producers",
]  # fmt: skip


def _output() -> str:
    """What leaves Spark, with the facts: on segment rows the rank, reason and
    eligibility time; the packed numbers of partition and group rows: the new log
    start H' and each group's final position and what moved it."""
    rules = _rules(marked=True)
    # new_log_start; "Per partition, the cut", New log start
    new_start = """CASE WHEN hold THEN H
      WHEN message THEN greatest(H, least(cut, first_kept_by_budget))
      ELSE greatest(H, coalesce(last_deleted_next, H)) END"""
    live = f"NOT {rules['expired']}"
    final = f"""SELECT *, {new_start} AS new_log_start_offset FROM {_with_facts("level_two")}"""
    new_position = f"CASE WHEN {live} THEN greatest(pos_new, new_log_start_offset) ELSE `position` END"
    numbers = {
        **{name: f"`{name}`" for name in (*_PARTITION_NUMBERS, "gid", "position", "over_quota")},
        "subscriber": rules["subscriber"],
        "new_position": new_position,
        "expired": rules["expired"],
        "ttl_skipped": f"CASE WHEN {live} THEN {rules['pos_ttl']} - {rules['pos_eff']} ELSE 0 END",
        "evicted_skipped": f"CASE WHEN {live} THEN pos_new - {rules['pos_ttl']} ELSE 0 END",
        "moved_skipped": f"CASE WHEN {live} THEN {new_position} - pos_new ELSE 0 END",
        "quota_blocks_producers": "over_quota AND NOT evicting",
    }

    def packed(names: list[str]) -> str:
        return "array(" + ", ".join(f"CAST({numbers[n]} AS BIGINT)" for n in names) + ")"

    segment, group = rules["segment"], rules["group"]
    columns = [
        f"CAST(CASE WHEN {segment} THEN {SEGMENT_ROW} WHEN {group} THEN {GROUP_ROW}"
        f" ELSE {PARTITION_ROW} END AS TINYINT)"
        " AS `row`",
        "CAST(pid AS INT) AS pid",
        f"CAST(CASE WHEN {segment} THEN rn END AS INT) AS rn",
        f"CAST(CASE WHEN {segment} THEN reason_code END AS TINYINT) AS reason_code",
        f"CASE WHEN {segment} THEN eligible_at END AS eligible_at",
        f"""CASE WHEN {group} THEN {packed(_GROUP_NUMBERS)}
      WHEN NOT {segment} THEN {packed(_PARTITION_NUMBERS)} END AS numbers""",
    ]
    return f"final AS ({final})\nSELECT {', '.join(columns)} FROM final"


def _plan_query() -> str:
    """The planning query over the inputs ``{rows}`` (:data:`_BUCKETED_ROWS`) and
    ``{facts}`` (:data:`_FACTS`); ``SparkSession.sql`` puts them in. Of the
    segments' first timestamps only the active segment's is read (idle roll)."""
    packed = "array(" + ", ".join(f"CAST(`{field.name}` AS BIGINT)" for field in _FACT_FIELDS) + ")"
    active_first_ts = f"CASE WHEN {_marks()['segment']} AND NOT sealed AND size_bytes > 0 THEN first_timestamp END"
    return f"""WITH
packed AS (SELECT pid, {packed} AS facts FROM {{facts}}),
rows AS (SELECT {_names(_RANKED)}, {active_first_ts} AS active_first_ts FROM {{rows}}),
level_one AS ({_level_one()}),
{_decide()},
level_two AS ({_level_two()}),
{_output()}"""


#: the planning query; the same text every plan, so Spark's compiled code is reused
PLAN_QUERY = _plan_query()


#: a segment's decision, by its reason code
_DECISIONS = pa.array(["delete" if reason.startswith("DELETE_") else "keep" for reason in REASONS])


def _split(frame: pa.Table, snapshot: dict[str, pa.Table], inputs: SparkInputs) -> dict[str, pa.Table]:
    """The plan tables from the planning frame's rows, by row kind: the topic and
    partition of each row's key put back, a segment's snapshot columns by its rank,
    the group names of their ids, and the detail of segments held back by a group:
    "group G at P"."""
    partitions, names = snapshot["partitions"], inputs.group_names

    def rows(kind: int, columns: list[str], numbers: list[str]) -> pa.Table:
        # Only the kind's own columns are filtered: the others are null on its rows.
        part = frame.select(["pid", *columns]).filter(pc.equal(frame["row"], kind))
        part = part.append_column("topic", partitions["topic"].take(part["pid"]))
        part = part.append_column("partition", partitions["partition"].take(part["pid"]))
        for i, name in enumerate(numbers):
            part = part.append_column(name, pc.list_element(part["numbers"], i))
        return part

    partition_rows = rows(PARTITION_ROW, ["numbers"], _PARTITION_NUMBERS)
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
    held = pc.equal(decided["reason_code"], _code("KEEP_BARRIER"))
    of_partition = pc.index_in(decided["pid"], value_set=partition_rows["pid"])
    segments = (
        snapshot["segments"]
        .take(inputs.snapshot_rows(decided["pid"].to_numpy(), decided["rn"].to_numpy()))
        .append_column("reason", pa.array(REASONS).take(decided["reason_code"]))
        .append_column("decision", _DECISIONS.take(decided["reason_code"]))
        .append_column("eligible_at", decided["eligible_at"])
        .append_column("detail", barrier_detail.take(pc.if_else(held, of_partition, None)))
    )
    groups = rows(GROUP_ROW, ["numbers"], _GROUP_NUMBERS)
    groups = groups.append_column("group", names.take(groups["gid"]))
    groups = groups.append_column("kind", pc.if_else(pc.cast(groups["subscriber"], pa.bool_()), "subscriber", "reader"))
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
