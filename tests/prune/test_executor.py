"""The executor (SPEC §5): applying a plan to real data, journaling every action,
re-checking the plan against the store, dry runs, the pause, and one topic's failure
leaving the others alone. Also the work model built from plan tables."""

from __future__ import annotations

import errno
import shutil
import threading
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from engine.broker import Broker
from engine.datadir import PRUNE_LOCK_NAME
from engine.errors import StoreError
from engine.faults import IOFault, inject
from engine.journal.journal import Entry, Journal
from engine.journal.state import EngineState
from engine.prune import executor as executor_module
from engine.prune import tables
from engine.prune.executor import execute, recover_interrupted
from engine.prune.plan_work import work_from_plan
from engine.prune.work import (
    ExpiredGroup,
    GroupMove,
    PartitionWork,
    SegmentDeletion,
    Skip,
    TopicWork,
)
from engine.store.batch import NewRecord
from engine.store.lock import FileLock
from engine.store.partition import PartitionWriter, unlink_detached
from engine.store.segment import remove_files
from tests.support.prune_driver import (
    NOW,
    assert_records,
    cut_work,
    make_topic,
    produce,
    read_all,
    sealed_bases,
)

TOPIC = "events"
OTHER = "orders"


@pytest.fixture
def journal(broker: Broker) -> Journal:
    return Journal(broker.catalog)


@pytest.fixture
def topic(broker: Broker) -> str:
    make_topic(broker, TOPIC)
    assert len(sealed_bases(broker, TOPIC, 0)) >= 6 and len(sealed_bases(broker, TOPIC, 1)) >= 6
    return TOPIC


def files(data_dir: Path) -> dict[str, bytes]:
    """Every file of the store, by path, with its bytes."""
    return {
        str(p.relative_to(data_dir)): p.read_bytes() for p in sorted((data_dir / "topics").rglob("*")) if p.is_file()
    }


def segment_files(data_dir: Path, topic: str, partition: int) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (data_dir / "topics" / topic / str(partition)).glob("*.log"))


def catalog_rows(broker: Broker) -> dict[str, list[tuple]]:
    db = broker.catalog.db.conn
    return {
        table: sorted(db.execute(f"SELECT * FROM {table}").fetchall())
        for table in ("topics", "partitions", "segments", "groups", "positions", "policies")
    }


def assert_consistent(broker: Broker, data_dir: Path, topic: str) -> None:
    """Catalog segments are exactly the files, no half-deleted leftovers, and every
    record from the log start on reads back as produced."""
    for row in broker.catalog.partitions(topic):
        pdir = data_dir / "topics" / topic / str(row.partition)
        assert not list(pdir.glob("*.deleted"))
        assert [s.base_offset for s in broker.catalog.segments(topic, row.partition)] == segment_files(
            data_dir, topic, row.partition
        )
        assert_records(
            read_all(broker, topic, row.partition), topic, row.partition, row.log_start_offset, row.next_offset
        )


