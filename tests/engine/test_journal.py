"""The journal (SPEC §6): its tables, queries, exports and retention, and the engine
state kept next to it."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.catalog.catalog import Catalog
from engine.config import load_config
from engine.errors import InvalidInput, NotFound
from engine.journal.export import write_csv, write_json
from engine.journal.journal import POLICY_CHANGE_FIELDS, Entry, Journal
from engine.journal.rows import ACTION_FIELDS, CYCLE_FIELDS, Action, Cycle
from engine.journal.state import EngineState

DAY = 86_400_000
T = 1_762_000_000_000


@pytest.fixture
def journal(broker: Broker) -> Journal:
    return Journal(broker.catalog)


def columns(db, table: str) -> list[str]:
    return [r[1] for r in db.conn.execute(f"PRAGMA table_info({table})")]


def test_tables_live_in_the_catalog_database_and_are_created_once(broker: Broker, data_dir: Path) -> None:
    Journal(broker.catalog)
    Journal(broker.catalog)  # a second journal on the same database finds its tables
    with sqlite3.connect(data_dir / "catalog.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"cycles", "actions", "engine_state", "topic_state", "policy_changes", "topics"} <= tables
    assert columns(broker.catalog.db, "cycles") == list(CYCLE_FIELDS)
    assert columns(broker.catalog.db, "actions") == list(ACTION_FIELDS)


def test_cycle_lifecycle(journal: Journal) -> None:
    cycle = journal.start_cycle(
        trigger="schedule", actor="engine", scope=["a", "b"], now=T, started=T + 5, spark_master="local[2]", plan_ms=30
    )
    row = journal.cycle(cycle)
    assert (row.status, row.scope, row.now, row.started, row.finished) == (
        "running",
        ["a", "b"],
        T,
        T + 5,
        None,
    )
    journal.finish_cycle(
        cycle, status="done", finished=T + 125, planned=4, applied=3, bytes_freed=999, error="x failed"
    )
    row = journal.cycle(cycle)
    assert {
        k: getattr(row, k)
        for k in (
            "status",
            "finished",
            "planned",
            "applied",
            "bytes_freed",
            "plan_ms",
            "apply_ms",
            "duration_ms",
            "error",
            "spark_master",
        )
    } == {
        "status": "done",
        "finished": T + 125,
        "planned": 4,
        "applied": 3,
        "bytes_freed": 999,
        "plan_ms": 30,
        "apply_ms": 120,
        "duration_ms": 150,  # the whole cycle: planning and applying
        "error": "x failed",
        "spark_master": "local[2]",
    }
    with pytest.raises(NotFound, match="cycle 999"):
        journal.cycle(999)


def test_rows_are_frozen_dataclasses_whose_json_has_the_export_fields(journal: Journal) -> None:
    seed(journal)
    action, cycle = journal.actions()[0], journal.cycles()[0]
    assert isinstance(action, Action) and isinstance(cycle, Cycle)
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.status = "applied"  # type: ignore[misc]
    assert tuple(action.to_json()) == ACTION_FIELDS and tuple(cycle.to_json()) == CYCLE_FIELDS
    assert action.to_json()["details"] == action.details and cycle.to_json()["scope"] == cycle.scope


def test_a_bad_status_or_action_is_refused(journal: Journal) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        journal.start_cycle(trigger="x", actor="y", scope="all", now=0, started=0, spark_master=None, status="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown journal action"):
        journal.append([Entry("delete_everything")], time=0, trigger="manual", actor="me", status="applied")
    assert journal.actions() == []


def seed(journal: Journal) -> tuple[int, int]:
    """Two cycles and a manual action, on topics whose names need quoting in SQL."""
    c1 = journal.start_cycle(trigger="schedule", actor="engine", scope="all", now=T, started=T, spark_master=None)
    c2 = journal.start_cycle(
        trigger="manual", actor="alice", scope=["o'hara"], now=T + DAY, started=T + DAY, spark_master=None
    )
    journal.append(
        [
            Entry("delete_segment", "o'hara", 0, 0, 0, 100, 100, 4096, "DELETE_TIME", {"note": "x"}),
            Entry("move_log_start", "o'hara", 0, None, 0, 100, 100),
        ],
        time=T + 10,
        trigger="schedule",
        actor="engine",
        status="applied",
        cycle=c1,
    )
    journal.append(
        [Entry("delete_segment", 'say "hi"', 1, 50, 50, 80, 30, 2048, "DELETE_SIZE")],
        time=T + DAY + 10,
        trigger="manual",
        actor="alice",
        status="planned",
        cycle=c2,
    )
    journal.append(
        [Entry("hold", "o'hara", details={"reason": "audit; DROP TABLE actions; --"})],
        time=T + 2 * DAY,
        trigger="manual",
        actor="bob",
        status="applied",
    )
    return c1, c2


def test_action_filters_newest_first(journal: Journal) -> None:
    c1, c2 = seed(journal)
    everything = journal.actions()
    assert [a.action for a in everything] == ["hold", "delete_segment", "move_log_start", "delete_segment"]
    assert [a.time for a in everything] == sorted((a.time for a in everything), reverse=True)
    assert [a.action for a in journal.actions(topic="o'hara")] == ["hold", "move_log_start", "delete_segment"]
    assert [a.topic for a in journal.actions(topic='say "hi"')] == ['say "hi"']
    assert [a.action for a in journal.actions(since=T + DAY)] == ["hold", "delete_segment"]
    assert [a.topic for a in journal.actions(action="delete_segment")] == ['say "hi"', "o'hara"]
    assert [a.action for a in journal.actions(cycle=c1)] == ["move_log_start", "delete_segment"]
    assert [a.status for a in journal.actions(cycle=c2)] == ["planned"]
    assert journal.actions(topic="o'hara", action="delete_segment", cycle=c1)[0].details == {"note": "x"}
    assert journal.actions(topic="o' OR '1'='1") == []
    assert len(journal.actions(limit=2)) == 2 and len(journal.actions(limit=None)) == 4
    hold = journal.actions(action="hold")[0]
    assert (hold.cycle, hold.actor, hold.details) == (None, "bob", {"reason": "audit; DROP TABLE actions; --"})
    assert [c.id for c in journal.cycles()] == [c2, c1]
    assert [c.id for c in journal.cycles(since=T + 1)] == [c2]
    assert [c.id for c in journal.cycles(status="running", limit=1)] == [c2]


def test_settle_is_final_and_merges_details(journal: Journal) -> None:
    (planned,) = journal.append(
        [Entry("delete_segment", "t", 0, 0, details={"a": 1})],
        time=T,
        trigger="schedule",
        actor="engine",
        status="planned",
    )
    journal.settle([planned], "applied", time=T + 7, details={"completed_on_recovery": True})
    row = journal.actions()[0]
    assert (row.status, row.settled, row.time) == ("applied", T + 7, T)
    assert row.details == {"a": 1, "completed_on_recovery": True}
    journal.settle([planned], "rolled_back", time=T + 9)  # a status is final
    assert journal.actions()[0].status == "applied"
    with pytest.raises(ValueError):
        journal.settle([planned], "planned", time=T)


def test_policy_changes_are_read_from_the_catalog(broker: Broker, journal: Journal) -> None:
    broker.create_topic("its.topic", 1, {"retention_time": "1d"}, actor="alice")
    broker.alter_topic("its.topic", {"retention_time": "2d", "hold": "true"}, actor="bob")
    changes = journal.policy_changes(topic="its.topic")
    # A change of two fields is two rows (in field order, one transaction).
    assert [(c["actor"], c["field"], c["old"], c["new"]) for c in changes] == [
        ("bob", "retention_time", "1d", "2d"),
        ("bob", "hold", None, "true"),
        ("alice", "retention_time", None, "1d"),
    ]
    assert journal.policy_version("its.topic") == max(c["id"] for c in changes)
    assert journal.policy_version("nothing") == 0
    assert journal.policy_changes(topic="other") == []


def test_csv_and_json_exports_round_trip(journal: Journal, broker: Broker) -> None:
    seed(journal)
    broker.create_topic("t", 1, {"hold": "true"}, actor="alice")
    for rows, fields in (
        ([a.to_json() for a in journal.actions()], ACTION_FIELDS),
        ([c.to_json() for c in journal.cycles()], CYCLE_FIELDS),
        (journal.policy_changes(), POLICY_CHANGE_FIELDS),
    ):
        out = io.StringIO()
        write_json(rows, fields, out)
        assert json.loads(out.getvalue()) == rows

        out = io.StringIO()
        write_csv(rows, fields, out)
        parsed = list(csv.DictReader(io.StringIO(out.getvalue())))
        assert out.getvalue().splitlines()[0] == ",".join(fields)
        assert len(parsed) == len(rows)
        for row, back in zip(rows, parsed):
            for f in fields:
                value = row[f]
                if value is None:
                    assert back[f] == ""
                elif isinstance(value, (dict, list)):
                    assert json.loads(back[f]) == value
                else:
                    assert back[f] == str(value), f


def test_retention_deletes_only_old_rows(broker: Broker, journal: Journal) -> None:
    now = T + 100 * DAY
    old = journal.start_cycle(trigger="schedule", actor="e", scope="all", now=T, started=T, spark_master=None)
    journal.finish_cycle(old, status="done", finished=T + 1, planned=0, applied=0, bytes_freed=0)
    stuck = journal.start_cycle(trigger="schedule", actor="e", scope="all", now=T, started=T, spark_master=None)
    recent = journal.start_cycle(
        trigger="schedule", actor="e", scope="all", now=now, started=now - DAY, spark_master=None
    )
    for cycle, time in ((old, T), (stuck, T), (recent, now - DAY), (None, T), (None, now - 89 * DAY)):
        journal.append(
            [Entry("move_log_start", "t", 0)], time=time, trigger="schedule", actor="e", status="applied", cycle=cycle
        )
    broker.clock = lambda: T
    broker.create_topic("t", 1, {"retention_time": "1d"})
    broker.alter_topic("t", {"retention_time": "2d"})
    broker.alter_topic("t", {"retention_time": "3d"})  # the topic's latest change, old as well
    broker.clock = lambda: now - DAY
    broker.create_topic("u", 1, {"retention_time": "1d"})
    version = journal.policy_version("t")

    removed = journal.apply_retention(now=now, retention_ms=90 * DAY)
    assert (removed.cycles, removed.actions, removed.policy_changes) == (1, 2, 2)
    assert {c.id for c in journal.cycles()} == {stuck, recent}  # a running cycle waits for recovery
    assert [(a.cycle, a.time) for a in journal.actions(limit=None)] == [
        (recent, now - DAY),
        (None, now - 89 * DAY),
        (stuck, T),
    ]
    # Each topic's latest change stays: it is the topic's policy version.
    assert [(c["topic"], c["new"]) for c in journal.policy_changes()] == [("u", "1d"), ("t", "3d")]
    assert journal.policy_version("t") == version
    assert journal.apply_retention(now=now, retention_ms=None) == type(removed)(0, 0, 0)


def test_journal_retention_config_key(tmp_path: Path) -> None:
    path = tmp_path / "ebb.toml"
    assert load_config(path).journal_retention_ms == 90 * DAY
    path.write_text('[engine]\njournal_retention = "30d"\n')
    assert load_config(path).journal_retention_ms == 30 * DAY
    path.write_text('[engine]\njournal_retention = "infinite"\n')
    assert load_config(path).journal_retention_ms is None
    for bad in ('"0"', '"0s"', '"soon"'):
        path.write_text(f"[engine]\njournal_retention = {bad}\n")
        with pytest.raises(InvalidInput, match="journal_retention"):
            load_config(path)


def test_engine_state(broker: Broker) -> None:
    state = EngineState(broker.catalog)
    assert state.is_paused() is False
    state.set_paused(True)
    assert EngineState(Catalog.open(broker.data.catalog_path)).is_paused() is True
    state.set_paused(False)
    assert state.is_paused() is False

    broker.create_topic("quota-topic", 1)
    assert (state.quota_state("quota-topic").exceeded, state.quota_state("quota-topic").since) == (False, None)
    state.set_quota_state("quota-topic", True, T)
    assert state.quota_state("quota-topic").exceeded is True and state.quota_state("quota-topic").since == T
    assert set(state.quota_states()) == {"quota-topic"}
    broker.delete_topic("quota-topic")  # a topic's state goes with it
    assert state.quota_states() == {}


def test_journal_rows_commit_with_the_change_they_record(broker: Broker, journal: Journal) -> None:
    broker.create_topic("t", 1)
    with pytest.raises(RuntimeError), broker.catalog.write():
        EngineState(broker.catalog).set_paused(True)
        journal.append([Entry("pause")], time=T, trigger="manual", actor="me", status="applied")
        raise RuntimeError("the change failed")
    assert journal.actions() == [] and EngineState(broker.catalog).is_paused() is False
