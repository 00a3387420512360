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
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from engine.catalog.damage import CheckedConnection, write_lock_holder
from engine.errors import CatalogBusy, StoreError

BUSY_TIMEOUT_MS = 30_000
SQLITE_FULL = 13
#: the shared-memory file a WAL database needs beside it (its first 32 KiB region)
SHM_BYTES = 32 * 1024

#: per connection, what to do when a write fails for lack of space (the deletion
#: path's reserve, engine/store/reserve.py)
_on_full: weakref.WeakKeyDictionary[sqlite_utils.Database, Callable[[], object]] = weakref.WeakKeyDictionary()
#: connections opened in exclusive locking mode on a full disk, with their path
_exclusive: weakref.WeakKeyDictionary[sqlite_utils.Database, Path] = weakref.WeakKeyDictionary()


@contextmanager
def on_full(db: sqlite_utils.Database, handler: Callable[[], object]) -> Iterator[None]:
    """Call ``handler`` when a write transaction of ``db`` fails with SQLITE_FULL,
    inside the ``with`` block."""
    _on_full[db] = handler
    try:
        yield
    finally:
        _on_full.pop(db, None)


def connect_read_only(path: Path, timeout: float) -> sqlite_utils.Database:
    """The existing database at ``path``, for reading only: nothing is created, no
    schema is made or changed, nothing is written; a locked database is waited for
    ``timeout`` seconds at most."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=timeout)
    return sqlite_utils.Database(conn, execute_plugins=False)


def connect(path: Path) -> sqlite_utils.Database:
    """Open (creating if needed, readable by its owner only) the database at ``path``."""
    if not path.exists():
        # Create the file with owner-only permissions before SQLite opens it. SQLite
        # gives the -wal and -shm files it creates the database file's permissions
        # (not the umask's), so they are owner-only too (tests/engine/test_access.py).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    try:
        try:
            conn = _open(path, exclusive=False)
        except sqlite3.OperationalError:
            if _free_bytes(path.parent) >= SHM_BYTES:
                raise
            # A full disk: SQLite cannot make the shared-memory file (-shm) that WAL
            # needs. In exclusive locking mode it keeps that index in memory, so the
            # catalog opens and a deletion can free space; the price is that this
            # connection holds the database until it closes (engine/store/reserve.py).
            conn = _open(path, exclusive=True)
            db = sqlite_utils.Database(conn)
            _exclusive[db] = path
            return db
    except sqlite3.Error as error:
        raise StoreError(f"cannot open the catalog {path}: {error}") from None
    # No sqlite-utils plugins: one installed for another tool must not change the
    # catalog's connection, and finding them reads every installed package's metadata.
    return sqlite_utils.Database(conn, execute_plugins=False)


def select_rows(db: sqlite_utils.Database, sql: str, params: Sequence[object] = ()) -> Iterator[dict[str, Any]]:
    """The rows of a ``SELECT`` as dicts by column name, as sqlite-utils' ``query``
    gives them, without the savepoint it wraps every statement in (in case one
    returns no rows, which a ``SELECT`` always does): two more statements a query,
    a third of a one-record produce's."""
    cursor = db.conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    return (dict(zip(names, row)) for row in cursor)


def is_exclusive(db: sqlite_utils.Database) -> bool:
    """Whether ``db`` holds the catalog in exclusive locking mode (a full disk): no
    other process can read it meanwhile."""
    return db in _exclusive


def share_again(db: sqlite_utils.Database) -> bool:
    """Give up the exclusive lock of a connection opened on a full disk once there is
    room again (after a deletion): reopen it in normal locking mode, in place, so that
    other processes use the catalog again without this one restarting. Call it
    outside any transaction; True if it was reopened."""
    path = _exclusive.get(db)
    if path is None or _free_bytes(path.parent) < 2 * SHM_BYTES:
        return False
    db.conn.close()  # the exclusive lock goes with it, or no other connection could open
    try:
        db.conn = _open(path, exclusive=False)
    except sqlite3.Error:
        db.conn = _open(path, exclusive=True)
        return False
    del _exclusive[db]
    return True


def _open(path: Path, *, exclusive: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_MS / 1000,
        check_same_thread=False,
        factory=CheckedConnection,
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")  # a constant: PRAGMA takes no parameters
        if exclusive:
            conn.execute("PRAGMA locking_mode = EXCLUSIVE")  # before the first access to the WAL
        _enter_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _enter_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, waiting up to the busy timeout for the locks it needs.

    The first connections to a new catalog race to convert it from rollback mode, and
    SQLite answers a loser SQLITE_BUSY at once, without its busy handler: two
    processes (or the demo's threads) opening a fresh data directory together must
    both open, so the switch is tried again as a busy write would wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorname", None) not in _BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _free_bytes(directory: Path) -> int:
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


#: the SQLite errors of a lock held by another connection
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_RECOVERY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_TIMEOUT")


@contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error.

    sqlite-utils' own ``atomic()`` blocks inside it become savepoints."""
    conn = db.conn
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if getattr(error, "sqlite_errorname", None) not in _BUSY:
            # Not a lock another process holds (waiting would not help): a read-only
            # file, a directory in the place of catalog.db-shm, a failing disk.
            path = conn.path if isinstance(conn, CheckedConnection) else "catalog.db"
            raise StoreError(
                f"the catalog cannot be written ({error}): {path} and its -wal and -shm files must be files"
                " this user can write"
            ) from None
        holder = write_lock_holder(conn.path) if isinstance(conn, CheckedConnection) else None
        who = f"process {holder}" if holder else "another process"
        raise CatalogBusy(f"the catalog is busy ({error}); {who} holds it, try again") from None
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
            if getattr(error, "sqlite_errorcode", None) == SQLITE_FULL and db in _on_full:
                _on_full[db]()
            # A full disk, an I/O error: an operator's problem, stated in one line.
            raise StoreError(f"the catalog could not be written ({error}); nothing of this change was saved") from None
        raise
    if isinstance(conn, CheckedConnection) and conn.on_commit is not None:
        conn.on_commit()  # the catalog's metadata files (engine/catalog/catalog.py)


@contextmanager
def read_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A deferred read transaction: every query inside sees the same committed state
    (WAL gives a snapshot), while writers go on."""
    db.conn.execute("BEGIN")
    try:
        yield db
    finally:
        db.conn.execute("COMMIT")
