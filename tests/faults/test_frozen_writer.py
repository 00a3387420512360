"""A frozen writer (issue 17 item 5): a real producer process stopped with SIGSTOP
while it holds a partition's lock. The cycle skips that partition after a bounded
wait (journaled), applies the others, and the next cycle does it once the writer is
gone; another writer's error names the holder's pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.journal.journal import Journal
from engine.prune import executor as executor_module
from engine.prune.executor import execute
from engine.store.lock import LockTimeout
from engine.store.partition import PartitionWriter
from tests.support.cli import REPO, subprocess_env
from tests.support.prune_driver import NOW, cut_work, make_topic, sealed_bases

TOPIC = "events"
OTHER = "orders"

#: a producer that takes partition 0's lock, says so, and keeps it
_HOLDER = """
import sys, time
from pathlib import Path
from engine.store.partition import PartitionWriter
writer = PartitionWriter(Path(sys.argv[1]))
with writer.locked(0):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def frozen(data_dir: Path) -> Iterator[subprocess.Popen]:
    """A subprocess holding ``TOPIC``/0's lock, stopped with SIGSTOP; continued and
    reaped after the test."""
    with Broker(data_dir) as broker:
        make_topic(broker, TOPIC)
        make_topic(broker, OTHER, partitions=1)
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data_dir / "topics" / TOPIC / "0")],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=subprocess_env(),
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"locked\n"
        os.kill(child.pid, signal.SIGSTOP)
        yield child
    finally:
        child.send_signal(signal.SIGCONT)  # Popen's signals skip a child already reaped
        child.kill()
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()


def test_a_cycle_skips_a_partition_whose_writer_is_frozen_and_applies_the_others(
    broker: Broker, frozen: subprocess.Popen, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor_module, "PARTITION_LOCK_WAIT", 0.5)
    cuts = {0: sealed_bases(broker, TOPIC, 0)[2][0], 1: sealed_bases(broker, TOPIC, 1)[2][0]}
    work = [cut_work(broker, TOPIC, cuts), cut_work(broker, OTHER, {0: sealed_bases(broker, OTHER, 0)[1][0]})]

    result = execute(broker, work, now=NOW)

    assert result.status == "done" and not result.failed
    assert set(result.skipped) == {f"{TOPIC}/0"}
    assert f"pid {frozen.pid}" in result.skipped[f"{TOPIC}/0"]
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == 0
    assert broker.catalog.partition(TOPIC, 1).log_start_offset == cuts[1]
    assert broker.catalog.partition(OTHER, 0).log_start_offset > 0
    journal = Journal(broker.catalog)
    (skipped,) = journal.actions(cycle=result.cycle_id, action="skipped")
    assert (skipped.partition, skipped.reason) == (0, "PARTITION_LOCKED")
    planned_there = [
        a for a in journal.actions(cycle=result.cycle_id, topic=TOPIC) if a.partition == 0 and a is not skipped
    ]
    assert planned_there and {a.status for a in planned_there} == {"skipped"}

    # The writer comes back and goes away: the next cycle applies the partition.
    frozen.send_signal(signal.SIGCONT)
    frozen.kill()
    frozen.wait(30)
    again = execute(broker, [cut_work(broker, TOPIC, {0: cuts[0]})], now=NOW)
    assert again.skipped == {} and again.applied == 2
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == cuts[0]


def test_a_writer_that_times_out_is_told_the_holders_pid(data_dir: Path, frozen: subprocess.Popen) -> None:
    writer = PartitionWriter(data_dir / "topics" / TOPIC / "0", lock_timeout=0.3, label=f"{TOPIC}/0")
    with pytest.raises(LockTimeout) as raised, writer.locked(0):
        pass
    assert raised.value.holder == frozen.pid
    assert str(raised.value) == (
        f"partition {TOPIC}/0 is locked by another writer (pid {frozen.pid}) for more than 0.3 s; try again later"
    )


def test_truncate_behind_a_frozen_writer_fails_at_once_with_one_line_naming_it(
    ebb, data_dir: Path, frozen: subprocess.Popen, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor_module, "PARTITION_LOCK_WAIT", 0.5)
    result = ebb("truncate", TOPIC, "--partition", "0", "--oldest-segments", "2")
    assert result.code == 2 and result.out == ""
    assert result.err == (
        f"ebb: error: delete_oldest of topic {TOPIC} not applied: partition {TOPIC}/0 is locked by another writer "
        f"(pid {frozen.pid}) for more than 0.5 s; try again later\n"
    )
    with Broker(data_dir) as broker:
        assert broker.catalog.partition(TOPIC, 0).log_start_offset == 0


#: a writer that takes partition 0's lock back to back, holding it 50 ms each time (an
#: append's fsync): a waiter polling for the lock would hit the microseconds between
#: its release and its next acquire only by chance
_BUSY = """
import sys, time
from pathlib import Path
from engine.store.lock import FileLock
lock = FileLock(Path(sys.argv[1]) / ".lock", what="busy")
print("busy", flush=True)
while True:
    lock.acquire(None)
    time.sleep(0.05)
    lock.release()
"""


def test_a_writer_taking_the_lock_back_to_back_does_not_starve_a_waiter(data_dir: Path) -> None:
    with Broker(data_dir) as broker:
        make_topic(broker, TOPIC, partitions=1)
    pdir = data_dir / "topics" / TOPIC / "0"
    child = subprocess.Popen(
        [sys.executable, "-c", _BUSY, str(pdir)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=subprocess_env(),
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"busy\n"
        for _ in range(10):
            writer = PartitionWriter(pdir, lock_timeout=2.0)
            with writer.locked(0):  # raises LockTimeout if starved
                pass
            writer.close()
    finally:
        child.kill()
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
