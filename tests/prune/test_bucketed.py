"""The planner's rows as a bucketed table (engine/prune/bucketed.py).

Spark reads the table without a shuffle or a sort only because the files keep two
claims: every key's rows in the file of its bucket, by Spark's own hash, and every
file in the declared order. A broken claim would not fail: it would split a
partition between two tasks, and plan it wrong. So the hash is held against
Spark's, the layout against its definition, and the planner's physical plan is
checked to read the table as a bucketed scan (end-to-end correctness is the
property test's, tests/prune/test_planner_property.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from engine.broker import Broker
from engine.prune import bucketed
from engine.prune.plan import query
from engine.prune.plan.inputs import SparkInputs, read_files, spark_inputs, write_inputs
from engine.prune.plan.layout import SEGMENT_ROW
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.prune.snapshot import build_snapshot
from engine.prune.transport import Scratch, private_directory
from tests.support.seed_scenarios import MIN, T0, write

LOCAL = pafs.LocalFileSystem()

KEYS = np.array(
    [*range(-300, 3000), 2**31 - 1, 2**31, -(2**31), 2**32 + 7, 2**40 + 3, 2**62, 2**63 - 1, -(2**63)], dtype=np.int64
)


@pytest.mark.parametrize("buckets", [1, 2, 4, 7, 200])
def test_bucket_of_is_sparks_pmod_of_hash(spark_engine: SparkEngine, buckets: int) -> None:
    spark = spark_engine.session()
    frame = spark.createDataFrame(pa.table({"k": KEYS}).to_pandas()).selectExpr(f"pmod(hash(k), {buckets}) AS b")
    assert bucketed.bucket_of(KEYS, buckets).tolist() == [row.b for row in frame.collect()]


def test_rows_are_grouped_by_bucket_keeping_their_order() -> None:
    keys = np.array([1, 1, 2, 5, 5, 9, 12, 40, 41], dtype=np.int64)
    rows = bucketed.rows_by_bucket(keys, 4)

    assert len(rows) == 4
    assert sorted(np.concatenate(rows).tolist()) == list(range(len(keys)))
    for bucket, indices in enumerate(rows):
        assert (bucketed.bucket_of(keys[indices], 4) == bucket).all()
        assert indices.tolist() == sorted(indices.tolist())


def planner_inputs(broker: Broker, *, segments_reversed: bool = False) -> SparkInputs:
    """Three partitions of 10-odd segments and a subscriber and a reader: Spark's
    inputs (optionally from a snapshot whose segments came in the wrong order)."""
    broker.create_topic("t", 3, {"segment_size": "1000", "retention_time": "1h"})
    for partition in range(3):
        write(broker, "t", [T0 + i * MIN for i in range(25 + 5 * partition)], partition=partition)
    broker.create_group("t", "g", "subscriber", "earliest")
    broker.create_group("t", "r", "reader", "earliest")
    snapshot = build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=T0 + 2 * 60 * MIN)
    tables = dict(snapshot.tables)
    if segments_reversed:
        tables["segments"] = tables["segments"].take(pa.array(range(tables["segments"].num_rows - 1, -1, -1)))
    return spark_inputs(tables, snapshot.now)


@pytest.mark.parametrize("segments_reversed", [False, True])
def test_the_planners_files_keep_the_layout_the_table_declares(
    broker: Broker, tmp_path: Path, segments_reversed: bool
) -> None:
    inputs = planner_inputs(broker, segments_reversed=segments_reversed)
    write_inputs(inputs, Scratch.local(tmp_path), 4)

    files = sorted((tmp_path / "rows").iterdir())
    assert [f.name for f in files] == [f"rows_{b:05d}.parquet" for b in range(4)]
    written = []
    for bucket, path in enumerate(files):
        rows = pq.read_table(path)
        pids = rows["pid"].to_numpy()
        assert (bucketed.bucket_of(pids, 4) == bucket).all()
        # By pid, then base offset with nulls (partition and group rows) first.
        keys = list(zip(rows["pid"].to_pylist(), [-1 if b is None else b for b in rows["base_offset"].to_pylist()]))
        assert keys == sorted(keys)
        written += rows.select(["pid", "row", "base_offset", "gid"]).to_pylist()
    given = pa.concat_tables([inputs.others, inputs.segments]).select(["pid", "row", "base_offset", "gid"])
    assert sorted(written, key=repr) == sorted(given.to_pylist(), key=repr)
    # Ranks and following bytes, by their definition, on one partition's segments.
    rows = pa.concat_tables([pq.read_table(path) for path in files])
    segments = rows.filter(pc.equal(rows["row"], SEGMENT_ROW)).sort_by(
        [("pid", "ascending"), ("base_offset", "ascending")]
    )
    first = segments.filter(pc.equal(segments["pid"], segments["pid"][0]))
    sizes = first["size_bytes"].to_pylist()
    assert first["rn"].to_pylist() == list(range(1, len(sizes) + 1))
    assert first["suffix_after"].to_pylist() == [sum(sizes[i + 1 :]) for i in range(len(sizes))]


def test_a_bucket_that_cannot_be_built_fails_the_write(tmp_path: Path) -> None:
    def rows_of(bucket: int) -> pa.Table:
        if bucket == 1:
            raise OSError("no space left")
        return pa.table({"pid": pa.array([bucket], pa.int64())})

    with pytest.raises(OSError, match="no space left"):
        bucketed.write(LOCAL, str(tmp_path / "rows"), 3, rows_of)


def test_the_table_is_registered_for_the_context_only(spark_engine: SparkEngine, tmp_path: Path) -> None:
    spark = spark_engine.session()
    schema = pa.schema([("pid", pa.int64()), ("base_offset", pa.int64())])
    table = pa.table({"pid": [1, 1, 2, 3], "base_offset": [0, 5, 0, 0]}, schema=schema)
    rows = bucketed.rows_by_bucket(table["pid"].to_numpy(), 2)
    bucketed.write(LOCAL, str(tmp_path / "rows"), 2, lambda bucket: table.take(rows[bucket]))
    before = {t.name for t in spark.catalog.listTables()}

    with bucketed.registered(spark, str(tmp_path / "rows"), schema, "pid", ["pid", "base_offset"], 2) as frame:
        assert sorted((r.pid, r.base_offset) for r in frame.collect()) == [(1, 0), (1, 5), (2, 0), (3, 0)]
        assert len({t.name for t in spark.catalog.listTables()} - before) == 1
    with pytest.raises(ZeroDivisionError):
        with bucketed.registered(spark, str(tmp_path / "rows"), schema, "pid", ["pid"], 2):
            raise ZeroDivisionError

    assert {t.name for t in spark.catalog.listTables()} == before
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == ["rows_00000.parquet", "rows_00001.parquet"]


@pytest.mark.parametrize(
    ("key", "order", "buckets"), [("nope", ["pid"], 2), ("pid", ["pid", "x`y"], 2), ("pid", ["pid"], 0)]
)
def test_a_table_not_of_its_schema_is_refused(
    spark_engine: SparkEngine, tmp_path: Path, key: str, order: list[str], buckets: int
) -> None:
    schema = pa.schema([("pid", pa.int64())])
    with pytest.raises(ValueError, match="no bucketed table"):
        with bucketed.registered(spark_engine.session(), str(tmp_path), schema, key, order, buckets):
            pass


def test_the_planner_reads_its_rows_as_a_bucketed_scan_without_shuffle_or_sort(
    broker: Broker, spark_engine: SparkEngine, tmp_path: Path
) -> None:
    broker.create_topic("t", 3, {"segment_size": "1000", "retention_time": "1h"})
    write(broker, "t", [T0 + i * MIN for i in range(30)])
    broker.create_group("t", "g", "subscriber", "earliest")
    snapshot = build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=T0 + 2 * 60 * MIN)
    inputs = spark_inputs(snapshot.tables, snapshot.now)
    spark = spark_engine.session()

    with private_directory(Scratch.local(tmp_path)) as directory:
        write_inputs(inputs, directory, 4)
        with read_files(spark, directory, 4) as (rows, facts):
            frame = query.frame(spark, rows, facts)
            frame.toArrow()
            # Adaptive execution is off (engine/prune/spark_settings.py): the plan
            # shown is the plan run, not the one an adaptive plan started from.
            executed = frame._jdf.queryExecution().executedPlan().toString()

    assert "AdaptiveSparkPlan" not in executed
    assert "Bucketed: true" in executed and "SelectedBucketsCount: 4 out of 4" in executed
    assert "Exchange hashpartitioning" not in executed
    assert "Sort [" not in executed
    assert executed.count("Window [") == 2
