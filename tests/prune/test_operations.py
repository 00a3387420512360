"""Manual operations (SPEC §5, engine/prune/operations.py) on real data: what they
delete and keep, the log starts and positions they leave, the journal rows they
write, what they refuse (hold, pause, bad input) without changing anything, their
crash safety through the executor; and the backlog-quota gate of appends (SPEC §4)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.errors import InvalidInput, NotFound, QuotaExceeded
from engine.faults import KILL_AT_ENV
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.prune import operations
from engine.prune.executor import recover_interrupted
from engine.store.batch import NewRecord
from tests.support.cli import REPO, subprocess_env
from tests.support.prune_driver import NOW, T0, assert_records, make_topic, produce, read_all, sealed_bases, ts_of

TOPIC = "events"
RECORDS = 300


@pytest.fixture
def journal(broker: Broker) -> Journal:
    return Journal(broker.catalog)


@pytest.fixture
def topic(broker: Broker) -> str:
    """Two partitions of 300 records (ts_of(offset) = T0 + 10 ms * offset), 4 KiB
    segments (33-34 records each); a subscriber and a reader at the start."""
    make_topic(broker, TOPIC, records=RECORDS)
    broker.create_group(TOPIC, "sub", "subscriber", "earliest")
    broker.create_group(TOPIC, "rd", "reader", "earliest")
    return TOPIC


def log_files(data_dir: Path, topic: str, partition: int) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (data_dir / "topics" / topic / str(partition)).glob("*.log"))


def assert_consistent(broker: Broker, data_dir: Path, topic: str) -> None:
    for row in broker.catalog.partitions(topic):
        assert not list((data_dir / "topics" / topic / str(row.partition)).glob("*.deleted"))
        assert [s.base_offset for s in broker.catalog.segments(topic, row.partition)] == log_files(
            data_dir, topic, row.partition
        )
        assert_records(
            read_all(broker, topic, row.partition), topic, row.partition, row.log_start_offset, row.next_offset
        )


def state(broker: Broker, data_dir: Path) -> tuple:
    """Files and every catalog and journal row: what a refused operation must not change."""
    Journal(broker.catalog)  # its tables exist, empty or not
    db = broker.catalog.db.conn
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    files = sorted(
        (str(p.relative_to(data_dir)), p.stat().st_size) for p in (data_dir / "topics").rglob("*") if p.is_file()
    )
    return files, {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def positions(broker: Broker, topic: str, partition: int) -> dict[str, int]:
    return {g.name: g.positions[partition][0] for g in broker.catalog.groups(topic)}


# -- truncate ------------------------------------------------------------------------------------


def test_truncate_before_an_offset_moves_the_log_start_deletes_whole_segments_and_moves_groups(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    segments = sealed_bases(broker, topic, 0)
    cut = segments[2][0] + 5  # inside the third segment: it stays, the first two go
    freed = sum(s.size_bytes for s in broker.catalog.segments(topic, 0)[:2])
    broker.commit(topic, "sub", 0, 10)

    result = operations.truncate(broker, topic, 0, before_offset=cut, actor="alice")

    assert result.changed and result.operation == "truncate"
    assert (result.segments_deleted, result.bytes_freed, result.messages) == (2, freed, cut)
    assert broker.catalog.partition(topic, 0).log_start_offset == cut
    assert log_files(data_dir, topic, 0) == [b for b, _ in segments[2:]] + [
        broker.catalog.segments(topic, 0)[-1].base_offset
    ]
    assert broker.catalog.partition(topic, 1).log_start_offset == 0  # the other partition untouched
    assert positions(broker, topic, 0) == {"sub": cut, "rd": cut}
    assert {(g.group, g.old_position, g.messages_skipped) for g in result.groups_moved} == {
        ("sub", 10, cut - 10),
        ("rd", 0, cut),
    }
    assert_consistent(broker, data_dir, topic)

    cycle = journal.cycle(result.cycle_id)
    assert (cycle.trigger, cycle.actor, cycle.scope, cycle.status) == ("manual", "alice", [topic], "done")
    assert (cycle.planned, cycle.applied, cycle.bytes_freed) == (2, 2, freed)
    rows = journal.actions(cycle=result.cycle_id, limit=None)
    assert {(a.trigger, a.actor, a.status) for a in rows} == {("manual", "alice", "applied")}
    kinds = sorted(a.action for a in rows)
    assert kinds == [
        "delete_segment",
        "delete_segment",
        "move_log_start",
        "reader_moved",
        "subscriber_overrun",
        "truncate",
    ]
    (request,) = [a for a in rows if a.action == "truncate"]
    assert (request.partition, request.start_offset, request.end_offset, request.messages) == (
        0,
        0,
        cut,
        cut,
    )
    assert (request.reason, request.bytes) == ("DELETE_MANUAL", freed)
    assert request.details["before_offset"] == cut and request.details["groups_moved"] == ["rd", "sub"]
    assert {a.reason for a in rows if a.action == "delete_segment"} == {"DELETE_MANUAL"}
    (overrun,) = [a for a in rows if a.action == "subscriber_overrun"]
    assert (overrun.start_offset, overrun.end_offset, overrun.messages) == (10, cut, cut - 10)


def test_truncate_before_a_time_cuts_at_the_first_record_at_or_after_it(
    broker: Broker, data_dir: Path, topic: str
) -> None:
    result = operations.truncate(broker, topic, 1, before_time=ts_of(123) - 5)
    assert (
        broker.catalog.partition(topic, 1).log_start_offset == 123 and result.partitions[0].new_log_start_offset == 123
    )
    operations.truncate(broker, topic, 1, before_time=ts_of(200))
    assert broker.catalog.partition(topic, 1).log_start_offset == 200
    # Older than the log start: nothing to do, nothing journaled.
    quiet = operations.truncate(broker, topic, 1, before_time=T0 - 1)
    assert not quiet.changed and quiet.cycle_id is None
    # After every record: the whole partition.
    operations.truncate(broker, topic, 1, before_time=ts_of(RECORDS) + 1)
    assert broker.catalog.partition(topic, 1).log_start_offset == RECORDS
    assert read_all(broker, topic, 1) == []
    assert_consistent(broker, data_dir, topic)


def test_truncate_refuses_an_offset_outside_the_log_and_changes_nothing(
    broker: Broker, data_dir: Path, topic: str
) -> None:
    operations.truncate(broker, topic, 0, before_offset=50)
    before = state(broker, data_dir)
    with pytest.raises(InvalidInput, match=r"invalid offset 49 for events/0: .* log start 50 to the log end 300"):
        operations.truncate(broker, topic, 0, before_offset=49)
    with pytest.raises(InvalidInput, match="log end 300"):
        operations.truncate(broker, topic, 0, before_offset=301)
    with pytest.raises(InvalidInput, match="exactly one"):
        operations.truncate(broker, topic, 0)
    with pytest.raises(NotFound, match="no partition 7"):
        operations.truncate(broker, topic, 7, before_offset=1)
    with pytest.raises(NotFound, match="does not exist"):
        operations.truncate(broker, "nope", 0, before_offset=1)
    assert state(broker, data_dir) == before


def test_truncate_to_the_log_start_does_nothing(broker: Broker, data_dir: Path, topic: str) -> None:
    before = state(broker, data_dir)
    result = operations.truncate(broker, topic, 0, before_offset=0)
    assert not result.changed and result.cycle_id is None and result.to_json()["segments_deleted"] == 0
    assert state(broker, data_dir) == before


# -- delete the oldest segments, purge --------------------------------------------------------------


def test_delete_oldest_removes_n_sealed_segments_and_moves_the_log_start_to_the_next(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    segments = sealed_bases(broker, topic, 0)
    result = operations.delete_oldest(broker, topic, 0, 3)
    assert (result.operation, result.segments_deleted) == ("delete_oldest", 3)
    assert broker.catalog.partition(topic, 0).log_start_offset == segments[3][0]
    assert log_files(data_dir, topic, 0)[0] == segments[3][0]
    (request,) = journal.actions(action="truncate")
    assert request.details["oldest_segments"] == 3 and request.details["operation"] == "delete_oldest"
    assert_consistent(broker, data_dir, topic)

    before = state(broker, data_dir)
    with pytest.raises(InvalidInput, match=r"has \d+ sealed segment\(s\), fewer than 99"):
        operations.delete_oldest(broker, topic, 0, 99)
    with pytest.raises(InvalidInput, match="at least 1"):
        operations.delete_oldest(broker, topic, 0, 0)
    assert state(broker, data_dir) == before


def test_purge_rolls_and_deletes_everything_and_offsets_go_on(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    total = sum(s.size_bytes for p in (0, 1) for s in broker.catalog.segments(topic, p))
    result = operations.purge(broker, topic, actor="bob")

    assert (result.operation, result.bytes_freed, result.messages) == ("purge", total, 2 * RECORDS)
    for p in (0, 1):
        row = broker.catalog.partition(topic, p)
        assert (row.log_start_offset, row.next_offset) == (RECORDS, RECORDS)
        (active,) = broker.catalog.segments(topic, p)
        assert (active.base_offset, active.size_bytes, active.sealed) == (RECORDS, 0, False)
        assert log_files(data_dir, topic, p) == [RECORDS]
        assert positions(broker, topic, p) == {"sub": RECORDS, "rd": RECORDS}
    rows = journal.actions(cycle=result.cycle_id, limit=None)
    assert sum(a.action == "roll" for a in rows) == 2
    (request,) = [a for a in rows if a.action == "purge"]
    assert (request.actor, request.trigger, request.messages, request.bytes) == (
        "bob",
        "manual",
        600,
        total,
    )

    produce(broker, topic, 0, 5)
    assert [r.offset for r in read_all(broker, topic, 0)] == list(range(RECORDS, RECORDS + 5))
    assert_consistent(broker, data_dir, topic)
    # Purging what is left: the new records only.
    again = operations.purge(broker, topic, actor="bob")
    assert again.messages == 5 and [p.segments_deleted for p in again.partitions] == [1, 0]


def test_an_append_between_building_and_applying_is_planned_again(
    broker: Broker, data_dir: Path, journal: Journal, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor re-checks the work: the active segment grew since, so the first
    attempt is skipped (journaled) and the operation builds its work again."""
    real_execute = operations.execute
    calls = []

    def execute(*args, **kwargs):
        if not calls:
            produce(broker, topic, 0, 3)
        calls.append(1)
        return real_execute(*args, **kwargs)

    monkeypatch.setattr(operations, "execute", execute)
    result = operations.purge(broker, topic)
    assert len(calls) == 2
    assert broker.catalog.partition(topic, 0).log_start_offset == RECORDS + 3
    (skipped,) = journal.actions(action="skipped")
    assert skipped.cycle != result.cycle_id and "gone or changed" in skipped.details["message"]
    assert_consistent(broker, data_dir, topic)