def by_action(journal: Journal, cycle: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for a in reversed(journal.actions(cycle=cycle, limit=None)):
        out.setdefault(a.action, []).append(a)
    return out


# -- applying ------------------------------------------------------------------------------


def test_deletes_segments_moves_the_log_start_and_journals_each_action(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    s0, s1 = sealed_bases(broker, topic, 0), sealed_bases(broker, topic, 1)
    cut0, cut1 = s0[3][0], s1[2][0]
    doomed_bytes = sum(s.size_bytes for s in broker.catalog.segments(topic, 0)[:3]) + sum(
        s.size_bytes for s in broker.catalog.segments(topic, 1)[:2]
    )
    work = cut_work(broker, topic, {0: cut0, 1: cut1})

    result = execute(broker, [work], now=NOW, trigger="manual", actor="alice", scope=[topic], spark_master="local[1]")

    assert (result.status, result.planned, result.applied, result.bytes_freed) == ("done", 5, 5, doomed_bytes)
    assert segment_files(data_dir, topic, 0) == [b for b, _ in s0[3:]] + [s0[-1][1]]
    assert segment_files(data_dir, topic, 1) == [b for b, _ in s1[2:]] + [s1[-1][1]]
    assert [r.log_start_offset for r in broker.catalog.partitions(topic)] == [cut0, cut1]
    assert broker.read(topic, 0, 0, 1)[0].offset == cut0
    assert_consistent(broker, data_dir, topic)

    cycle = journal.cycle(result.cycle_id)
    assert {
        k: getattr(cycle, k)
        for k in (
            "trigger",
            "actor",
            "scope",
            "now",
            "status",
            "planned",
            "applied",
            "bytes_freed",
            "spark_master",
            "error",
        )
    } == {
        "trigger": "manual",
        "actor": "alice",
        "scope": [topic],
        "now": NOW,
        "status": "done",
        "planned": 5,
        "applied": 5,
        "bytes_freed": doomed_bytes,
        "spark_master": "local[1]",
        "error": None,
    }
    actions = by_action(journal, result.cycle_id)
    assert set(actions) == {"move_log_start", "delete_segment"}
    assert [(a.partition, a.start_offset, a.end_offset, a.messages, a.status) for a in actions["move_log_start"]] == [
        (0, 0, cut0, cut0, "applied"),
        (1, 0, cut1, cut1, "applied"),
    ]
    deletions = actions["delete_segment"]
    assert [(a.partition, a.segment, a.end_offset) for a in deletions] == [
        *((0, b, n) for b, n in s0[:3]),
        *((1, b, n) for b, n in s1[:2]),
    ]
    assert all(a.status == "applied" and a.reason == "DELETE_TIME" and a.bytes > 0 for a in deletions)
    assert all((a.trigger, a.actor) == ("manual", "alice") for a in deletions)
    assert sum(a.bytes for a in deletions) == doomed_bytes
    # Appends go on after the prune.
    produce(broker, topic, 0, 40)
    assert_consistent(broker, data_dir, topic)


def test_segments_already_below_the_log_start_are_journaled_as_removed(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    s0 = sealed_bases(broker, topic, 0)
    with broker.catalog.write():  # an earlier cycle moved the log start (message granularity)
        broker.catalog.db.execute(
            "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition = 0", (s0[1][1] + 5, topic)
        )
    work = cut_work(broker, topic, {0: s0[1][1]}, reason="DELETE_BELOW_LOG_START")
    assert work.partitions[0].new_log_start_offset == work.partitions[0].log_start_offset == s0[1][1] + 5
    result = execute(broker, [work], now=NOW)
    assert (result.applied, result.skipped) == (2, {})
    assert segment_files(data_dir, topic, 0)[0] == s0[2][0]
    actions = by_action(journal, result.cycle_id)
    assert set(actions) == {"delete_segment"}
    # Taking the partition lock removes what is wholly below the log start.
    assert [(a.status, a.details) for a in actions["delete_segment"]] == [("applied", {"already_removed": True})] * 2
    assert_consistent(broker, data_dir, topic)


def test_roll_seals_the_active_segment_and_is_journaled(broker: Broker, journal: Journal, topic: str) -> None:
    active = broker.catalog.segments(topic, 0)[-1]
    assert not active.sealed and active.size_bytes > 0
    work = TopicWork(topic, journal.policy_version(topic), False, (), (PartitionWork(topic, 0, 0, 0, (), (), True),))
    result = execute(broker, [work], now=NOW)
    segments = broker.catalog.segments(topic, 0)
    assert segments[-2].base_offset == active.base_offset and segments[-2].sealed
    assert (segments[-1].base_offset, segments[-1].size_bytes, segments[-1].sealed) == (active.next_offset, 0, False)
    (roll,) = by_action(journal, result.cycle_id)["roll"]
    assert (roll.segment, roll.end_offset, roll.bytes, roll.status) == (
        active.base_offset,
        active.next_offset,
        active.size_bytes,
        "applied",
    )


def test_group_moves_expiry_and_positions_never_going_back(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    s0 = sealed_bases(broker, topic, 0)
    cut = s0[2][0]
    broker.create_group(topic, "lagging", "reader")  # at 0: moved up to the cut
    broker.create_group(topic, "slow", "subscriber")  # TTL, then eviction, then overrun
    broker.create_group(topic, "ahead", "reader")
    broker.commit(topic, "ahead", 0, cut + 30)  # past what the plan planned: stays
    broker.create_group(topic, "gone", "reader", "latest")
    with broker.catalog.write():  # its last commit is long before the plan's now
        broker.catalog.db.execute("UPDATE positions SET committed_at = 5 WHERE group_name = 'gone'")
    broker.create_group(topic, "fresh", "subscriber", "latest")
    lagging_at = broker.catalog.group(topic, "lagging").positions[0][1]
    base = cut_work(broker, topic, {0: cut})
    moves = (
        GroupMove("ahead", "reader", 0, 0, cut, (Skip("reader_moved", cut),)),
        GroupMove("lagging", "reader", 0, 0, cut, (Skip("reader_moved", cut),)),
        GroupMove(
            "slow",
            "subscriber",
            0,
            0,
            cut,
            (Skip("ttl_advance", 10), Skip("backlog_eviction", 7), Skip("subscriber_overrun", cut - 17)),
        ),
    )
    work = replace(
        base, expired_groups=(ExpiredGroup("gone", "reader"),), partitions=(replace(base.partitions[0], moves=moves),)
    )
    broker.alter_topic(topic, {"subscription_expiry": "1d"})
    work = replace(work, policy_version=journal.policy_version(topic))

    result = execute(broker, [work], now=NOW)

    assert result.skipped == {} and result.failed == {}
    groups = {g.name: g for g in broker.catalog.groups(topic)}
    assert "gone" not in groups
    assert groups["lagging"].positions[0] == (cut, lagging_at)  # moved; its commit time is its own
    assert groups["slow"].positions[0][0] == cut
    assert groups["ahead"].positions[0][0] == cut + 30
    assert groups["fresh"].positions[0][0] == 300
    actions = by_action(journal, result.cycle_id)
    assert [(a.details, a.status) for a in actions["group_expired"]] == [
        ({"group": "gone", "kind": "reader"}, "applied")
    ]
    moved = {
        (a.details["group"], a.action): a
        for k in ("reader_moved", "ttl_advance", "backlog_eviction", "subscriber_overrun")
        for a in actions.get(k, [])
    }
    assert moved["ahead", "reader_moved"].status == "skipped"
    assert moved["lagging", "reader_moved"].status == "applied"
    assert (moved["lagging", "reader_moved"].messages, moved["lagging", "reader_moved"].end_offset) == (cut, cut)
    chain = [moved["slow", k] for k in ("ttl_advance", "backlog_eviction", "subscriber_overrun")]
    assert [(a.start_offset, a.end_offset, a.messages, a.status) for a in chain] == [
        (0, 10, 10, "applied"),
        (10, 17, 7, "applied"),
        (17, cut, cut - 17, "applied"),
    ]
    assert_consistent(broker, data_dir, topic)


def test_quota_state_transitions_are_journaled_once(broker: Broker, journal: Journal, topic: str) -> None:
    state = EngineState(broker.catalog)
    version = journal.policy_version(topic)
    exceeded = TopicWork(topic, version, True, (), ())
    cleared = TopicWork(topic, version, False, (), ())
    for work in (cleared, exceeded, exceeded, cleared, cleared):
        execute(broker, [work], now=NOW + 1)
        assert state.quota_state(topic).exceeded is work.quota_exceeded
    assert [a.action for a in journal.actions()] == ["quota_cleared", "quota_exceeded"]
    assert state.quota_state(topic).since == NOW + 1


# -- dry run and pause ---------------------------------------------------------------------


def test_dry_run_changes_nothing(broker: Broker, data_dir: Path, journal: Journal, topic: str) -> None:
    broker.create_group(topic, "r", "reader")
    work = cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[3][0]}, quota_exceeded=True)
    work = replace(
        work,
        partitions=(
            replace(
                work.partitions[0], moves=(GroupMove("r", "reader", 0, 0, 50, (Skip("reader_moved", 50),)),), roll=True
            ),
        ),
    )
    before_files, before_rows = files(data_dir), catalog_rows(broker)

    result = execute(broker, [work], now=NOW, dry_run=True)

    assert (result.status, result.planned, result.applied, result.bytes_freed) == ("dry_run", 3, 0, 0)
    assert files(data_dir) == before_files
    assert catalog_rows(broker) == before_rows
    assert journal.actions() == []
    assert [(c.status, c.planned, c.applied) for c in journal.cycles()] == [("dry_run", 3, 0)]
    assert EngineState(broker.catalog).quota_state(topic).exceeded is False


def test_paused_changes_nothing_but_the_quota_state(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    state = EngineState(broker.catalog)
    state.set_paused(True)
    work = cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[3][0]}, quota_exceeded=True)
    before_files, before_rows = files(data_dir), catalog_rows(broker)

    result = execute(broker, [work], now=NOW)

    assert (result.status, result.planned, result.applied) == ("paused", 3, 0)
    assert files(data_dir) == before_files and catalog_rows(broker) == before_rows
    assert state.quota_state(topic).exceeded is True
    assert [a.action for a in journal.actions()] == ["quota_exceeded"]
    assert journal.cycle(result.cycle_id).status == "paused"

    state.set_paused(False)
    assert execute(broker, [work], now=NOW).applied == 3
    assert_consistent(broker, data_dir, topic)


# -- re-checks ---------------------------------------------------------------------------------


def test_a_segment_gone_or_changed_since_the_plan_skips_the_partition(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    s0 = sealed_bases(broker, topic, 0)
    stale = cut_work(broker, topic, {0: s0[2][0], 1: sealed_bases(broker, topic, 1)[2][0]})
    execute(broker, [cut_work(broker, topic, {0: s0[1][0]})], now=NOW)  # another cycle got there first
    p0 = stale.partitions[0]
    # A plan from the new log start, but with a segment whose extent is not the catalog's.
    changed = replace(p0, log_start_offset=s0[1][0], deletions=(replace(p0.deletions[1], next_offset=s0[1][1] - 1),))
    before = segment_files(data_dir, topic, 0)

    for work, planned, why in (
        (stale, 2, f"log start is {s0[1][0]}, the plan assumed 0"),
        (replace(stale, partitions=(changed,)), 1, f"segment {s0[1][0]} is gone or changed since the plan"),
    ):
        result = execute(broker, [work], now=NOW)
        assert result.skipped == {f"{topic}/0": why}
        assert segment_files(data_dir, topic, 0) == before
        assert broker.catalog.partition(topic, 0).log_start_offset == s0[1][0]
        actions = by_action(journal, result.cycle_id)
        assert [a.status for a in actions["delete_segment"] if a.partition == 0] == ["skipped"] * planned
        (skipped,) = actions["skipped"]
        assert (skipped.partition, skipped.reason, skipped.details) == (0, "STALE_PLAN", {"message": why})
    # The other partition of the first stale plan was applied.
    assert broker.catalog.partition(topic, 1).log_start_offset == stale.partitions[1].new_log_start_offset
    assert_consistent(broker, data_dir, topic)


def test_a_policy_changed_since_the_plan_skips_the_topic(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    work = cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[3][0]})
    broker.alter_topic(topic, {"hold": "true"})
    before_files, before_rows = files(data_dir), catalog_rows(broker)

    result = execute(broker, [work], now=NOW)

    assert result.skipped == {topic: "policy changed since the plan"} and result.applied == 0
    assert files(data_dir) == before_files and catalog_rows(broker) == before_rows
    actions = by_action(journal, result.cycle_id)
    assert {a.status for a in actions["delete_segment"] + actions["move_log_start"]} == {"skipped"}
    assert actions["skipped"][0].details == {"message": "policy changed since the plan"}


@pytest.mark.parametrize("change", ["subscriber_moved_back", "new_subscriber_below_the_cut"])
def test_a_subscriber_below_what_the_plan_assumed_skips_the_partition(
    broker: Broker, data_dir: Path, journal: Journal, topic: str, change: str
) -> None:
    cut = sealed_bases(broker, topic, 0)[3][0]
    broker.create_group(topic, "sub", "subscriber", "latest")
    work = cut_work(broker, topic, {0: cut, 1: sealed_bases(broker, topic, 1)[1][0]})
    if change == "subscriber_moved_back":
        broker.commit(topic, "sub", 0, cut - 1)
    else:
        broker.create_group(topic, "late", "subscriber", "earliest")
        broker.commit(topic, "late", 1, 300)
    before = segment_files(data_dir, topic, 0)

    result = execute(broker, [work], now=NOW)

    assert set(result.skipped) == {f"{topic}/0"}
    assert "below what the plan assumed" in result.skipped[f"{topic}/0"]
    assert segment_files(data_dir, topic, 0) == before and broker.catalog.partition(topic, 0).log_start_offset == 0
    assert broker.catalog.partition(topic, 1).log_start_offset > 0  # the other partition went ahead
    assert_consistent(broker, data_dir, topic)


def test_a_group_that_committed_since_its_planned_expiry_skips_the_topic(
    broker: Broker, journal: Journal, topic: str
) -> None:
    broker.alter_topic(topic, {"subscription_expiry": "1h"})
    broker.create_group(topic, "alive", "subscriber")  # committed now: not stale at NOW (~ a year ago)
    work = replace(
        cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[1][0]}),
        expired_groups=(ExpiredGroup("alive", "subscriber"),),
    )
    result = execute(broker, [work], now=NOW + 2 * 3_600_000)
    assert "committed since the plan expired it" in result.skipped[topic]
    assert broker.catalog.group(topic, "alive")
    assert broker.catalog.partition(topic, 0).log_start_offset == 0


