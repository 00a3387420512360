"""The prune schedule (SPEC §5, engine/prune/scheduler.py): cycles every interval
measured from each start, the config reloaded between cycles, a failing cycle
journaled without stopping the loop, a prompt stop, and (on Spark) a failing topic
isolated and the pause respected."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.broker import Broker
from engine.errors import PlanCancelled
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.prune.cycle_result import CycleResult
from engine.prune.executor import execute
from engine.prune.pruner import Pruner
from engine.prune.scheduler import Scheduler
from engine.prune.session import SparkEngine
from tests.support.prune_driver import make_topic, produce, sealed_bases


class FakeClock:
    """A monotonic clock that only the fake cycles move."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingEvent(threading.Event):
    """A stop event whose waits return at once, recording what was asked and moving
    the fake clock (if any) by as much; ``on_wait(i)`` runs at the i-th wait."""

    def __init__(self, clock: FakeClock | None = None, on_wait=None) -> None:
        super().__init__()
        self.clock = clock
        self.on_wait = on_wait
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if self.on_wait is not None:
            self.on_wait(len(self.waits))
        if self.clock is not None and timeout is not None:
            self.clock.now += timeout
        return self.is_set()


class FakePruner:
    """Runs ``behaviour(n)`` as cycle n; journals a real (empty) cycle otherwise."""

    def __init__(self, broker: Broker, behaviour=None) -> None:
        self.broker = broker
        self.behaviour = behaviour or (lambda n: None)
        self.calls: list[dict] = []
        self.planner = SimpleNamespace(cancel=self.cancel)
        self.cancelled: list[str] = []
        self.cancel_seen = threading.Event()

    def cancel(self, tag: str) -> None:
        self.cancelled.append(tag)
        self.cancel_seen.set()

    def cycle(self, *, trigger: str, actor: str, tag: str | None) -> CycleResult:
        self.calls.append({"trigger": trigger, "actor": actor, "tag": tag})
        self.behaviour(len(self.calls))
        return execute(self.broker, [], now=self.broker.clock(), trigger=trigger, actor=actor)


def test_runs_n_cycles_each_interval_measured_from_the_start_of_the_cycle(broker: Broker) -> None:
    clock = FakeClock()
    durations = {1: 0.030, 2: 0.250, 3: 0.010}  # the second is longer than the interval

    def behaviour(n: int) -> None:
        clock.now += durations[n]

    pruner = FakePruner(broker, behaviour)
    reports: list[CycleResult] = []
    stop = RecordingEvent(clock)
    scheduler = Scheduler(pruner, interval_ms=100, max_cycles=3, on_cycle=reports.append, monotonic=clock)
    scheduler.run(stop)

    assert [c["trigger"] for c in pruner.calls] == ["schedule"] * 3
    assert [c["actor"] for c in pruner.calls] == ["engine"] * 3
    # 100 ms from each start: 70 ms after a 30 ms cycle, none after a 250 ms one (and
    # no catch-up burst), none after the last.
    assert stop.waits == [pytest.approx(0.070)]
    assert len(reports) == 3 and scheduler.cycles_run == 3
    assert [r.status for r in reports] == ["done"] * 3
    assert scheduler.last_result == reports[-1] and scheduler.next_cycle_at is None
    journal = Journal(broker.catalog)
    assert [c.trigger for c in journal.cycles()] == ["schedule"] * 3
    assert reports[-1].cycle_id == journal.cycles()[0].id


def test_the_interval_comes_from_the_config_reloaded_before_each_cycle(broker: Broker, data_dir: Path) -> None:
    clock = FakeClock()
    config = data_dir / "ebb.toml"

    def behaviour(n: int) -> None:
        if n == 1:
            config.write_text('[engine]\nprune_interval = "2s"\n')
        if n == 2:
            config.write_text('[engine]\nprune_interval = "2 fortnights"\n')  # a typo

    pruner = FakePruner(broker, behaviour)
    stop = RecordingEvent(clock)
    reports: list[CycleResult] = []
    scheduler = Scheduler(pruner, max_cycles=4, on_cycle=reports.append, monotonic=clock, config_poll_seconds=3600)
    assert scheduler.interval_ms == 60_000  # the default
    scheduler.run(stop)

    # The file written during cycle 1 applies to the wait after it. The typo fails
    # cycles 3 and 4 (journaled, nothing pruned); the last good interval stays.
    assert stop.waits == [2.0, 2.0, 2.0]
    assert len(pruner.calls) == 2
    assert [r.status for r in reports] == ["done", "done", "failed", "failed"]
    assert "config not reloaded, nothing pruned" in reports[2].error
    assert "ebb.toml" in reports[2].error
    failed = Journal(broker.catalog).cycles(status="failed")
    assert len(failed) == 2 and all("config not reloaded" in c.error for c in failed)
    assert {c.trigger for c in failed} == {"schedule"}


