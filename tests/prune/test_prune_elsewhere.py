"""A prune cycle, through the CLI, on Spark that is not this process's local session:
a Spark Connect server that cannot see the data directory, and a standalone cluster.

Each must make exactly the plan the local session makes of the same data directory
at the same instant (``explain`` shows every segment's decision), then apply it. The
servers are test-owned JVMs on loopback (tests/support/spark_fixtures.py); the
commands of a test run in one subprocess on one Spark application
(tests/support/one_spark_process.py). The Connect server
runs in a mount namespace where the data directory's parent is an empty tmpfs, as a
server on another machine would see it: the snapshot can only reach it as Arrow.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.prune.planner import Plan
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from tests.support.cli import CliResult
from tests.support.one_spark_process import run_in_one_process
from tests.support.seed_scenarios import MIN, T0, write

NOW = T0 + 3 * 60 * MIN
TOPICS = ("events", "metrics")


@pytest.fixture
def data_dir(hidden_from_spark: Path) -> Path:
    """This test's data directory, where the Connect server "elsewhere" cannot see it."""
    return hidden_from_spark / uuid.uuid4().hex / "data"


@pytest.fixture
def local_plan(broker: Broker, spark_engine: SparkEngine) -> Iterator[Plan]:
    """The plan of the local session at :data:`NOW` of a data directory with a
    barrier, a reader, message granularity (record-level cuts) and a size cap;
    the broker is closed before the CLI runs."""
    broker.create_topic("events", 2, {"segment_size": "1000", "retention_time": "1h", "consumption": "protect"})
    broker.create_topic(
        "metrics",
        1,
        {"segment_size": "1000", "retention_time": "150m", "granularity": "message", "max_partition_size": "3000"},
    )
    for partition in range(2):
        write(broker, "events", [T0 + i * MIN for i in range(40 + 10 * partition)], partition=partition)
    write(broker, "metrics", [T0 + i * 2 * MIN for i in range(60)])
    broker.create_group("events", "billing", "subscriber", "earliest")
    broker.commit("events", "billing", 1, 25, at_ms=T0)
    broker.create_group("events", "audit", "reader", "earliest")
    plan = Pruner(broker, spark_engine).plan(now=NOW)
    broker.close()
    yield plan


def _ok(result: CliResult) -> dict:
    assert (result.code, result.err) == (0, ""), result.err
    return json.loads(result.out)


def _same_cycle_as_local(data_dir: Path, local_plan: Plan, *where: str) -> None:
    expected = local_plan.tables["segments"].sort_by(
        [("topic", "ascending"), ("partition", "ascending"), ("base_offset", "ascending")]
    )
    # The commands in this order, as separate `ebb` runs would be, on one Spark application.
    results = iter(
        run_in_one_process(
            data_dir,
            *[("explain", topic, "--now", str(NOW), "--json", *where) for topic in TOPICS],
            ("prune", "--now", str(NOW), "--json", *where),
            *[("topic", "describe", topic, "--json") for topic in TOPICS],
        )
    )
    for topic in TOPICS:
        explained = _ok(next(results))
        want = [{k: v for k, v in row.items() if k != "topic"} for row in expected.to_pylist() if row["topic"] == topic]
        assert explained["segments"] == want, topic
    deleted = local_plan.deletions().to_pylist()
    assert {r["reason"] for r in deleted} >= {"DELETE_TIME", "DELETE_MAX_SIZE"}, "the scenario must exercise the rules"
    assert "KEEP_BARRIER" in expected["reason"].to_pylist()

    cycle = _ok(next(results))
    assert cycle["status"] == "done"
    assert sorted(
        (a["topic"], a["partition"], a["base_offset"]) for a in cycle["actions"] if a["action"] == "delete_segment"
    ) == sorted((r["topic"], r["partition"], r["base_offset"]) for r in deleted)
    starts = {
        (r["topic"], r["partition"]): r["new_log_start_offset"] for r in local_plan.tables["partitions"].to_pylist()
    }
    for topic in TOPICS:
        described = _ok(next(results))
        assert {(topic, p["partition"]): p["log_start_offset"] for p in described["partitions"]} == {
            key: start for key, start in starts.items() if key[0] == topic
        }


def test_a_connect_server_that_cannot_see_the_data_directory_makes_the_local_plan(
    spark_connect_server_elsewhere: str,
    local_plan: Plan,
    data_dir: Path,
) -> None:
    # The server really cannot see it: a file of the data directory is not there for it.
    here = data_dir / "visible-here.txt"
    here.write_text("only on this side\n")
    engine = SparkEngine(remote=spark_connect_server_elsewhere, log_dir=data_dir.parent / "client-logs")
    try:
        with pytest.raises(Exception, match="PATH_NOT_FOUND"):
            engine.session(timeout=120).read.text(str(here)).collect()
    finally:
        engine.stop()

    _same_cycle_as_local(data_dir, local_plan, "--spark-remote", spark_connect_server_elsewhere)
    log = (data_dir / "logs" / "spark.log").read_text()
    assert f"snapshot transport for {spark_connect_server_elsewhere}: arrow" in log
    assert not list((data_dir / "snapshots").glob("snapshot-*")), "input files left behind"


def test_a_standalone_cluster_makes_the_local_plan(
    spark_standalone_cluster: str,
    local_plan: Plan,
    data_dir: Path,
) -> None:
    # Small executors: the worker offers 1 core and 1 GiB.
    (data_dir / "ebb.toml").write_text('[spark.conf]\n"spark.executor.memory" = "512m"\n"spark.cores.max" = "1"\n')
    _same_cycle_as_local(data_dir, local_plan, "--spark-master", spark_standalone_cluster)
    log = (data_dir / "logs" / "spark.log").read_text()
    assert f"snapshot transport for {spark_standalone_cluster}: files" in log
