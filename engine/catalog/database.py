"""The SQLite connection the catalog and the journal are written through.

One connection per process and thread that owns it: WAL so that readers never block
the writer, ``synchronous=FULL`` so that a committed transaction survives a power
loss, a busy timeout so that concurrent writers queue instead of failing, and
``BEGIN IMMEDIATE`` so that a write transaction takes the write lock up front (a
deferred one could fail half-way on upgrade).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlite_utils

from engine.errors import StoreError

BUSY_TIMEOUT_MS = 30_000


def connect(path: Path) -> sqlite_utils.Database:
    """Open (creating if needed, readable by its owner only) the database at ``path``."""
    if not path.exists():
        # Create the file with owner-only permissions before SQLite opens it. SQLite
        # gives the -wal and -shm files it creates the database file's permissions
        # (not the umask's), so they are owner-only too (tests/engine/test_access.py).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")  # a constant: PRAGMA takes no parameters
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as error:
        raise StoreError(f"cannot open the catalog {path}: {error}") from None
    # No sqlite-utils plugins: one installed for another tool must not change the
    # catalog's connection, and finding them reads every installed package's metadata.
    return sqlite_utils.Database(conn, execute_plugins=False)


@contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error.

    sqlite-utils' own ``atomic()`` blocks inside it become savepoints."""
    conn = db.conn
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        raise StoreError(f"the catalog is busy ({error}); another process holds it, try again") from None
    try:
        yield db
        conn.execute("COMMIT")
    except BaseException as error:
        # A failed COMMIT too: SQLite may or may not have rolled back on its own
        # (SQLITE_FULL, SQLITE_IOERR), and a transaction left open would make every
        # later BEGIN fail.
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the connection is broken; the error that broke it is the one to raise
        if isinstance(error, sqlite3.OperationalError):
            # A full disk, an I/O error: an operator's problem, stated in one line.
            raise StoreError(f"the catalog could not be written ({error}); nothing of this change was saved") from None
        raise


@contextmanager
def read_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A deferred read transaction: every query inside sees the same committed state
    (WAL gives a snapshot), while writers go on."""
    db.conn.execute("BEGIN")
    try:
        yield db
    finally:
        db.conn.execute("COMMIT")