# -- failures --------------------------------------------------------------------------------


def test_a_topic_whose_partition_vanished_fails_alone(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    make_topic(broker, OTHER)
    failing = cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[2][0]})
    healthy = cut_work(broker, OTHER, {1: sealed_bases(broker, OTHER, 1)[2][0]})
    shutil.rmtree(data_dir / "topics" / topic / "0")

    result = execute(broker, [failing, healthy], now=NOW)

    assert set(result.failed) == {topic} and str(data_dir / "topics" / topic / "0") in result.failed[topic]
    assert (
        result.applied == 2
        and broker.catalog.partition(OTHER, 1).log_start_offset == healthy.partitions[0].new_log_start_offset
    )
    cycle = journal.cycle(result.cycle_id)
    assert cycle.status == "done" and topic in cycle.error
    (failed,) = journal.actions(action="topic_failed")
    assert failed.topic == topic and failed.details["error"] == result.failed[topic]
    assert {a.status for a in journal.actions(cycle=result.cycle_id, topic=topic, action="delete_segment")} == {
        "rolled_back"
    }
    assert_consistent(broker, data_dir, OTHER)


def test_a_deletion_failing_after_the_log_start_moved_is_finished_and_journaled(
    broker: Broker, data_dir: Path, journal: Journal, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(broker, OTHER)
    s0 = sealed_bases(broker, topic, 0)
    failing = cut_work(broker, topic, {0: s0[3][0]})
    healthy = cut_work(broker, OTHER, {0: sealed_bases(broker, OTHER, 0)[1][0]})
    # The second unlink fails (outside the partition lock, after the renames).
    with inject(IOFault("unlink", errno.EIO, target="deleted", skip=1)) as (fault,):
        result = execute(broker, [failing, healthy], now=NOW)
    assert fault.fired == 1

    assert set(result.failed) == {topic} and result.skipped == {}
    assert broker.catalog.partition(OTHER, 0).log_start_offset == healthy.partitions[0].new_log_start_offset
    # Past the durable point: the log start moved, and the store finished the deletion.
    assert broker.catalog.partition(topic, 0).log_start_offset == s0[3][0]
    assert segment_files(data_dir, topic, 0)[0] == s0[3][0]
    statuses = [
        (a.segment, a.status, a.details) for a in reversed(journal.actions(topic=topic, action="delete_segment"))
    ]
    # Unlinks are journaled a batch at a time: the failed batch is settled by its
    # effect (the log start is past it).
    assert statuses == [(base, "applied", {"completed_after_error": True}) for base, _next in s0[:3]]
    assert result.applied == 3 + 1
    assert_consistent(broker, data_dir, topic)


def test_a_plan_breaking_the_cut_rules_is_refused(broker: Broker, data_dir: Path, journal: Journal, topic: str) -> None:
    s0 = sealed_bases(broker, topic, 0)
    work = cut_work(broker, topic, {0: s0[2][0]})
    bad = replace(work, partitions=(replace(work.partitions[0], new_log_start_offset=s0[1][0]),))
    before = files(data_dir)
    result = execute(broker, [bad], now=NOW)
    assert "above its new log start" in result.failed[topic]
    assert files(data_dir) == before


def test_recovery_with_nothing_interrupted_does_nothing(broker: Broker, journal: Journal, topic: str) -> None:
    execute(broker, [cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[1][0]})], now=NOW)
    assert recover_interrupted(broker) == ()
    assert [c.status for c in journal.cycles()] == ["done"]


