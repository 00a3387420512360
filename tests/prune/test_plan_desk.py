"""The plan desk (engine/prune/plan_desk.py): the plan a one-shot command gets from it
is the one it would make itself, and a request without the service's token is refused.

The desk here plans on the test run's Spark Connect server (a test-owned JVM on
loopback) and listens on 127.0.0.1 in a thread of the test; the desk the service runs
is tested through the CLI in test_spark_service.py.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.prune.plan_desk import Desk, ask
from engine.prune.planner import Plan, Planner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.prune.tables import PLAN_TABLES
from engine.prune.transport import Scratch
from engine.store.batch import NewRecord

HOUR = 3_600_000
T0 = 1_800_000_000_000
TOKEN = "the-service-token"


@pytest.fixture
def snapshot(broker: Broker) -> Snapshot:
    """Two topics, one with expired segments and a subscriber holding some back."""
    broker.create_topic("events", 2, {"segment_size": "1000", "retention_time": "1d"})
    broker.create_topic("quiet", 1, {"segment_size": "1000"})
    for i in range(40):
        broker.produce("events", [NewRecord(b"x" * 60, None, T0 + i * HOUR)], partition=i % 2)
    broker.create_group("events", "g", "subscriber", "earliest")
    broker.commit("events", "g", 0, 12)
    return build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=T0 + 40 * HOUR)


@pytest.fixture
def planner(spark_connect_engine: SparkEngine, tmp_path: Path) -> Planner:
    return Planner(spark_connect_engine, Scratch.local(tmp_path / "scratch"), "files")


@pytest.fixture
def desk(planner: Planner) -> Iterator[tuple[Desk, list[Snapshot]]]:
    """A desk planning with ``planner``, and the snapshots it was asked to plan."""
    asked: list[Snapshot] = []
    notes: list[str] = []

    def plan(snapshot: Snapshot, every_segment: bool) -> Plan:
        asked.append(snapshot)
        return planner.plan(snapshot, every_segment=every_segment)

    desk = Desk(TOKEN, plan, notes.append)
    serving = threading.Thread(target=desk.serve_forever, daemon=True)
    serving.start()
    yield desk, asked
    desk.close()
    serving.join(10)
    assert not serving.is_alive()


@pytest.mark.parametrize("every_segment", [True, False])
def test_the_desk_plans_what_the_command_would_plan_itself(
    desk: tuple[Desk, list[Snapshot]], planner: Planner, snapshot: Snapshot, every_segment: bool
) -> None:
    served, asked = desk

    at_desk = ask(served.port, TOKEN, snapshot, every_segment=every_segment)
    itself = planner.plan(snapshot, every_segment=every_segment)

    assert at_desk is not None and len(asked) == 1
    assert (at_desk.now, at_desk.rejected, at_desk.every_segment) == (snapshot.now, snapshot.rejected, every_segment)
    assert list(at_desk.tables) == list(PLAN_TABLES)
    for name in PLAN_TABLES:
        assert at_desk.tables[name].equals(itself.tables[name]), name
    assert at_desk.deletions().num_rows > 0


@pytest.mark.parametrize("token", ["", "not-the-token", TOKEN + "x"])
def test_a_request_without_the_token_is_refused_unplanned(
    desk: tuple[Desk, list[Snapshot]], snapshot: Snapshot, token: str
) -> None:
    served, asked = desk

    assert ask(served.port, token, snapshot) is None

    # What the desk answers, on the wire: "refused", and the connection closed.
    head = json.dumps({"now": snapshot.now, "every_segment": True}).encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(struct.pack(">I", len(head)) + head)
        answer = sock.makefile("rb").read()
    (size,) = struct.unpack(">I", answer[:4])
    assert json.loads(answer[4 : 4 + size]) == {"error": "refused"} and len(answer) == 4 + size
    assert asked == []


def test_the_desk_listens_on_loopback_only(desk: tuple[Desk, list[Snapshot]]) -> None:
    served, _asked = desk
    assert served.listener.getsockname()[0] == "127.0.0.1"


def test_no_desk_listening_is_no_plan(snapshot: Snapshot) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        assert ask(port, TOKEN, snapshot) is None
