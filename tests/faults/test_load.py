"""Load, the short version of ``bench/load.py`` for CI (SPEC §2, §5): two producer
processes, one consumer process, prune cycles every 0.5 s and real ``ebb`` commands,
all on one data directory, in alternating windows with cycles, paused (``ebb pause``)
and with the pruning process frozen.

The cycles run through the executor without Spark (``bench/load.py --engine
executor``: each partition cut back under its size cap, oldest sealed segments first,
as ``max_partition_size`` plans it): a JVM start and a first plan take 15-40 s on a
busy machine, which would leave too little of a CI budget for the load itself. The
executor, the locks and the catalog writes are the same as under ``ebb engine``.

Nothing here asserts a speed: throughput must only be above zero in every window.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from engine.broker import Broker
from tests.support.cli import REPO, subprocess_env

TOPIC = "load"
ERRORS = re.compile(r"database is locked|OperationalError|Traceback|ebb: error|ERROR|Fatal Python error")


def _value(producer: int, seq: int, size: int) -> bytes:
    """What bench/load.py's producer ``producer`` wrote as its record ``seq``."""
    head = b"P%d:%012d|" % (producer, seq)
    return (head + b"." * size)[:size]


@pytest.mark.slow
def test_producers_consumer_and_prune_cycles_under_load(tmp_path: Path) -> None:
    record_size = 200
    argv = [
        sys.executable,
        "-m",
        "bench.load",
        "--engine",
        "executor",
        "--interval",
        "500ms",
        "--producers",
        "2",
        "--consumers",
        "1",
        "--partitions",
        "2",
        "--duration",
        "16",
        "--window",
        "4",
        "--settle",
        "0.5",
        "--baseline",
        "both",
        "--record-size",
        str(record_size),
        "--segment-size",
        "128KiB",
        "--max-partition-size",
        "1MiB",
        "--stall",
        "20",
        "--start-timeout",
        "60",
        "--cli-probe",
        "2",
        "--dir",
        str(tmp_path),
        "--keep",
        "--json",
        "--quiet",
    ]
    done = subprocess.run(argv, capture_output=True, timeout=240, cwd=REPO, env=subprocess_env(), check=False)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert out.strip(), f"no report (exit {done.returncode}): {err[-3000:]}"
    report = json.loads(out.strip().splitlines()[-1])
    assert done.returncode == 0 and report["ok"], f"{report['failures']}\n{out[:4000]}\n{err[-3000:]}"
    assert not ERRORS.search(err), err[-3000:]

    # Every process ran to the end, and nothing reached its stderr (the watchdog and
    # the exit statuses are the bench's; the stderr files are checked here again).
    root = Path(report["root"])
    run_dir = root / "run"
    stderr_files = sorted(run_dir.glob("*.stderr"))
    assert {p.name for p in stderr_files} >= {
        "producer-0.stderr",
        "producer-1.stderr",
        "consumer-0.stderr",
        "engine.stderr",
    }
    for path in stderr_files:
        text = path.read_text(errors="replace")
        assert not text.strip(), f"{path.name}:\n{text[-3000:]}"
    assert report["errors"] == []
    assert report["cli_runs"] >= 5  # ebb pause/resume at window changes, and the probes

    # Every window made progress; cycles ran and deleted while the producers appended.
    windows = report["windows"]
    assert {w["mode"] for w in windows} == {"cycles", "paused", "stopped"}
    for w in windows:
        assert w["records"] > 0 and w["records_per_s"] > 0, w
        assert w["consumed"] > 0, w
    modes = report["modes"]
    assert modes["cycles"]["cycles"] > 0 and modes["cycles"]["segments_deleted"] > 0
    assert modes["paused"]["segments_deleted"] == 0
    assert modes["stopped"]["cycles"] == 0 and modes["stopped"]["segments_deleted"] == 0
    journal = report["journal"]
    assert journal["segments_deleted"] > 0
    assert set(journal["cycles"]) <= {"done", "paused"}, journal["cycles"]
    assert journal["cycle_errors"] == [] and journal["topic_failures"] == []

    # Every acknowledged record (the producers log each acknowledged append to a side
    # file) is readable, whole and its producer's, or below its partition's log start.
    readable = below = 0
    with Broker(root / "data") as broker:
        log_start = {p.partition: p.log_start_offset for p in broker.catalog.partitions(TOPIC)}
        for producer in (0, 1):
            lines = (run_dir / f"producer-{producer}.acks").read_text().splitlines()
            assert lines, f"producer {producer} acknowledged nothing"
            for line in lines:
                fields = line.split()
                if len(fields) != 9:
                    continue
                partition, base, next_offset, seq = (int(f) for f in fields[2:6])
                first = max(base, log_start[partition])
                below += min(first, next_offset) - base
                if first >= next_offset:
                    continue
                records = broker.read(TOPIC, partition, first, next_offset - first)
                assert [r.offset for r in records] == list(range(first, next_offset)), (producer, line)
                for r in records:
                    assert r.value == _value(producer, seq + r.offset - base, record_size), (producer, r.offset)
                readable += len(records)
        # Dense offsets: the two producers' acknowledged ranges tile each partition
        # from 0 to its log end.
        for partition, row in enumerate(broker.catalog.partitions(TOPIC)):
            spans = sorted(
                (int(f[3]), int(f[4]))
                for producer in (0, 1)
                for f in (line.split() for line in (run_dir / f"producer-{producer}.acks").read_text().splitlines())
                if len(f) == 9 and int(f[2]) == partition
            )
            assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in pairwise(spans)), partition
            assert spans[-1][1] == row.next_offset
    assert readable > 0 and below > 0