# -- the work model --------------------------------------------------------------------------


def plan_tables(
    broker: Broker, topic: str, cut: int, *, quota: bool = False, extra_keep: int = 0
) -> dict[str, pa.Table]:
    """Plan tables as the planner would give them for cutting partition 0 at ``cut``
    (a segment boundary), with a lagging reader, plus ``extra_keep`` kept segments of
    a large imaginary topic."""
    seg_rows, part_rows, group_rows = [], [], []
    for row in broker.catalog.partitions(topic):
        new = cut if row.partition == 0 else row.log_start_offset
        deleted = [s for s in broker.catalog.segments(topic, row.partition) if s.sealed and s.next_offset <= new]
        for s in broker.catalog.segments(topic, row.partition):
            gone = s in deleted
            seg_rows.append(
                {
                    "topic": topic,
                    "partition": row.partition,
                    "base_offset": s.base_offset,
                    "next_offset": s.next_offset,
                    "size_bytes": s.size_bytes,
                    "sealed": s.sealed,
                    "decision": "delete" if gone else "keep",
                    "reason": "DELETE_TIME" if gone else ("KEEP_ACTIVE" if not s.sealed else "KEEP_WITHIN_TIME"),
                    "eligible_at": None,
                    "detail": None,
                }
            )
        part_rows.append(
            {
                "topic": topic,
                "partition": row.partition,
                "log_start_offset": row.log_start_offset,
                "new_log_start_offset": new,
                "next_offset": row.next_offset,
                "roll": False,
                "barrier": None,
                "segments_deleted": len(deleted),
                "bytes_deleted": sum(s.size_bytes for s in deleted),
            }
        )
        for g in broker.catalog.groups(topic):
            pos = g.positions[row.partition][0]
            group_rows.append(
                {
                    "topic": topic,
                    "group": g.name,
                    "kind": g.kind,
                    "partition": row.partition,
                    "position": pos,
                    "new_position": max(pos, new),
                    "expired": False,
                    "ttl_skipped": 0,
                    "evicted_skipped": 0,
                    "moved_skipped": max(0, new - pos),
                    "over_quota": False,
                }
            )
    seg_rows += [
        {
            "topic": "big",
            "partition": 0,
            "base_offset": i * 10,
            "next_offset": i * 10 + 10,
            "size_bytes": 100,
            "sealed": True,
            "decision": "keep",
            "reason": "KEEP_WITHIN_TIME",
            "eligible_at": None,
            "detail": None,
        }
        for i in range(extra_keep)
    ]
    topics = [
        {
            "topic": topic,
            "quota_exceeded": quota,
            "policy_version": Journal(broker.catalog).policy_version(topic) or None,
        }
    ]
    return {
        "segments": pa.Table.from_pylist(seg_rows, schema=tables.PLAN_SEGMENTS),
        "partitions": pa.Table.from_pylist(part_rows, schema=tables.PLAN_PARTITIONS),
        "groups": pa.Table.from_pylist(group_rows, schema=tables.PLAN_GROUPS),
        "topics": pa.Table.from_pylist(topics, schema=tables.PLAN_TOPICS),
    }


