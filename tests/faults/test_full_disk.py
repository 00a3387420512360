"""Deleting on a full disk (issue 17 item 1): on a real small filesystem, mounted by
the test in a directory it owns, filled by producers until they are refused, every
deletion path (``truncate``, ``purge``, a prune cycle planned on Spark) still frees
space, and the producer that was refused appends again without a restart.

The mount needs CAP_SYS_ADMIN; where the kernel refuses it the tests that need it
are skipped with the reason printed. The reserve's SQLITE_FULL hook is tested with
the simulated seam of tests/faults/test_storage_faults.py as well.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.broker import Broker
from engine.errors import StoreError
from engine.prune.executor import execute
from engine.prune.operations import delete_oldest
from engine.prune.pruner import Pruner
from engine.prune.scratch import fallback_dir, scratch_dir
from engine.prune.session import SparkEngine
from engine.store.batch import NewRecord
from engine.store.reserve import RESERVE_NAME, free_bytes
from tests.support.prune_driver import cut_work, make_topic, sealed_bases

TOPIC = "t"
FS_SIZE = "8m"


@pytest.fixture(autouse=True)
def own_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's scratch falls back to the temporary directory: this test's own."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs mounted on a directory of this test; unmounted after."""
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE},mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
        print(reason)
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


@pytest.fixture
def data_dir(small_fs: Path) -> Path:
    return small_fs / "data"


def fill(broker: Broker) -> int:
    """Produce until the filesystem refuses; returns the records acknowledged."""
    acked = broker.catalog.partition(TOPIC, 0).next_offset
    for count, size in ((1000, 200), (20, 100)):
        while True:
            try:
                broker.append(TOPIC, 0, [NewRecord(bytes(size))] * count)
            except StoreError as error:
                assert "No space left on device" in str(error) or "disk is full" in str(error), error
                break
            acked += count
    return acked


@pytest.fixture
def full(data_dir: Path) -> Iterator[Broker]:
    """A broker on the small filesystem, its one topic's producer just refused."""
    with Broker(data_dir) as broker:
        broker.create_topic(TOPIC, 1, {"segment_size": "64KiB", "retention_time": "1ms"})
        assert (data_dir / RESERVE_NAME).exists()
        fill(broker)
        assert free_bytes(data_dir) < 64 * 1024
        # Producers never take the reserve: it is kept for deletion.
        assert (data_dir / RESERVE_NAME).exists()
        yield broker


def test_truncate_frees_space_on_a_full_filesystem_and_the_producer_resumes(full: Broker, ebb) -> None:
    before = free_bytes(full.data.root)
    result = ebb("truncate", TOPIC, "--partition", "0", "--oldest-segments", "10")
    assert (result.code, result.err) == (0, ""), result.err
    assert "deleted 10 segment(s)" in result.out
    assert free_bytes(full.data.root) > before + 8 * 64 * 1024
    # The reserve is back once space allows, and the refused producer appends again,
    # in the same process.
    assert (full.data.root / RESERVE_NAME).exists()
    next_offset = full.catalog.partition(TOPIC, 0).next_offset
    assert full.append(TOPIC, 0, [NewRecord(b"after")]).base_offset == next_offset


def test_purge_frees_space_on_a_full_filesystem(full: Broker, ebb) -> None:
    result = ebb("purge", TOPIC, "--yes")
    assert (result.code, result.err) == (0, ""), result.err
    row = full.catalog.partition(TOPIC, 0)
    assert row.log_start_offset == row.next_offset
    assert free_bytes(full.data.root) > 4 * 1024 * 1024


def test_a_prune_cycle_plans_and_frees_space_on_a_full_filesystem(full: Broker, spark_engine: SparkEngine) -> None:
    """The scheduled cycle (engine and console run this same Pruner): its Spark input
    files go outside the full data directory, its journal writes use the reserve."""
    spark_engine.session(timeout=300)
    before = free_bytes(full.data.root)
    outcome = Pruner(full, spark_engine).cycle(trigger="schedule", actor="engine")
    assert outcome.status == "done" and not outcome.failed, outcome
    assert outcome.applied > 50
    assert free_bytes(full.data.root) > before + 50 * 64 * 1024
    assert not (full.data.root / "snapshots").exists()
    assert (fallback_dir(full.data.root) / "snapshots").is_dir()  # the planner's, outside the full disk
    full.append(TOPIC, 0, [NewRecord(b"after")])