# -- the rules that keep contention safe, checked on every write path of one process ----------

_WRITE_SQL = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b", re.IGNORECASE)


def test_writes_are_immediate_and_no_file_lock_is_taken_inside_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rules make several processes safe on one catalog (SPEC §2):

    - every write runs in a ``BEGIN IMMEDIATE`` transaction: a deferred one that reads
      first fails at once with "database is locked" (SQLITE_BUSY_SNAPSHOT, no busy
      wait) when another process committed since its read;
    - lock order: the prune lock, then a partition's file lock, then the catalog's
      write lock; never a file lock while a write transaction is open (a process
      holding the write lock and waiting for a partition lock, against a producer
      holding that partition lock and waiting for the write lock, is a deadlock that
      only the timeouts break).

    Every write path of the engine is run here with each connection traced."""
    import sqlite3

    import engine.store.lock as lock_module
    from engine.catalog import database
    from engine.prune import operations
    from engine.prune.executor import execute, recover_interrupted
    from engine.store.batch import NewRecord

    #: each traced connection's transaction: None, "deferred" or "immediate"
    transactions: list[dict[str, str | None]] = []
    violations: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        conn = real_connect(*args, **kwargs)
        state = {"tx": None}

        def trace(sql: str) -> None:
            head = sql.lstrip().upper()
            if head.startswith("BEGIN"):
                state["tx"] = "immediate" if "IMMEDIATE" in head or "EXCLUSIVE" in head else "deferred"
            elif head.startswith(("COMMIT", "END")) or (head.startswith("ROLLBACK") and " TO " not in head):
                state["tx"] = None
            elif _WRITE_SQL.match(sql) and state["tx"] == "deferred":
                violations.append(f"write in a deferred transaction: {sql.strip()[:120]}")
            elif (
                _WRITE_SQL.match(sql)
                and state["tx"] is None
                and not re.match(r"\s*CREATE (TEMP )?\w+ IF NOT EXISTS", sql, re.IGNORECASE)
                # the connection's own temporary schema (the metadata files' tracking)
                and not re.match(r"\s*(DELETE FROM|INSERT INTO|UPDATE) temp\.", sql, re.IGNORECASE)
            ):
                violations.append(f"write outside a transaction: {sql.strip()[:120]}")

        conn.set_trace_callback(trace)
        transactions.append(state)
        return conn

    monkeypatch.setattr(database.sqlite3, "connect", connect)
    real_acquire = lock_module.FileLock.acquire

    def acquire(self, timeout):  # type: ignore[no-untyped-def]
        if any(t["tx"] == "immediate" for t in transactions):
            violations.append(f"file lock {self.path.name} taken inside a write transaction")
        return real_acquire(self, timeout)

    monkeypatch.setattr(lock_module.FileLock, "acquire", acquire)

    with Broker(tmp_path / "data") as broker:
        broker.create_topic(TOPIC, 2, {"segment_size": "4KiB"})
        broker.alter_topic(TOPIC, {"retention_time": "1h"})
        broker.create_group(TOPIC, "sub", "subscriber", "earliest")
        for i in range(40):
            broker.produce(TOPIC, [NewRecord(b"v%04d" % i + b"." * 900, None, None)] * 3, partition=i % 2)
        broker.consume(TOPIC, "reader", max_records=50)
        broker.commit(TOPIC, "sub", 0, 10)
        broker.recover(TOPIC)
        operations.delete_oldest(broker, TOPIC, 0, 2)
        operations.truncate(broker, TOPIC, 1, before_offset=broker.catalog.partition(TOPIC, 1).next_offset - 5)
        operations.move_group(broker, TOPIC, "sub", 0, to_offset=broker.catalog.partition(TOPIC, 0).next_offset)
        operations.set_hold(broker, TOPIC, True)
        operations.set_hold(broker, TOPIC, False)
        operations.pause(broker)
        execute(broker, [], now=broker.clock())
        operations.resume(broker)
        recover_interrupted(broker)
        operations.expire_group(broker, TOPIC, "reader")
        operations.purge(broker, TOPIC)
        broker.delete_group(TOPIC, "sub")
        broker.delete_topic(TOPIC)
    assert transactions, "the catalog's connections were not traced"
    assert violations == []