def test_work_from_plan_tables_executes(broker: Broker, data_dir: Path, journal: Journal, topic: str) -> None:
    broker.create_group(topic, "reader", "reader")
    broker.create_group(topic, "tail", "subscriber", "latest")
    s0 = sealed_bases(broker, topic, 0)
    cut = s0[4][0]

    (work,) = work_from_plan(plan_tables(broker, topic, cut, quota=True))

    assert (work.topic, work.quota_exceeded, work.expired_groups) == (topic, True, ())
    (p0,) = work.partitions  # partition 1 changes nothing
    assert (p0.partition, p0.log_start_offset, p0.new_log_start_offset, p0.roll) == (0, 0, cut, False)
    assert p0.deletions == tuple(
        SegmentDeletion(s.base_offset, s.next_offset, s.size_bytes, "DELETE_TIME")
        for s in broker.catalog.segments(topic, 0)[:4]
    )
    assert p0.moves == (GroupMove("reader", "reader", 0, 0, cut, (Skip("reader_moved", cut),)),)

    result = execute(broker, [work], now=NOW)

    assert result.applied == 4
    assert broker.catalog.group(topic, "reader").positions[0][0] == cut
    assert broker.catalog.group(topic, "tail").positions[0][0] == 300
    (moved,) = journal.actions(action="reader_moved")
    assert (moved.messages, moved.details, moved.status) == (
        cut,
        {"group": "reader", "kind": "reader"},
        "applied",
    )
    assert EngineState(broker.catalog).quota_state(topic).exceeded is True
    assert_consistent(broker, data_dir, topic)


