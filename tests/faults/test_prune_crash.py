"""A prune cycle killed with SIGKILL at each of its fault points (engine/faults.py)
leaves a store that reopens consistent: nothing at or above the log start lost, no
file without a catalog row or the reverse, no half-deleted leftovers, and a journal
whose every action is applied or rolled back as the log start says. A new cycle,
planned again on what is left, finishes the job."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.faults import FAULT_POINTS, KILL_AT_ENV
from engine.journal.journal import Journal
from engine.prune.executor import execute, recover_interrupted
from tests.support.cli import REPO, subprocess_env
from tests.support.prune_driver import (
    NOW,
    assert_records,
    cut_work,
    make_topic,
    read_all,
    sealed_bases,
)

TOPIC = "events"
RECORDS = 300

#: per fault point: the partitions whose log start had moved when the child died
#: (partition 0 goes first, with 3 deletions), and how many deletions recovery
#: completed (their log start had moved, their journal row did not say so yet).
#: A partition's segments are renamed together, then unlinked and journaled a batch
#: of up to 100 at a time: partition 0's three are one batch.
REACHED = {
    "after_cycle_recorded": ((), 0),
    "after_log_start_moved": ((0,), 3),
    "after_segment_renamed": ((0,), 3),
    "after_segment_unlinked": ((0,), 3),
    "after_segment_journaled": ((0,), 0),
    "before_cycle_finished": ((0, 1), 0),
}


@pytest.fixture
def cuts(data_dir: Path) -> dict[int, int]:
    """Two partitions of 300 records; cuts that delete 3 segments of partition 0 and 2
    of partition 1."""
    with Broker(data_dir) as broker:
        make_topic(broker, TOPIC, records=RECORDS)
        return {0: sealed_bases(broker, TOPIC, 0)[3][0], 1: sealed_bases(broker, TOPIC, 1)[2][0]}


def run_driver(data_dir: Path, cuts: dict[int, int], kill_at: str | None) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env.pop(KILL_AT_ENV, None)
    if kill_at:
        env[KILL_AT_ENV] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "tests.support.prune_driver", str(data_dir), TOPIC, json.dumps(cuts)],
        check=False,
        capture_output=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


def log_files(data_dir: Path, partition: int) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (data_dir / "topics" / TOPIC / str(partition)).glob("*.log"))


def assert_store_consistent(broker: Broker, data_dir: Path) -> None:
    for row in broker.catalog.partitions(TOPIC):
        pdir = data_dir / "topics" / TOPIC / str(row.partition)
        assert not list(pdir.glob("*.deleted")), "a deletion was left half-done"
        cataloged = [s.base_offset for s in broker.catalog.segments(TOPIC, row.partition)]
        assert cataloged == log_files(data_dir, row.partition), "catalog rows and segment files differ"
        assert cataloged[0] <= row.log_start_offset
        assert_records(read_all(broker, TOPIC, row.partition), TOPIC, row.partition, row.log_start_offset, RECORDS)


def test_the_driver_completes_without_a_fault_point(data_dir: Path, cuts: dict[int, int]) -> None:
    done = run_driver(data_dir, cuts, None)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["applied"] == 5
    with Broker(data_dir) as broker:
        assert [r.log_start_offset for r in broker.catalog.partitions(TOPIC)] == [cuts[0], cuts[1]]
        assert_store_consistent(broker, data_dir)


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_cycle_killed_at_a_fault_point_recovers_and_a_new_cycle_finishes(
    data_dir: Path, cuts: dict[int, int], point: str
) -> None:
    moved, completed = REACHED[point]

    died = run_driver(data_dir, cuts, point)
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()
    assert died.stdout == b""

    # Before any recovery, readers already see every record from the log start on.
    with Broker(data_dir) as reader:
        log_starts = {r.partition: r.log_start_offset for r in reader.catalog.partitions(TOPIC)}
        assert log_starts == {p: (cuts[p] if p in moved else 0) for p in (0, 1)}
        for p, start in log_starts.items():
            assert_records(read_all(reader, TOPIC, p), TOPIC, p, start, RECORDS)

    with Broker(data_dir) as broker:
        journal = Journal(broker.catalog)
        (cycle,) = journal.cycles()
        assert cycle.status == "running"
        assert recover_interrupted(broker) == (cycle.id,)
        assert recover_interrupted(broker) == ()

        assert_store_consistent(broker, data_dir)
        cycle = journal.cycle(cycle.id)
        assert cycle.status == "interrupted" and "interrupted" in cycle.error
        actions = journal.actions(cycle=cycle.id, limit=None)
        assert {a.status for a in actions} <= {"applied", "rolled_back"}
        deletions = [a for a in actions if a.action == "delete_segment"]
        assert len(deletions) == 5
        for a in deletions:
            partition_start = broker.catalog.partition(TOPIC, a.partition).log_start_offset
            present = a.segment in log_files(data_dir, a.partition)
            if a.status == "applied":
                assert partition_start >= a.end_offset and not present
            else:
                assert partition_start < a.end_offset and present
                assert a.details == {"rolled_back_on_recovery": True}
        expected_applied = sum(3 if p == 0 else 2 for p in moved)
        assert (cycle.planned, cycle.applied) == (5, expected_applied)
        assert sum(a.status == "applied" for a in deletions) == expected_applied
        assert sum(a.details == {"completed_on_recovery": True} for a in deletions) == completed
        for a in actions:
            if a.action == "move_log_start":
                assert a.status == ("applied" if a.partition in moved else "rolled_back")

        # Planned again on what is left, a new cycle finishes the job.
        result = execute(broker, [cut_work(broker, TOPIC, cuts)], now=NOW)
        assert (result.status, result.applied, result.recovered) == ("done", 5 - expected_applied, ())
        assert [r.log_start_offset for r in broker.catalog.partitions(TOPIC)] == [cuts[0], cuts[1]]
        for p in (0, 1):
            assert log_files(data_dir, p)[0] == cuts[p]
        assert_store_consistent(broker, data_dir)