def test_scratch_goes_outside_a_nearly_full_data_directory(small_fs: Path, tmp_path: Path) -> None:
    assert scratch_dir(small_fs, "logs") == fallback_dir(small_fs) / "logs"
    assert scratch_dir(small_fs, "logs").is_relative_to(tmp_path / "tmp")
    roomy = tmp_path / "roomy"
    roomy.mkdir()
    if free_bytes(roomy) >= 64 * 1024 * 1024:
        assert scratch_dir(roomy, "logs") == roomy / "logs"


# -- the reserve's SQLITE_FULL hook (simulated) ------------------------------------------------


class FullAtCommit:
    """A catalog connection whose ``fail_at``-th COMMIT fails with SQLITE_FULL."""

    def __init__(self, conn: sqlite3.Connection, fail_at: int) -> None:
        self._conn = conn
        self.fail_at = fail_at
        self.commits = 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.strip().upper() == "COMMIT":
            self.commits += 1
            if self.commits == self.fail_at:
                error = sqlite3.OperationalError("database or disk is full")
                error.sqlite_errorcode = 13  # type: ignore[attr-defined]
                raise error
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_cycle_whose_write_finds_the_disk_full_releases_the_reserve(tmp_path: Path) -> None:
    with Broker(tmp_path / "data") as broker:
        make_topic(broker, TOPIC, partitions=1)
        reserve = tmp_path / "data" / RESERVE_NAME
        assert reserve.exists()
        conn = broker.catalog.db.conn
        broker.catalog.db.conn = FullAtCommit(conn, 1)  # type: ignore[assignment]
        try:
            with pytest.raises(StoreError, match="disk is full"):
                execute(broker, [cut_work(broker, TOPIC, {0: sealed_bases(broker, TOPIC, 0)[2][0]})], now=0)
        finally:
            broker.catalog.db.conn = conn
        assert not reserve.exists()
        # An append finding the disk full does not release it: only deletion may.
        broker.reserve.ensure()
        broker.catalog.db.conn = FullAtCommit(conn, 1)  # type: ignore[assignment]
        try:
            with pytest.raises(StoreError, match="disk is full"):
                broker.append(TOPIC, 0, [NewRecord(b"x")])
        finally:
            broker.catalog.db.conn = conn
        assert reserve.exists()
        # The next cycle (recovering the failed one) runs and leaves the reserve made.
        result = execute(broker, [cut_work(broker, TOPIC, {0: sealed_bases(broker, TOPIC, 0)[2][0]})], now=0)
        assert result.applied == 2 and reserve.exists()


def test_with_not_one_byte_free_the_catalog_opens_and_a_deletion_frees_space(
    full: Broker, small_fs: Path, data_dir: Path
) -> None:
    """Another file takes the last bytes: SQLite cannot make its shared-memory file,
    so the catalog opens in exclusive locking mode; once a deletion has freed space,
    the connection lets other processes in again, without a restart."""
    full.close()
    fd = os.open(small_fs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, bytes(4096)):
            pass
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert free_bytes(data_dir) < 4096
    with Broker(data_dir) as deleting:
        assert deleting.catalog.topics()[0].name == TOPIC
        result = delete_oldest(deleting, TOPIC, 0, 10)
        assert result.segments_deleted == 10
        with Broker(data_dir) as producer:
            next_offset = producer.catalog.partition(TOPIC, 0).next_offset
            assert producer.append(TOPIC, 0, [NewRecord(b"after")]).base_offset == next_offset
        assert deleting.catalog.partition(TOPIC, 0).next_offset == next_offset + 1


def test_the_reserve_is_not_made_again_while_space_is_short(full: Broker, data_dir: Path) -> None:
    reserve = full.reserve
    assert reserve.release() and not reserve.present
    assert not reserve.ensure()  # under twice its size free: making it would fill the disk
    assert sorted(p.name for p in data_dir.iterdir() if p.name.startswith(RESERVE_NAME)) == []
    delete_oldest(full, TOPIC, 0, 40)
    assert reserve.present  # made again by the cycle once the space was back