def test_a_new_interval_applies_to_the_wait_in_progress(broker: Broker, data_dir: Path) -> None:
    clock = FakeClock()
    (data_dir / "ebb.toml").write_text('[engine]\nprune_interval = "1h"\n')

    def on_wait(i: int) -> None:
        if i == 3:
            (data_dir / "ebb.toml").write_text('[engine]\nprune_interval = "5s"\n')

    stop = RecordingEvent(clock, on_wait)
    scheduler = Scheduler(FakePruner(broker), max_cycles=2, monotonic=clock, config_poll_seconds=1.0)
    scheduler.run(stop)
    assert stop.waits == [1.0] * 5  # 5 s from the first cycle's start, not an hour
    assert scheduler.cycles_run == 2


def test_a_cycle_that_raises_is_journaled_and_the_loop_goes_on(broker: Broker) -> None:
    def behaviour(n: int) -> None:
        if n == 2:
            raise RuntimeError("snapshot exploded")

    pruner = FakePruner(broker, behaviour)
    reports: list[CycleResult] = []
    Scheduler(pruner, interval_ms=1, max_cycles=3, on_cycle=reports.append).run(RecordingEvent())

    assert [r.status for r in reports] == ["done", "failed", "done"]
    assert reports[1].error == "snapshot exploded" and reports[1].cycle_id is not None
    journal = Journal(broker.catalog)
    failed = journal.cycle(reports[1].cycle_id)
    assert (failed.status, failed.trigger, failed.error) == ("failed", "schedule", "snapshot exploded")
    assert len(journal.cycles()) == 3


def test_a_failure_the_executor_journaled_is_not_journaled_twice(broker: Broker) -> None:
    def behaviour(n: int) -> None:
        journal = Journal(broker.catalog)
        with broker.catalog.write():
            cycle = journal.start_cycle(
                trigger="schedule", actor="engine", scope="all", now=1, started=1, spark_master=None
            )
            journal.finish_cycle(cycle, status="failed", finished=2, planned=0, applied=0, bytes_freed=0, error="disk")
        raise OSError("disk")

    reports: list[CycleResult] = []
    Scheduler(FakePruner(broker, behaviour), interval_ms=1, max_cycles=1, on_cycle=reports.append).run(RecordingEvent())
    (cycle,) = Journal(broker.catalog).cycles()
    assert reports[0].cycle_id == cycle.id and reports[0].status == "failed"


def test_stops_promptly_between_cycles(broker: Broker) -> None:
    pruner = FakePruner(broker)
    scheduler = Scheduler(pruner, interval_ms=3_600_000)
    thread = scheduler.start()
    deadline = time.monotonic() + 30
    while scheduler.cycles_run < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert scheduler.cycles_run == 1 and scheduler.next_cycle_at is not None
    assert scheduler.next_cycle_at > time.time() * 1000 + 3_000_000  # an hour from the cycle's start
    started = time.monotonic()
    assert scheduler.stop(timeout=5)
    assert time.monotonic() - started < 1.0 and not thread.is_alive()
    assert scheduler.next_cycle_at is None and len(pruner.calls) == 1


def test_a_stop_cancels_the_plan_running_on_spark(broker: Broker) -> None:
    pruner = FakePruner(broker)

    def behaviour(n: int) -> None:
        assert pruner.cancel_seen.wait(30)
        raise PlanCancelled(f"plan {pruner.calls[-1]['tag']} was cancelled")

    pruner.behaviour = behaviour
    scheduler = Scheduler(pruner, interval_ms=10)
    thread = scheduler.start()
    while not scheduler.running:
        time.sleep(0.01)
    time.sleep(0.05)
    assert scheduler.stop(timeout=5) and not thread.is_alive()
    assert pruner.cancelled == [pruner.calls[0]["tag"]]
    assert scheduler.last_result.status == "cancelled" and scheduler.last_result.cycle_id is None
    assert Journal(broker.catalog).cycles() == []  # nothing was done: nothing journaled


