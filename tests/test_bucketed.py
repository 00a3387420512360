"""The planner's rows as a bucketed table (engine/prune/bucketed.py).

Spark reads the table without a shuffle or a sort only because the files keep two
claims: every key's rows in the file of its bucket, by Spark's own hash, and every
file in the declared order. A broken claim would not fail: it would split a
partition between two tasks, and plan it wrong. So the hash is held against
Spark's, the layout against its definition, and the planner's physical plan is
checked to read the table as a bucketed scan (end-to-end correctness is the
property test's, tests/test_planner_property.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from seed_scenarios import MIN, T0, write

from engine.broker import Broker
from engine.prune import bucketed
from engine.prune import planner as planner_module
from engine.prune.session import SparkEngine
from engine.prune.snapshot import StoreRecordTimes, build_snapshot

KEYS = np.array(
    [*range(-300, 3000), 2**31 - 1, 2**31, -(2**31), 2**32 + 7, 2**40 + 3, 2**62, 2**63 - 1, -(2**63)], dtype=np.int64
)


@pytest.mark.parametrize("buckets", [1, 2, 4, 7, 200])
def test_bucket_of_is_sparks_pmod_of_hash(spark_engine: SparkEngine, buckets: int) -> None:
    spark = spark_engine.session()
    frame = spark.createDataFrame(pa.table({"k": KEYS}).to_pandas()).selectExpr(f"pmod(hash(k), {buckets}) AS b")
    assert bucketed.bucket_of(KEYS, buckets).tolist() == [row.b for row in frame.collect()]


def test_rows_are_sorted_into_buckets_in_order_with_nulls_first() -> None:
    table = pa.table(
        {
            "pid": pa.array([5, 1, 5, 1, 9, 5, 1], pa.int64()),
            "base_offset": pa.array([20, None, None, 0, 3, 10, 7], pa.int64()),
            "tag": list("abcdefg"),
        }
    )
    ordered, sizes = bucketed.sort_into_buckets(table, "pid", ["pid", "base_offset"], 4)

    buckets = bucketed.bucket_of(ordered["pid"].to_numpy(), 4)
    assert sizes == np.bincount(buckets, minlength=4).tolist() and sum(sizes) == 7
    assert buckets.tolist() == sorted(buckets.tolist())
    by_pid = {pid: [t for p, t in zip(ordered["pid"].to_pylist(), ordered["tag"].to_pylist()) if p == pid] for pid in (1, 5, 9)}
    assert by_pid == {1: ["b", "d", "g"], 5: ["c", "f", "a"], 9: ["e"]}


def test_the_table_is_registered_for_the_context_only(spark_engine: SparkEngine, tmp_path: Path) -> None:
    spark = spark_engine.session()
    schema = pa.schema([("pid", pa.int64()), ("base_offset", pa.int64())])
    table = pa.table({"pid": [3, 1, 2, 1], "base_offset": [0, 5, 0, 0]}, schema=schema)
    ordered, sizes = bucketed.sort_into_buckets(table, "pid", ["pid", "base_offset"], 2)
    bucketed.write(ordered, sizes, tmp_path / "rows")
    before = {t.name for t in spark.catalog.listTables()}

    with bucketed.registered(spark, tmp_path / "rows", schema, "pid", ["pid", "base_offset"], 2) as frame:
        assert sorted((r.pid, r.base_offset) for r in frame.collect()) == [(1, 0), (1, 5), (2, 0), (3, 0)]
        assert len({t.name for t in spark.catalog.listTables()} - before) == 1
    with pytest.raises(ZeroDivisionError):
        with bucketed.registered(spark, tmp_path / "rows", schema, "pid", ["pid"], 2):
            raise ZeroDivisionError

    assert {t.name for t in spark.catalog.listTables()} == before
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == ["rows_00000.parquet", "rows_00001.parquet"]


@pytest.mark.parametrize(("key", "order", "buckets"), [("nope", ["pid"], 2), ("pid", ["pid", "x`y"], 2), ("pid", ["pid"], 0)])
def test_a_table_not_of_its_schema_is_refused(spark_engine: SparkEngine, tmp_path: Path, key: str, order: list[str], buckets: int) -> None:
    schema = pa.schema([("pid", pa.int64())])
    with pytest.raises(ValueError, match="no bucketed table"):
        with bucketed.registered(spark_engine.session(), tmp_path, schema, key, order, buckets):
            pass


def test_the_planner_reads_its_rows_as_a_bucketed_scan_without_shuffle_or_sort(
    broker: Broker, spark_engine: SparkEngine, tmp_path: Path
) -> None:
    broker.create_topic("t", 3, {"segment_size": "1000", "retention_time": "1h"})
    write(broker, "t", [T0 + i * MIN for i in range(30)])
    broker.create_group("t", "g", "subscriber", "earliest")
    snapshot = build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=T0 + 2 * 60 * MIN)
    inputs = planner_module._spark_inputs(snapshot.tables, snapshot.now)
    spark = spark_engine.session()

    with planner_module._input_files(tmp_path) as directory:
        planner_module._write_inputs(inputs, directory, 4)
        with planner_module._planning_frame(spark, directory, 4) as frame:
            frame.toArrow()
            # Adaptive execution shows the plan it ran, then the one it started from.
            executed = frame._jdf.queryExecution().executedPlan().toString().split("== Initial Plan ==")[0]

    assert "== Final Plan ==" in executed
    assert "Bucketed: true" in executed and "SelectedBucketsCount: 4 out of 4" in executed
    assert "Exchange hashpartitioning" not in executed
    assert "Sort [" not in executed
    assert executed.count("Window [") == 2
