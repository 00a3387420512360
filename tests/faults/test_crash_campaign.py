"""The crash campaign (tests/faults/campaign): producers, a consumer and prune cycles killed
with SIGKILL round after round on one data directory, every invariant checked after
each kill. A short campaign runs here (``EBB_CAMPAIGN_KILLS`` rounds, one of them with
the real ``ebb engine`` on Spark); ``python -m tests.faults.campaign`` runs long ones.

Below it, the bugs campaigns found, each as a deterministic case."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.journal.journal import Journal
from engine.prune.executor import execute
from engine.store.batch import NewRecord, Record
from tests.faults.campaign.runner import KILLS_ENV, run_campaign
from tests.faults.campaign.workload import reference_work
from tests.support.prune_driver import NOW, make_topic, sealed_bases

TOPIC = "events"
#: rounds of the CI campaign: about a minute on two busy cores, with its engine round
CI_KILLS = 40


@pytest.mark.slow
def test_a_crash_campaign_finds_every_invariant_holding(tmp_path: Path, spark_connect_server: str) -> None:
    kills = int(os.environ.get(KILLS_ENV, CI_KILLS))
    # The engine round plans on the run's Connect server: the SIGKILL lands on the
    # engine process as before, without a JVM of its own to start first.
    summary = run_campaign(tmp_path / "data", seed=1, kills=kills, engine_every=25, spark_remote=spark_connect_server)
    print(summary.text())

    assert summary.violations == []
    assert summary.kills_survived == kills
    # The campaign did what it claims: kills in cycles at fault points and at random,
    # cycles that finished, deletions and acknowledged records to check.
    assert sum(summary.fault_points_hit.values()) >= 3
    checked = summary.checked
    assert checked.cycles["done"] > 0 and checked.cycles["interrupted"] > 0
    assert checked.deletions_checked > 0 and checked.protected_deletions_checked > 0
    assert checked.acked_records_checked > 1000
    if kills >= 25:
        assert summary.rounds["engine"] == 1


# -- regressions --------------------------------------------------------------------------


def test_a_consumer_does_not_commit_over_a_move_made_while_it_read(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 1, round 17: a prune cycle moved a reader past the data it deleted while
    the reader's consumer was reading; the consumer then committed from its stale
    position, moving the group back below the log start."""
    make_topic(broker, TOPIC, partitions=1)
    broker.create_group(TOPIC, "rdr", "reader")
    read = broker.read

    def read_while_a_cycle_runs(*args: object) -> list[Record]:
        records = read(*args)  # type: ignore[arg-type]
        execute(broker, reference_work(broker, NOW), now=NOW)
        return records

    monkeypatch.setattr(broker, "read", read_while_a_cycle_runs)
    consumed = broker.consume(TOPIC, "rdr", max_records=10)

    assert [c.record.offset for c in consumed] == list(range(10))
    log_start = broker.catalog.partition(TOPIC, 0).log_start_offset
    assert log_start > 10
    assert broker.catalog.group(TOPIC, "rdr").positions[0][0] == log_start


@pytest.mark.parametrize("sealed_by", ["producer", "idle_roll"])
def test_a_segment_sealed_since_the_plan_and_below_the_new_log_start_is_journaled(
    broker: Broker, data_dir: Path, sealed_by: str
) -> None:
    """Seed 1, round 113: with message granularity a plan cut the whole partition,
    the active segment included; by the time it was applied that segment had been
    sealed (by a producer's roll, or by the cycle's own idle roll), so the new log
    start left it wholly below, and the next writer removed it with no journal row."""
    make_topic(broker, TOPIC, partitions=1)
    policy = {"granularity": "message"} | ({"segment_roll": "1m"} if sealed_by == "idle_roll" else {})
    broker.alter_topic(TOPIC, policy)
    (work,) = reference_work(broker, NOW)
    active = broker.catalog.segments(TOPIC, 0)[-1]
    (pw,) = work.partitions
    assert pw.new_log_start_offset == active.next_offset == 300
    assert active.base_offset not in [d.base_offset for d in pw.deletions]
    if sealed_by == "producer":
        # A record too large for what is left of the active segment rolls it first.
        broker.produce(TOPIC, [NewRecord(b"x" * 3500, timestamp=NOW)], partition=0)
    else:
        assert pw.roll

    result = execute(broker, [work], now=NOW)

    assert (result.status, result.planned, result.applied) == ("done", len(pw.deletions) + 1, len(pw.deletions) + 1)
    (row,) = Journal(broker.catalog).actions(action="delete_segment", status="applied", limit=1)
    assert (row.segment, row.end_offset, row.reason) == (active.base_offset, 300, "DELETE_BELOW_LOG_START")
    broker.recover(TOPIC)
    assert sealed_bases(broker, TOPIC, 0) == []
    assert sorted(int(p.name[:-4]) for p in (data_dir / "topics" / TOPIC / "0").glob("*.log")) == [
        s.base_offset for s in broker.catalog.segments(TOPIC, 0)
    ]
