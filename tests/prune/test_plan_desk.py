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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.errors import SparkUnavailable
from engine.prune import plan_desk
from engine.prune.plan_desk import Desk, ask
from engine.prune.planner import Plan, Planner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.prune.spark_service import ServerState
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


@pytest.fixture
def slow_desk(planner: Planner) -> Iterator[tuple[Desk, threading.Event]]:
    """A desk whose plans wait for the event before they are made."""
    go_on = threading.Event()

    def plan(snapshot: Snapshot, every_segment: bool) -> Plan:
        go_on.wait(60)
        return planner.plan(snapshot, every_segment=every_segment)

    desk = Desk(TOKEN, plan, lambda note: None)
    serving = threading.Thread(target=desk.serve_forever, daemon=True)
    serving.start()
    yield desk, go_on
    go_on.set()
    desk.close()
    serving.join(10)


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> ServerState:
    """A recorded server to watch (its handshake answered as each test says), with
    short waits."""
    monkeypatch.setattr(plan_desk, "_WATCH_SECONDS", 0.05)
    monkeypatch.setattr(plan_desk, "SILENT_SECONDS", 0.5)
    return ServerState(1, 4242, 1, 0, "local[*]", "token", 0)


def test_a_client_stops_waiting_once_the_server_has_not_answered_for_a_while(
    slow_desk: tuple[Desk, threading.Event], snapshot: Snapshot, watch: ServerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped or hung server accepts connections and never plans: the desk's plan
    on it, and the client's wait, would never end."""
    desk, _go_on = slow_desk
    monkeypatch.setattr(plan_desk, "answers", lambda state: False)
    began = time.monotonic()
    with pytest.raises(SparkUnavailable, match=r"server \(pid 4242\) does not answer: it is stopped or hung"):
        ask(desk.port, TOKEN, snapshot, server=watch)
    assert time.monotonic() - began < 30


def test_a_plan_slower_than_the_silence_allowed_waits_while_the_server_answers(
    slow_desk: tuple[Desk, threading.Event], snapshot: Snapshot, watch: ServerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk, go_on = slow_desk
    asked: list[ServerState] = []

    def answers(state: ServerState) -> bool:
        asked.append(state)
        if len(asked) == 40:  # 2 s of watching: four times the silence allowed
            go_on.set()
        return True

    monkeypatch.setattr(plan_desk, "answers", answers)
    plan = ask(desk.port, TOKEN, snapshot, server=watch)
    assert plan is not None and plan.deletions().num_rows > 0
    assert len(asked) >= 40 and {state.pid for state in asked} == {4242}
