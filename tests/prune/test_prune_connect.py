"""A prune cycle planned through a real Spark Connect server (SPEC §5: ``--spark-remote``).

The server is a test-owned subprocess on loopback (tests/support/spark_fixtures.py); the
planner takes its DataFrame functions from the session it runs on, so the same
plan code serves a local session and a Connect client in one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.journal.journal import Journal
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from engine.store.batch import NewRecord

HOUR = 3_600_000
T0 = 1_800_000_000_000


@pytest.fixture
def connect_engine(spark_connect_server: str, tmp_path: Path) -> Iterator[SparkEngine]:
    engine = SparkEngine(remote=spark_connect_server, log_dir=tmp_path / "logs")
    engine.start()
    yield engine
    engine.stop()


def test_a_prune_cycle_runs_through_spark_connect(broker: Broker, connect_engine: SparkEngine) -> None:
    # 1 KiB segments: 10 records of ~84 B each per segment, one record per hour.
    broker.create_topic("events", 1, {"segment_size": "1000", "retention_time": "1d"})
    for i in range(40):
        broker.produce("events", [NewRecord(b"x" * 60, None, T0 + i * HOUR)], partition=0)
    before = broker.describe("events").to_json()["partitions"][0]["segments"]
    sealed = [s for s in before if s["sealed"]]
    assert len(sealed) >= 3

    now = T0 + 40 * HOUR  # one day back is T0 + 16h: segments whose last record is older go
    outcome = Pruner(broker, connect_engine).cycle(now=now, trigger="manual", actor="test")

    expired = [s for s in sealed if now - s["max_timestamp"] > 24 * HOUR]
    assert expired, "the scenario must expire something"
    deleted = outcome.plan.deletions().to_pylist()
    assert [(d["base_offset"], d["reason"]) for d in deleted] == [(s["base_offset"], "DELETE_TIME") for s in expired]
    assert outcome.status == "done"
    assert outcome.applied == len(expired)

    after = broker.describe("events").to_json()["partitions"][0]
    assert after["log_start_offset"] == expired[-1]["next_offset"]
    assert [s["base_offset"] for s in after["segments"]] == [s["base_offset"] for s in before[len(expired) :]]
    cycle = Journal(broker.catalog).cycle(outcome.cycle_id)
    assert cycle.spark_master == connect_engine.description
    assert connect_engine.description.startswith("sc://127.0.0.1:")
