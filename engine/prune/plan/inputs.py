"""The planner's input: the snapshot as the rows and facts Spark reads.

Every row of a partition (the partition itself, its segments, its group positions)
is in one relation, so that every per-partition quantity is a window aggregate
attached to each row (:mod:`~engine.prune.plan.query`). Where Spark can read files
of ours, that relation is written as a bucketed table (:mod:`engine.prune.bucketed`),
so Spark reads each partition's rows together and in order instead of shuffling and
sorting them; elsewhere it is sent as Arrow. Per-partition facts (the instant,
extent, record-level time cuts, topic policy) are small: assembled with Arrow, a
row per partition (:data:`~engine.prune.plan.layout.FACTS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.prune import bucketed, tables
from engine.prune.plan.layout import FACTS, GROUP_ROW, PARTITION_ROW, POLICY_NUMBERS, SEGMENT_ROW
from engine.prune.transport import Scratch

#: partitions per topic that the partition key leaves room for (Broker's MAX_PARTITIONS)
_KEY_STRIDE = 10_000

#: what Spark reads of the snapshot's segments and positions, keyed by ``pid``
_SEGMENT_INPUT = ["pid", "base_offset", "next_offset", "size_bytes", "first_timestamp", "max_timestamp", "sealed"]
_POSITION_INPUT = ["pid", "gid", "kind", "position", "group_last_commit"]
#: the rows of all kinds as Spark reads them (:func:`write_inputs`): a column is
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
BUCKETED_ROWS = pa.schema([*_ROWS, pa.field("suffix_after", pa.int64()), pa.field("rn", pa.int64())])
#: how the rows are laid out: a partition's rows in one bucket, in offset order
ROW_KEY, ROW_ORDER = "pid", ["pid", "base_offset"]


@dataclass(frozen=True)
class SparkInputs:
    """What Spark reads (:func:`spark_inputs`), and where its segments came from."""

    #: segment rows (schema :data:`_ROWS`), by ``pid`` then offset
    segments: pa.Table
    #: partition and group rows (schema :data:`_ROWS`)
    others: pa.Table
    #: a row per partition (schema :data:`FACTS`)
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


def spark_inputs(snapshot: dict[str, pa.Table], now: int) -> SparkInputs:
    """What Spark reads: the rows of the partitions, segments and positions
    (schema :data:`_ROWS`, tagged by ``row``), keyed by ``pid`` instead of (topic,
    partition), the positions' groups as ``gid``: ``segments`` in offset order and
    ``others`` (the partition and group rows), laid out by :func:`write_inputs`;
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


def buckets_of(spark: Any) -> int:
    """How many buckets the rows are spread over: the session's shuffle partitions,
    the parallelism its operator chose for the shuffle that bucketing replaces."""
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


def write_inputs(inputs: SparkInputs, directory: Scratch, buckets: int) -> None:
    """Write :func:`spark_inputs` into ``directory``: the rows as a bucketed
    table's files in ``rows/``, ranked; the facts as ``facts.parquet``."""
    rows, of_bucket = _laid_out(inputs.others, inputs.segments, buckets)
    files, facts = directory.child("rows"), directory.child("facts.parquet")
    bucketed.write(files.filesystem, files.path, buckets, lambda bucket: _ranked(rows.take(of_bucket[bucket])))
    pq.write_table(inputs.facts, facts.path, filesystem=facts.filesystem, compression="none", use_dictionary=False)


def _laid_out(others: pa.Table, segments: pa.Table, buckets: int) -> tuple[pa.Table, list[np.ndarray]]:
    """All rows, and for each bucket the indices of its rows in the order the
    bucketed table declares (:data:`ROW_ORDER`, nulls first): each partition's
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
    """The ``facts`` table (schema :data:`FACTS`) of :func:`spark_inputs`; a
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
    columns.update({name: policy[name] for name in (*POLICY_NUMBERS, "hold")})
    columns["message"] = pc.equal(policy["granularity"], "message")
    columns["protect"] = pc.equal(policy["consumption"], "protect")
    columns["evicting"] = pc.equal(policy["backlog_policy"], "consumer_backlog_eviction")
    return pa.table(columns, schema=FACTS)


@contextmanager
def read_files(spark: Any, directory: Scratch, buckets: int) -> Iterator[tuple[Any, Any]]:
    """The DataFrames ``rows`` (:data:`BUCKETED_ROWS`) and ``facts`` (:data:`FACTS`)
    of the files of :func:`write_inputs`, while the context lasts."""
    rows_location = directory.child("rows").location
    with bucketed.registered(spark, rows_location, BUCKETED_ROWS, ROW_KEY, ROW_ORDER, buckets) as rows:
        # The schema given spares the reader a schema-inference job.
        yield rows, spark.read.schema(bucketed.ddl(FACTS)).parquet(directory.child("facts.parquet").location)


def sent_as_arrow(spark: Any, inputs: SparkInputs) -> tuple[Any, Any]:
    """The DataFrames ``rows`` (:data:`BUCKETED_ROWS`) and ``facts`` (:data:`FACTS`)
    of ``inputs``, sent as Arrow through the session. The rows are those of the
    files (ranked, in the files' order), in one piece: Spark shuffles and sorts them
    by partition itself."""
    rows, (order,) = _laid_out(inputs.others, inputs.segments, 1)
    return spark.createDataFrame(_ranked(rows.take(order))), spark.createDataFrame(inputs.facts)