def test_work_from_plan_selects_only_the_rows_that_change_something(
    broker: Broker, journal: Journal, topic: str
) -> None:
    plan = plan_tables(broker, topic, 0, extra_keep=300_000)
    plan["topics"] = pa.concat_tables(
        [
            plan["topics"],
            pa.Table.from_pylist(
                [{"topic": "big", "quota_exceeded": False, "policy_version": 3}], schema=tables.PLAN_TOPICS
            ),
        ]
    )
    groups = [
        {
            "topic": "big",
            "group": g,
            "kind": k,
            "partition": 0,
            "position": 10,
            "new_position": n,
            "expired": e,
            "ttl_skipped": t,
            "evicted_skipped": v,
            "moved_skipped": m,
            "over_quota": False,
        }
        for g, k, n, e, t, v, m in [
            ("still", "subscriber", 10, False, 0, 0, 0),
            ("ttl", "subscriber", 25, False, 15, 0, 0),
            ("evicted", "subscriber", 40, False, 5, 25, 0),
            ("overrun", "subscriber", 50, False, 0, 0, 40),
            ("stale", "reader", 10, True, 0, 0, 0),
        ]
    ]
    plan["groups"] = pa.concat_tables([plan["groups"], pa.Table.from_pylist(groups, schema=tables.PLAN_GROUPS)])
    plan["partitions"] = pa.concat_tables(
        [
            plan["partitions"],
            pa.Table.from_pylist(
                [
                    {
                        "topic": "big",
                        "partition": p,
                        "log_start_offset": 0,
                        "new_log_start_offset": 0,
                        "next_offset": 10,
                        "roll": p == 2,
                        "barrier": None,
                        "segments_deleted": 0,
                        "bytes_deleted": 0,
                    }
                    for p in range(3)
                ],
                schema=tables.PLAN_PARTITIONS,
            ),
        ]
    )

    big, events = work_from_plan(plan)

    assert (events.topic, events.policy_version, events.partitions) == (topic, journal.policy_version(topic), ())
    assert (big.topic, big.policy_version, big.expired_groups) == ("big", 3, (ExpiredGroup("stale", "reader"),))
    assert [(p.partition, p.roll, p.deletions) for p in big.partitions] == [(0, False, ()), (2, True, ())]
    assert big.partitions[0].moves == (
        GroupMove("evicted", "subscriber", 0, 10, 40, (Skip("ttl_advance", 5), Skip("backlog_eviction", 25))),
        GroupMove("overrun", "subscriber", 0, 10, 50, (Skip("subscriber_overrun", 40),)),
        GroupMove("ttl", "subscriber", 0, 10, 25, (Skip("ttl_advance", 15),)),
    )


