"""Opening the catalog's SQLite database (engine/catalog/database.py): connections
that open a new catalog together all open, in WAL mode."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from engine.broker import Broker
from engine.catalog.database import connect


def test_the_switch_to_wal_waits_for_a_writer_of_the_new_file(tmp_path: Path) -> None:
    # The race of two first openers, made certain: while one connection writes the
    # new file in rollback mode, SQLite refuses another's switch to WAL at once,
    # without waiting out its busy timeout.
    path = tmp_path / "catalog.db"
    first = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    first.execute("BEGIN IMMEDIATE")
    first.execute("CREATE TABLE earlier (x)")
    done = threading.Timer(0.3, lambda: first.execute("COMMIT"))
    done.start()
    try:
        db = connect(path)
    finally:
        done.join()
        first.close()
    assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.conn.execute("SELECT name FROM sqlite_master").fetchall() == [("earlier",)]
    db.conn.close()


def test_brokers_opening_a_new_data_directory_together_all_open(tmp_path: Path) -> None:
    failures: list[str] = []
    for attempt in range(10):
        root = tmp_path / f"data-{attempt}"
        start = threading.Barrier(8)

        def open_one(root: Path = root, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                with Broker(root) as broker:
                    broker.catalog.topics()
            except Exception as error:  # noqa: BLE001 - collected for the assertion
                failures.append(f"{type(error).__name__}: {error}")

        threads = [threading.Thread(target=open_one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