def test_manual_operations_leave_the_quota_state_to_the_prune_cycle(
    broker: Broker, journal: Journal, topic: str
) -> None:
    with broker.catalog.write():
        EngineState(broker.catalog).set_quota_state(topic, True, NOW)
    operations.truncate(broker, topic, 0, before_offset=40)
    assert EngineState(broker.catalog).quota_state(topic).exceeded
    assert journal.actions(action="quota_cleared") == []


def test_a_truncate_killed_after_the_log_start_moved_is_finished_by_recovery(data_dir: Path) -> None:
    with Broker(data_dir) as broker:
        make_topic(broker, TOPIC, records=RECORDS)
        cut = sealed_bases(broker, TOPIC, 0)[3][0]
    script = (
        "import sys; from pathlib import Path; from engine.broker import Broker; from engine.prune import operations\n"
        "with Broker(Path(sys.argv[1])) as b: operations.truncate(b, 'events', 0, before_offset=int(sys.argv[2]))\n"
    )
    env = subprocess_env(**{KILL_AT_ENV: "after_segment_unlinked"})
    died = subprocess.run(
        [sys.executable, "-c", script, str(data_dir), str(cut)], env=env, cwd=REPO, capture_output=True, timeout=120
    )
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()
    with Broker(data_dir) as broker:
        assert broker.catalog.partition(TOPIC, 0).log_start_offset == cut  # the durable point was reached
        (cycle_id,) = recover_interrupted(broker)
        journal = Journal(broker.catalog)
        assert journal.cycle(cycle_id).status == "interrupted"
        assert {a.status for a in journal.actions(cycle=cycle_id, limit=None)} == {"applied"}
        assert log_files(data_dir, TOPIC, 0)[0] == cut
        assert_consistent(broker, data_dir, TOPIC)