# -- the cycle as a whole ------------------------------------------------------------------


def test_an_interrupt_mid_cycle_fails_it_and_settles_what_it_left(
    broker: Broker, data_dir: Path, journal: Journal, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s0 = sealed_bases(broker, topic, 0)
    work = cut_work(broker, topic, {0: s0[2][0], 1: sealed_bases(broker, topic, 1)[2][0]})

    def interrupted(self: PartitionWriter, bases: list[int]) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(PartitionWriter, "detach", interrupted)
    with pytest.raises(KeyboardInterrupt) as stopped:
        execute(broker, [work], now=NOW)
    monkeypatch.undo()

    (cycle,) = journal.cycles()
    assert (cycle.status, cycle.applied, cycle.error) == ("failed", 2, "interrupted (Ctrl-C or SIGTERM)")
    # what the command says after "ebb: interrupted; ": the segments each partition had to lose
    assert cycle.planned == 4
    assert str(stopped.value) == (
        f"cycle {cycle.id} stopped with 2 of {cycle.planned} segment deletion(s) done; "
        f"`ebb log --cycle {cycle.id}` shows which"
    )
    statuses = {(a.action, a.partition, a.status) for a in journal.actions(cycle=cycle.id, limit=None)}
    # Partition 0 had passed its durable point: its deletions complete. Partition 1 had not begun.
    assert statuses == {
        ("move_log_start", 0, "applied"),
        ("delete_segment", 0, "applied"),
        ("move_log_start", 1, "rolled_back"),
        ("delete_segment", 1, "rolled_back"),
    }
    assert segment_files(data_dir, topic, 0)[0] == s0[2][0]
    assert_consistent(broker, data_dir, topic)


def test_a_cycle_first_recovers_the_cycles_a_dead_process_left_running(
    broker: Broker, data_dir: Path, journal: Journal, topic: str
) -> None:
    base, end = sealed_bases(broker, topic, 0)[0]
    started = broker.clock()
    dead = journal.start_cycle(
        trigger="schedule", actor="engine", scope="all", now=NOW, started=started, spark_master=None
    )
    journal.append(
        [Entry("delete_segment", topic, 0, base, base, end, end - base, 100, "DELETE_TIME")],
        time=started,
        trigger="schedule",
        actor="engine",
        status="planned",
        cycle=dead,
    )

    result = execute(broker, [], now=NOW)

    assert result.recovered == (dead,)
    assert journal.cycle(dead).status == "interrupted"
    (action,) = journal.actions(cycle=dead)
    assert (action.status, action.details) == ("rolled_back", {"rolled_back_on_recovery": True})
    assert segment_files(data_dir, topic, 0)[0] == base  # the log start never moved: the data stays


def test_one_cycle_at_a_time(broker: Broker, data_dir: Path, topic: str) -> None:
    other = FileLock(data_dir / PRUNE_LOCK_NAME, what="another process")
    other.acquire(None)
    try:
        with pytest.raises(StoreError, match="pruning of .* is locked"):
            execute(
                broker, [cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[1][0]})], now=NOW, lock_timeout=0.2
            )
    finally:
        other.release()
    assert broker.catalog.partition(topic, 0).log_start_offset == 0