def test_a_stop_while_spark_is_starting_ends_the_wait(broker: Broker) -> None:
    pruner = FakePruner(broker)
    pruner.spark = SimpleNamespace(state="starting", error=None, description="local[1]", start=lambda: None)
    scheduler = Scheduler(pruner, interval_ms=10)
    thread = scheduler.start()
    time.sleep(0.3)
    assert scheduler.running and pruner.calls == []
    assert scheduler.stop(timeout=5) and not thread.is_alive()
    assert scheduler.cycles_run == 0 and Journal(broker.catalog).cycles() == []


def test_spark_that_failed_to_start_fails_each_cycle_journaled(broker: Broker) -> None:
    pruner = FakePruner(broker)
    pruner.spark = SimpleNamespace(
        state="failed", error="cannot start Spark (local[1]): no java", description="local[1]"
    )
    reports: list[CycleResult] = []
    Scheduler(pruner, interval_ms=1, max_cycles=2, on_cycle=reports.append).run(RecordingEvent())
    assert [r.status for r in reports] == ["failed", "failed"] and pruner.calls == []
    cycles = Journal(broker.catalog).cycles()
    assert [c.error for c in cycles] == ["cannot start Spark (local[1]): no java"] * 2
    assert {c.spark_master for c in cycles} == {"local[1]"}


def test_interval_must_be_positive(broker: Broker) -> None:
    with pytest.raises(ValueError, match="above 0"):
        Scheduler(FakePruner(broker), interval_ms=0)


# -- on Spark ----------------------------------------------------------------------------------------


def _files(data_dir: Path, topic: str) -> list[str]:
    return sorted(str(p.relative_to(data_dir)) for p in (data_dir / "topics" / topic).rglob("*.log"))


def test_on_spark_a_failing_topic_is_isolated_and_a_changed_config_applies_next_cycle(
    broker: Broker, data_dir: Path, spark_engine: SparkEngine
) -> None:
    # "good" and "broken" expire by their own retention_time (1h); "later" by the
    # default, infinite at first (its records are old: a 1h default deletes them).
    (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "infinite"\n')
    broker.reload_config()
    make_topic(broker, "good", partitions=1, records=200)
    make_topic(broker, "broken", partitions=1, records=200)
    broker.create_topic("later", 1, {"segment_size": "4KiB"})
    produce(broker, "later", 0, 200)
    good_sealed = len(sealed_bases(broker, "good", 0))
    later_files = _files(data_dir, "later")
    shutil.rmtree(data_dir / "topics" / "broken" / "0")

    after_first: list[str] = []

    def on_cycle(_result: CycleResult) -> None:
        if len(reports) == 1:  # the first cycle (reports gets it first)
            after_first.extend(_files(data_dir, "later"))
            (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "1h"\n')

    reports: list[CycleResult] = []
    scheduler = Scheduler(
        Pruner(broker, spark_engine), interval_ms=10, max_cycles=2,
        on_cycle=lambda r: (reports.append(r), on_cycle(r)),
    )  # fmt: skip
    scheduler.run(threading.Event())

    first, second = reports
    assert first.status == "done" and set(first.failed) == {"broken"}
    assert first.applied == good_sealed
    assert first.error.startswith("broken: ")
    assert after_first == later_files  # kept by the infinite default
    assert len(_files(data_dir, "good")) == 1  # only the active segment is left
    assert second.status == "done" and set(second.failed) == {"broken"}
    assert second.applied == len(later_files) - 1  # the new default applied
    assert len(_files(data_dir, "later")) == 1
    journal = Journal(broker.catalog)
    failed = journal.actions(action="topic_failed")
    assert [a.topic for a in failed] == ["broken", "broken"]
    assert {a.trigger for a in failed} == {"schedule"}
    assert [c.status for c in journal.cycles()] == ["done", "done"]


def test_on_spark_a_paused_engine_still_plans_and_reports(
    broker: Broker, data_dir: Path, spark_engine: SparkEngine
) -> None:
    make_topic(broker, "events", partitions=1, records=200)
    with broker.catalog.write():
        EngineState(broker.catalog).set_paused(True)
    before = _files(data_dir, "events")

    reports: list[CycleResult] = []
    Scheduler(Pruner(broker, spark_engine), interval_ms=10, max_cycles=1, on_cycle=reports.append).run(
        threading.Event()
    )

    (report,) = reports
    assert report.status == "paused"
    planned = report.plan.deletions().num_rows
    assert planned == len(before) - 1 and report.planned == planned
    assert report.applied == 0
    assert _files(data_dir, "events") == before
    (cycle,) = Journal(broker.catalog).cycles()
    assert (cycle.status, cycle.trigger, cycle.planned, cycle.applied) == ("paused", "schedule", planned, 0)