# -- hold and pause --------------------------------------------------------------------------------


def test_hold_refuses_every_deleting_operation_until_released(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    held = operations.set_hold(broker, topic, True, actor="carol")
    assert held.changed and held.to_json() == {"operation": "hold", "changed": True, "topic": topic, "hold": True}
    assert broker.policy(topic)["hold"] is True
    (change,) = [c for c in journal.policy_changes(topic=topic) if c["field"] == "hold"]
    assert (change["actor"], change["old"], change["new"]) == ("carol", None, "on")
    (action,) = journal.actions(action="hold")
    assert (action.topic, action.trigger, action.actor, action.cycle) == (topic, "manual", "carol", None)

    before = state(broker, data_dir)
    message = f"topic {topic} is on hold: release it first"
    for attempt in (
        lambda: operations.truncate(broker, topic, 0, before_offset=50),
        lambda: operations.delete_oldest(broker, topic, 0, 1),
        lambda: operations.purge(broker, topic),
    ):
        with pytest.raises(InvalidInput, match=message):
            attempt()
    assert not operations.set_hold(broker, topic, True).changed  # already: nothing journaled
    assert state(broker, data_dir) == before

    assert operations.set_hold(broker, topic, False).changed
    assert len(journal.actions(action="release")) == 1
    assert operations.truncate(broker, topic, 0, before_offset=50).changed


def test_a_held_topic_or_a_paused_engine_refuses_the_topics_deletion(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    """A hold keeps everything of a topic, by any path, and a pause stops all deletion:
    deleting the topic is one more path. It went, held or paused."""
    operations.set_hold(broker, topic, True)
    before = state(broker, data_dir)
    with pytest.raises(InvalidInput, match=f"topic {topic} is on hold: release it first"):
        broker.delete_topic(topic)
    assert state(broker, data_dir) == before
    operations.set_hold(broker, topic, False)
    operations.pause(broker)
    before = state(broker, data_dir)
    with pytest.raises(InvalidInput, match="the engine is paused, which stops all deletion: resume it first"):
        broker.delete_topic(topic)
    assert state(broker, data_dir) == before
    operations.resume(broker)
    broker.delete_topic(topic)
    assert [a.topic for a in journal.actions(action="topic_deleted")] == [topic]


def test_a_hold_whose_action_cannot_be_journaled_changes_nothing(
    broker: Broker, journal: Journal, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy change and the ``hold`` action are one transaction: where writing
    the action fails (a full disk), the topic is not left held with no action saying
    who held it. They were two, and the hold stayed."""

    def full_disk(*_: object, **__: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(Journal, "append", full_disk)
    with pytest.raises(OSError):
        operations.set_hold(broker, topic, True, actor="carol")
    monkeypatch.undo()
    assert broker.policy(topic)["hold"] is False
    assert [c for c in journal.policy_changes(topic=topic) if c["field"] == "hold"] == []


def test_pause_refuses_deletion_and_is_journaled_once(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    assert operations.pause(broker, actor="dan").changed
    assert not operations.pause(broker).changed
    assert EngineState(broker.catalog).is_paused()
    before = state(broker, data_dir)
    with pytest.raises(InvalidInput, match="paused"):
        operations.purge(broker, topic)
    assert state(broker, data_dir) == before
    assert operations.resume(broker).to_json() == {"operation": "resume", "changed": True, "paused": False}
    assert [a.action for a in journal.actions()] == ["resume", "pause"]
    assert journal.actions(action="pause")[0].actor == "dan"
    assert operations.purge(broker, topic).changed


# -- groups ------------------------------------------------------------------------------------------


def test_expire_group_removes_it_and_journals_its_positions(broker: Broker, journal: Journal, topic: str) -> None:
    broker.commit(topic, "sub", 1, 42)
    result = operations.expire_group(broker, topic, "sub", actor="erin")
    assert [g.name for g in broker.catalog.groups(topic)] == ["rd"]
    assert result.to_json() == {
        "operation": "group_expire", "topic": topic, "group": "sub", "kind": "subscriber",
        "positions": {"0": 0, "1": 42},
    }  # fmt: skip
    (row,) = journal.actions(action="group_expired")
    assert (row.trigger, row.actor, row.cycle, row.topic) == ("manual", "erin", None, topic)
    assert row.details == {"group": "sub", "kind": "subscriber", "positions": {"0": 0, "1": 42}}
    with pytest.raises(NotFound, match="group 'sub' does not exist"):
        operations.expire_group(broker, topic, "sub")


def test_move_group_forwards_back_by_time_and_to_the_ends(broker: Broker, journal: Journal, topic: str) -> None:
    broker.commit(topic, "sub", 0, 100, at_ms=T0)
    operations.truncate(broker, topic, 0, before_offset=20)

    back = operations.move_group(broker, topic, "sub", 0, to_offset=30)
    assert back.to_json() == {
        "operation": "group_move", "topic": topic, "group": "sub", "kind": "subscriber",
        "partition": 0, "old_position": 100, "new_position": 30, "messages": -70,
    }  # fmt: skip
    assert broker.catalog.group(topic, "sub").positions[0] == (30, T0)  # the commit time is the group's own
    (row,) = journal.actions(action="manual_move")
    assert (row.start_offset, row.end_offset, row.messages, row.trigger) == (100, 30, -70, "manual")

    assert operations.move_group(broker, topic, "sub", 0, to_time=ts_of(150) - 3).positions[0] == (30, 150)
    assert operations.move_group(broker, topic, "sub", 0, to="earliest").positions[0] == (150, 20)
    assert operations.move_group(broker, topic, "sub", 0, to="latest").positions[0] == (20, RECORDS)
    assert operations.move_group(broker, topic, "sub", 0, to_time=ts_of(5)).positions[0] == (RECORDS, 20)
    assert len(journal.actions(action="manual_move")) == 5


def test_move_group_refuses_below_the_log_start_and_past_the_end(broker: Broker, data_dir: Path, topic: str) -> None:
    operations.truncate(broker, topic, 0, before_offset=20)
    before = state(broker, data_dir)
    with pytest.raises(InvalidInput, match=r"invalid offset 19 for events/0: .*log start 20 \(older data is deleted\)"):
        operations.move_group(broker, topic, "sub", 0, to_offset=19)
    with pytest.raises(InvalidInput, match="log end 300"):
        operations.move_group(broker, topic, "rd", 0, to_offset=301)
    with pytest.raises(InvalidInput, match="exactly one"):
        operations.move_group(broker, topic, "rd", 0, to_offset=30, to="latest")
    with pytest.raises(NotFound):
        operations.move_group(broker, topic, "ghost", 0, to="latest")
    assert state(broker, data_dir) == before


# -- the backlog-quota gate of appends ----------------------------------------------------------------------


def _quota_topic(broker: Broker, backlog_policy: str, name: str = "quota") -> str:
    broker.create_topic(name, 1, {"backlog_size": "1 KiB", "backlog_policy": backlog_policy})
    return name


def _set_exceeded(broker: Broker, topic: str, exceeded: bool) -> None:
    with broker.catalog.write():
        EngineState(broker.catalog).set_quota_state(topic, exceeded, broker.clock())


def _records(n: int) -> list[NewRecord]:
    return [NewRecord(b"v%d" % i, None, T0 + i) for i in range(n)]


def test_producer_exception_refuses_appends_at_once_while_over_quota(broker: Broker, data_dir: Path) -> None:
    topic = _quota_topic(broker, "producer_exception")
    broker.append(topic, 0, _records(3))  # not over quota: appends go through
    _set_exceeded(broker, topic, True)
    before = state(broker, data_dir)
    started = time.monotonic()
    with pytest.raises(
        QuotaExceeded, match=r"topic quota is over its backlog quota \(backlog_policy=producer_exception\)"
    ):
        broker.append(topic, 0, _records(3))
    assert time.monotonic() - started < 1.0
    assert state(broker, data_dir) == before
    _set_exceeded(broker, topic, False)
    assert broker.append(topic, 0, _records(2)).next_offset == 5


def test_a_stale_quota_state_does_not_stop_a_topic_without_a_producer_quota(broker: Broker) -> None:
    for name, policy in (
        ("evicting", {"backlog_size": "1 KiB", "backlog_policy": "consumer_backlog_eviction"}),
        ("unlimited", {}),
    ):
        broker.create_topic(name, 1, policy)
        _set_exceeded(broker, name, True)
        assert broker.append(name, 0, _records(1)).next_offset == 1


def _hold_timeout(broker: Broker, data_dir: Path, timeout: str) -> None:
    (data_dir / "ebb.toml").write_text(f'[engine]\nproducer_hold_timeout = "{timeout}"\n')
    broker.reload_config()


def test_producer_request_hold_waits_then_times_out(broker: Broker, data_dir: Path) -> None:
    topic = _quota_topic(broker, "producer_request_hold")
    _hold_timeout(broker, data_dir, "400ms")
    _set_exceeded(broker, topic, True)
    started = time.monotonic()
    with pytest.raises(QuotaExceeded, match=r"backlog_policy=producer_request_hold\): held 0.4 s and it did not clear"):
        broker.append(topic, 0, _records(1))
    assert 0.4 <= time.monotonic() - started < 5
    assert broker.catalog.partition(topic, 0).next_offset == 0

    _hold_timeout(broker, data_dir, "0")  # 0: no hold, fail at once
    started = time.monotonic()
    with pytest.raises(QuotaExceeded):
        broker.append(topic, 0, _records(1))
    assert time.monotonic() - started < 0.3


def test_producer_request_hold_goes_on_when_another_process_clears_the_quota(broker: Broker, data_dir: Path) -> None:
    topic = _quota_topic(broker, "producer_request_hold")
    _hold_timeout(broker, data_dir, "30s")
    _set_exceeded(broker, topic, True)

    def clear_later() -> None:
        time.sleep(0.5)
        with Broker(data_dir) as other:  # its own connection, as a prune cycle elsewhere
            _set_exceeded(other, topic, False)

    clearer = threading.Thread(target=clear_later)
    started = time.monotonic()
    clearer.start()
    result = broker.append(topic, 0, _records(4))
    waited = time.monotonic() - started
    clearer.join()
    assert result.next_offset == 4 and 0.5 <= waited < 10


def test_produce_says_what_was_acknowledged_before_the_quota_stopped_it(broker: Broker) -> None:
    topic = _quota_topic(broker, "producer_exception")

    def records():
        yield from _records(1000)  # one full batch: appended before the next record is asked for
        _set_exceeded(broker, topic, True)
        yield from _records(10)

    acked = []
    with pytest.raises(
        QuotaExceeded,
        match=r"1000 record\(s\) before it were acknowledged \(partition 0 offsets 0..999\), the rest were not written",
    ):
        broker.produce(topic, records(), 0, on_ack=lambda a: acked.append((a.partition, a.next_offset)))
    assert acked == [(0, 1000)] and broker.catalog.partition(topic, 0).next_offset == 1000