def test_each_cycle_applies_the_journal_retention(broker: Broker, journal: Journal) -> None:
    ancient = journal.start_cycle(trigger="schedule", actor="engine", scope="all", now=1, started=1, spark_master=None)
    journal.finish_cycle(ancient, status="done", finished=2, planned=0, applied=0, bytes_freed=0)
    result = execute(broker, [], now=NOW)
    assert [c.id for c in journal.cycles()] == [result.cycle_id]


# -- the lock's scope: appends never wait for the unlinks -----------------------------------


def test_appends_go_on_while_a_cycle_unlinks_and_leave_its_files_to_it(
    broker: Broker, data_dir: Path, journal: Journal, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s0 = sealed_bases(broker, topic, 0)
    work = cut_work(broker, topic, {0: s0[3][0]})
    unlinking, release = threading.Event(), threading.Event()
    real_unlink = executor_module.unlink_detached

    def held_up(directory: Path, bases: list[int]) -> None:
        unlinking.set()
        assert release.wait(60)
        real_unlink(directory, bases)

    monkeypatch.setattr(executor_module, "unlink_detached", held_up)
    results = []
    cycle = threading.Thread(target=lambda: results.append(execute(broker, [work], now=NOW)))
    cycle.start()
    try:
        assert unlinking.wait(60)
        pdir = data_dir / "topics" / topic / "0"
        assert len(list(pdir.glob("*.log.deleted"))) == 3
        # Another writer (its own lock descriptor) gets the partition at once: the
        # cycle released the lock after the durable point and the renames. Its
        # recovery leaves the .log.deleted files to the cycle that is unlinking them.
        writer = PartitionWriter(pdir, lock_timeout=2.0)
        with writer.locked(broker.catalog.partition(topic, 0).log_start_offset):
            appended = writer.append([NewRecord(b"during")], now_ms=NOW, segment_size=4096)
        assert len(list(pdir.glob("*.log.deleted"))) == 3
        writer.close()
    finally:
        release.set()
        cycle.join(60)
    (result,) = results
    assert result.applied == 3 and not result.failed
    assert not list(pdir.glob("*.deleted"))
    assert [a.status for a in journal.actions(cycle=result.cycle_id, action="delete_segment")] == ["applied"] * 3
    broker.recover(topic)
    assert broker.catalog.partition(topic, 0).next_offset == appended.next_offset
    assert [s.base_offset for s in broker.catalog.segments(topic, 0)] == segment_files(data_dir, topic, 0)
    assert broker.read(topic, 0, appended.base_offset, 1)[0].value == b"during"


def test_recovery_and_the_executor_may_both_unlink_a_deleted_segment(
    broker: Broker, data_dir: Path, topic: str
) -> None:
    """A file already gone is no error on either side of a deletion."""
    pdir = data_dir / "topics" / topic / "0"
    base = sealed_bases(broker, topic, 0)[0][0]
    with broker.locked_partition(topic, 0) as writer:
        writer.detach([base])
    remove_files(pdir, base)  # what a writer's recovery does
    unlink_detached(pdir, [base])  # the executor, after it
    assert base not in segment_files(data_dir, topic, 0)


def test_a_topic_deleted_while_a_cycle_unlinks_is_no_failure(
    broker: Broker, data_dir: Path, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cycle unlinks without the partition lock, so a topic delete may run then."""
    real_unlink = executor_module.unlink_detached

    def after_a_delete(directory: Path, bases: list[int]) -> None:
        with Broker(data_dir) as other:
            other.delete_topic(topic)
        real_unlink(directory, bases)

    monkeypatch.setattr(executor_module, "unlink_detached", after_a_delete)
    result = execute(broker, [cut_work(broker, topic, {0: sealed_bases(broker, topic, 0)[2][0]})], now=NOW)
    assert not result.failed and not (data_dir / "topics" / topic).exists()
