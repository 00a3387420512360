"""Storage faults (a full disk, a failing one) during appends and prunes, simulated
through the store's I/O seam (engine/faults.py) and a catalog connection whose
COMMIT fails as SQLite's does on a full disk.

For every fault point: the operation fails with one clear line, every record
acknowledged before it reads back, recovery leaves nothing for ``ebb verify`` to
report, and the store goes on working (append, read, a prune through the executor).
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.broker import Broker
from engine.errors import EbbError, StoreError
from engine.faults import IOFault, inject
from engine.integrity.check import verify
from engine.journal.journal import Journal
from engine.prune.executor import execute, recover_interrupted
from engine.prune.operations import delete_oldest
from engine.store.batch import NewRecord
from tests.support.prune_driver import (
    NOW,
    assert_records,
    cut_work,
    make_topic,
    read_all,
    sealed_bases,
    ts_of,
    value_of,
)

TOPIC = "events"
ACKED = 300  # records make_topic produces (and acknowledges) per partition


def new_records(start: int, count: int) -> list[NewRecord]:
    """Records at offsets [start, start + count) as prune_driver produces them."""
    return [NewRecord(value_of(TOPIC, 0, o), b"k%d" % o, ts_of(o)) for o in range(start, start + count)]


def segment_files(data_dir: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (data_dir / "topics" / TOPIC / "0").glob("*.log"))


def findings(broker: Broker) -> list[str]:
    return [str(f) for f in verify(broker.data, broker.catalog, broker.config.policy_defaults)]


def assert_recovered_and_usable(broker: Broker, data_dir: Path, acked: int) -> None:
    """After the fault cleared: recovery, every record present as produced (the
    acknowledged ones at least), a clean verify, then an append, a read and a prune."""
    broker.recover(TOPIC)
    row = broker.catalog.partition(TOPIC, 0)
    assert row.next_offset >= acked, f"acknowledged up to {acked}, the log ends at {row.next_offset}"
    assert_records(read_all(broker, TOPIC, 0), TOPIC, 0, row.log_start_offset, row.next_offset)
    assert [s.base_offset for s in broker.catalog.segments(TOPIC, 0)] == segment_files(data_dir)
    assert findings(broker) == []

    result = broker.append(TOPIC, 0, new_records(row.next_offset, 40))
    assert (result.base_offset, result.next_offset) == (row.next_offset, row.next_offset + 40)
    end = result.next_offset
    sealed = sealed_bases(broker, TOPIC, 0)
    cut = sealed[len(sealed) // 2][1]
    cycle = execute(broker, [cut_work(broker, TOPIC, {0: cut})], now=NOW, trigger="manual", actor="test")
    assert (cycle.status, cycle.failed, cycle.skipped) == ("done", {}, {})
    assert cycle.applied >= 1
    assert_records(read_all(broker, TOPIC, 0), TOPIC, 0, cut, end)
    assert [s.base_offset for s in broker.catalog.segments(TOPIC, 0)] == segment_files(data_dir)
    assert findings(broker) == []


@pytest.fixture
def topic(broker: Broker) -> str:
    make_topic(broker, TOPIC, partitions=1, records=ACKED, segment_size="4KiB")
    assert broker.catalog.partition(TOPIC, 0).next_offset == ACKED
    return TOPIC


# -- appends -------------------------------------------------------------------------------

# The failing append writes ~6.5 KB into 4 KiB segments: it fills the active segment,
# rolls it (fsync of its log, fsync of its index, a new segment and a directory fsync)
# and goes on in the new one, whose log it fsyncs at the end.
APPEND_FAULTS: dict[str, IOFault] = {
    "write_of_segment_enospc": IOFault("pwrite", errno.ENOSPC, "log"),
    "write_of_second_batch_enospc": IOFault("pwrite", errno.ENOSPC, "log", skip=1),
    "write_of_index_enospc": IOFault("write", errno.ENOSPC, "index"),
    "fsync_of_segment_at_roll": IOFault("fsync", errno.EIO, "log"),
    "fsync_of_segment_at_commit": IOFault("fsync", errno.EIO, "log", skip=1),
    "fsync_of_index": IOFault("fsync", errno.EIO, "index"),
    "fsync_of_directory": IOFault("fsync", errno.EIO, "dir"),
}


@pytest.mark.parametrize("name", list(APPEND_FAULTS))
def test_append_fault_fails_cleanly_and_loses_nothing_acknowledged(
    broker: Broker, data_dir: Path, topic: str, name: str
) -> None:
    fault = APPEND_FAULTS[name]
    fault = IOFault(fault.call, fault.errno, fault.target, fault.skip, fault.times)  # a fresh counter
    before = broker.catalog.segments(TOPIC, 0)[-1]
    with inject(fault), pytest.raises(StoreError) as raised:
        broker.append(TOPIC, 0, new_records(ACKED, 60))
    assert fault.fired == 1, "the fault point was not reached"
    message = str(raised.value)
    assert "\n" not in message and "events/0" in message and errno.errorcode[fault.errno] in message, message

    # Acknowledged records read back at once, before any recovery.
    assert_records(broker.read(TOPIC, 0, 0, ACKED), TOPIC, 0, 0, ACKED)
    if fault.call == "fsync" and fault.target == "log":
        # fsyncgate: the segment whose fsync failed keeps nothing past its last
        # successful fsync (the start of the append for the segment that was active,
        # nothing for one the append created); the writer did not trust the cache.
        failed = Path(fault.paths[0])
        durable = before.size_bytes if int(failed.name[:-4]) == before.base_offset else 0
        assert failed.stat().st_size == durable
        assert "cut back to its last durable end" in message
    if name == "fsync_of_segment_at_roll":
        assert segment_files(data_dir)[-1] == before.base_offset  # the roll never happened
    if name in ("write_of_segment_enospc", "fsync_of_segment_at_roll"):
        # Nothing of the failed append is left in the log.
        broker.recover(TOPIC)
        assert broker.catalog.partition(TOPIC, 0).next_offset == ACKED
    assert_recovered_and_usable(broker, data_dir, ACKED)


def test_append_after_a_failed_fsync_starts_at_the_last_durable_end(broker: Broker, topic: str) -> None:
    with inject(IOFault("fsync", errno.EIO, "log")), pytest.raises(StoreError):
        broker.append(TOPIC, 0, new_records(ACKED, 5))  # one small batch, no roll
    result = broker.append(TOPIC, 0, new_records(ACKED, 5))
    assert (result.base_offset, result.next_offset) == (ACKED, ACKED + 5)
    assert_records(read_all(broker, TOPIC, 0), TOPIC, 0, 0, ACKED + 5)


def test_a_failed_fsync_that_cannot_be_undone_fails_the_partition_until_reopened(
    broker: Broker, data_dir: Path, topic: str
) -> None:
    # Every fsync of the segment fails: the append's, then the cut's.
    with inject(IOFault("fsync", errno.EIO, "log", times=None)), pytest.raises(StoreError) as raised:
        broker.append(TOPIC, 0, new_records(ACKED, 5))
    assert "takes no more appends until reopened" in str(raised.value)
    # The disk is back, but this writer does not build on what it cannot vouch for.
    with pytest.raises(StoreError, match="takes no appends"):
        broker.append(TOPIC, 0, new_records(ACKED, 5))
    assert_records(read_all(broker, TOPIC, 0)[:ACKED], TOPIC, 0, 0, ACKED)
    with Broker(data_dir) as reopened:
        assert_recovered_and_usable(reopened, data_dir, ACKED)


# -- the catalog failing ---------------------------------------------------------------------


class FailingCommits:
    """A catalog connection whose ``fail_at``-th COMMIT fails as SQLite's does on a full
    disk (without committing: the transaction stays open, as SQLite may leave it)."""

    def __init__(self, conn: sqlite3.Connection, fail_at: int) -> None:
        self._conn = conn
        self.fail_at = fail_at
        self.commits = 0
        self.fired = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.strip().upper() == "COMMIT":
            self.commits += 1
            if self.commits == self.fail_at:
                self.fired = True
                raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __enter__(self) -> sqlite3.Connection:
        return self._conn.__enter__()

    def __exit__(self, *exc: object) -> Any:
        return self._conn.__exit__(*exc)


def fail_commit(broker: Broker, at: int) -> FailingCommits:
    failing = FailingCommits(broker.catalog.db.conn, at)
    broker.catalog.db.conn = failing  # type: ignore[assignment]
    return failing


def heal(broker: Broker, failing: FailingCommits) -> None:
    broker.catalog.db.conn = failing._conn


def test_catalog_full_during_append_keeps_the_written_batch_unacknowledged(
    broker: Broker, data_dir: Path, topic: str
) -> None:
    failing = fail_commit(broker, 1)
    with pytest.raises(StoreError, match="database or disk is full") as raised:
        broker.append(TOPIC, 0, new_records(ACKED, 60))
    heal(broker, failing)
    assert failing.fired and "\n" not in str(raised.value)
    assert not broker.catalog.db.conn.in_transaction  # rolled back, not left open
    assert broker.catalog.partition(TOPIC, 0).next_offset == ACKED  # not acknowledged
    # The batch is durable in the log: like Kafka, Ebbtide keeps what its log holds
    # (the records were not acknowledged; a retrying producer may duplicate them).
    broker.recover(TOPIC)
    assert broker.catalog.partition(TOPIC, 0).next_offset == ACKED + 60
    assert_recovered_and_usable(broker, data_dir, ACKED)


def test_catalog_full_during_append_is_reconciled_by_the_next_append(broker: Broker, topic: str) -> None:
    failing = fail_commit(broker, 1)
    with pytest.raises(StoreError):
        broker.append(TOPIC, 0, new_records(ACKED, 60))
    heal(broker, failing)
    result = broker.append(TOPIC, 0, new_records(ACKED + 60, 10))
    assert result.base_offset == ACKED + 60
    assert findings(broker) == []


def test_catalog_full_at_each_step_of_a_prune_cycle(tmp_path: Path) -> None:
    """The k-th write transaction of a cycle fails, for every k: the cycle fails with
    the error (raised, or journaled as the topic's failure), and the next cycle's
    recovery leaves no cycle running, no action planned and a consistent store."""
    steps = 0
    for k in range(1, 40):
        data_dir = tmp_path / f"k{k}"
        with Broker(data_dir) as broker:
            make_topic(broker, TOPIC, partitions=1, records=ACKED, segment_size="4KiB")
            cut = sealed_bases(broker, TOPIC, 0)[3][0]
            work = cut_work(broker, TOPIC, {0: cut})
            failing = fail_commit(broker, k)
            error: str | None = None
            try:
                result = execute(broker, [work], now=NOW, trigger="manual", actor="test")
                error = result.failed.get(TOPIC)
            except StoreError as raised:
                error = str(raised)
            heal(broker, failing)
            if not failing.fired:
                break
            steps += 1
            assert error is not None and "database or disk is full" in error, (k, error)

            recover_interrupted(broker)
            journal = Journal(broker.catalog)
            assert journal.cycles(status="running", limit=None) == [], k
            assert journal.actions(status="planned", limit=None) == [], k
            row = broker.catalog.partition(TOPIC, 0)
            assert row.log_start_offset in (0, cut), k
            assert_records(read_all(broker, TOPIC, 0), TOPIC, 0, row.log_start_offset, ACKED)
            assert_recovered_and_usable(broker, data_dir, ACKED)
    assert steps >= 5, f"only {steps} write transactions in a cycle"


# -- prunes ----------------------------------------------------------------------------------

PRUNE_FAULTS: dict[str, IOFault] = {
    "rename_of_segment": IOFault("replace", errno.EIO, "log"),
    "unlink_of_segment": IOFault("unlink", errno.EIO, "deleted"),
    "fsync_of_directory": IOFault("fsync", errno.EIO, "dir"),
}


@pytest.mark.parametrize("name", list(PRUNE_FAULTS))
def test_prune_fault_fails_cleanly_and_the_deletion_is_finished(
    broker: Broker, data_dir: Path, topic: str, name: str
) -> None:
    template = PRUNE_FAULTS[name]
    fault = IOFault(template.call, template.errno, template.target)
    bases = segment_files(data_dir)
    with inject(fault), pytest.raises(EbbError) as raised:
        delete_oldest(broker, TOPIC, 0, 2, actor="test")
    assert fault.fired == 1
    message = str(raised.value)
    assert "\n" not in message and "events/0" in message and "EIO" in message, message
    # The log start (the durable point) moved: the deletion is finished, not undone.
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == bases[2]
    journal = Journal(broker.catalog)
    assert journal.actions(status="planned", limit=None) == []
    assert [a.action for a in journal.actions(action="topic_failed", limit=None)] == ["topic_failed"]
    assert_records(read_all(broker, TOPIC, 0), TOPIC, 0, bases[2], ACKED)
    assert_recovered_and_usable(broker, data_dir, ACKED)
    assert not list((data_dir / "topics" / TOPIC / "0").glob("*.deleted"))


# -- the CLI -----------------------------------------------------------------------------------


def test_ebb_produce_on_a_full_disk_prints_one_error_line_with_what_was_acknowledged(ebb) -> None:
    assert ebb("topic", "create", TOPIC).code == 0
    # Appends of 1000 records, one batch each: the third one finds the disk full.
    with inject(IOFault("pwrite", errno.ENOSPC, "log", skip=2)):
        result = ebb("produce", TOPIC, "--partition", "0", "--count", "3000", "--size", "100")
    assert result.code == 2 and result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ebb: error: "), result.err
    assert "events/0" in lines[0] and "No space left on device (ENOSPC)" in lines[0]
    assert "2000 record(s) before it were acknowledged (partition 0 offsets 0..1999)" in lines[0]
    again = ebb("produce", TOPIC, "--partition", "0", "--count", "10", "--size", "100", "--json")
    assert again.code == 0, again.err
    assert '"base_offset": 2000' in again.out
    checked = ebb("verify")
    assert checked.code == 0, checked.out
