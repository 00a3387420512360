"""The planning query reaches a Spark Connect server once per plan (engine/prune/plan/round_trips.py).

A plan through the public calls had the server analyse its query three times: the
SQL command, the result's schema, the execution. These run the planner on the test
run's Connect server (a test-owned JVM on loopback) and count the client's requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.broker import Broker
from engine.prune.plan import query
from engine.prune.plan.inputs import read_files, spark_inputs, write_inputs
from engine.prune.plan.round_trips import is_connect, sql_frame, to_arrow
from engine.prune.planner import Planner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.prune.transport import Scratch, private_directory
from engine.store.batch import NewRecord

HOUR = 3_600_000
T0 = 1_800_000_000_000


@pytest.fixture
def snapshot(broker: Broker) -> Snapshot:
    """Two partitions, one of them with expired segments and a subscriber behind."""
    broker.create_topic("events", 2, {"segment_size": "1000", "retention_time": "1d"})
    for i in range(40):
        broker.produce("events", [NewRecord(b"x" * 60, None, T0 + i * HOUR)], partition=0)
    broker.create_group("events", "g", "subscriber", "earliest")
    return build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=T0 + 40 * HOUR)


@pytest.fixture
def requests(spark_connect_engine: SparkEngine, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The kinds of request the Connect client sends (``analyze``, ``execute``), in order."""
    client = spark_connect_engine.session().client
    sent: list[str] = []

    def counted(kind: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def send(*args: Any, **kwargs: Any) -> Any:
            sent.append(kind)
            return call(*args, **kwargs)

        return send

    monkeypatch.setattr(client, "_analyze", counted("analyze", client._analyze))
    monkeypatch.setattr(client, "_execute_and_fetch", counted("execute", client._execute_and_fetch))
    yield sent


def test_a_plan_on_spark_connect_sends_its_query_once_and_asks_for_no_schema(
    spark_connect_engine: SparkEngine, snapshot: Snapshot, requests: list[str], tmp_path: Path
) -> None:
    planner = Planner(spark_connect_engine, Scratch.local(tmp_path), "files")

    plan = planner.plan(snapshot)

    # Create the input table, run the query, drop the table.
    assert requests == ["execute", "execute", "execute"]
    assert plan.deletions().num_rows > 0


def test_the_query_sent_once_returns_the_table_of_the_public_calls(
    spark_connect_engine: SparkEngine, snapshot: Snapshot, tmp_path: Path
) -> None:
    spark = spark_connect_engine.session()
    assert is_connect(spark)
    inputs = spark_inputs(snapshot.tables, snapshot.now)
    with private_directory(Scratch.local(tmp_path)) as directory:
        write_inputs(inputs, directory, 4)
        with read_files(spark, directory, 4) as (rows, facts):
            sent_once = to_arrow(sql_frame(spark, query.PLAN_QUERY, rows=rows, facts=facts))
            public = spark.sql(query.PLAN_QUERY, rows=rows, facts=facts).toArrow()

    assert sent_once.schema == public.schema
    assert sent_once.sort_by([("pid", "ascending"), ("row", "ascending"), ("rn", "ascending")]).equals(
        public.sort_by([("pid", "ascending"), ("row", "ascending"), ("rn", "ascending")])
    )
    assert sent_once.num_rows == snapshot.tables["segments"].num_rows + 2 + 2  # segments, partitions, group rows
