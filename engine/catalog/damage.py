"""A damaged catalog, told apart at the SQLite boundary.

The catalog's connection is a :class:`CheckedConnection` (engine/catalog/database.py):
every statement run and every row fetched that SQLite refuses as damaged
(``SQLITE_CORRUPT``: "database disk image is malformed", ``SQLITE_NOTADB``) raises
:class:`CatalogDamaged`, one line naming the file and the remedy, wherever in the
engine the query ran (catalog, journal, planner snapshot, console models). A damaged
page is only noticed when a query reads it; ``ebb verify`` reads every page
(``PRAGMA integrity_check``).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from engine.errors import CatalogDamaged, StoreError

#: SQLite's primary result codes that mean the file is not a sound database
_DAMAGE_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
REMEDY = "run `ebb verify --repair` to rebuild it from the data directory"
#: bytes of the ``-shm`` file that SQLite locks (os_unix.c): the WAL write lock, and
#: the one every connection holds a shared lock on while it has the database open
_WAL_WRITE_LOCK = 120
_DMS_LOCK = 128
#: struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid (native alignment)
_FLOCK = "@hhqqi4x"


def is_damage(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.DatabaseError) and code is not None and code & 0xFF in _DAMAGE_CODES


def damaged(path: Path, what: str) -> CatalogDamaged:
    return CatalogDamaged(f"the catalog {path} {what}; {REMEDY}")


def holds_topics(root: Path) -> bool:
    """Whether the data directory at ``root`` has topic directories: a catalog that is
    missing or empty there has been lost, not yet created."""
    try:
        return any(entry.is_dir() for entry in os.scandir(root / "topics"))
    except (FileNotFoundError, NotADirectoryError):
        # No topics directory, or ``root`` is no directory at all (a file given as
        # --data-dir): opening it says so.
        return False
    except OSError as error:
        # Unknown is not "none": a lost catalog must not pass for a new data directory.
        raise StoreError(f"cannot list {root / 'topics'}: {error.strerror}") from None


def write_lock_holder(path: Path) -> int | None:
    """The pid of the process that holds the catalog's write lock, or None."""
    return _lock_holder(path, _WAL_WRITE_LOCK)


def open_by(path: Path) -> int | None:
    """The pid of a process that has the catalog open, or None."""
    return _lock_holder(path, _DMS_LOCK)


def _lock_holder(path: Path, byte: int) -> int | None:
    """The pid of another process (POSIX locks never report the caller's own) that
    holds a lock on ``byte`` of the catalog's ``-shm`` file, or None."""
    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY)
    except OSError:
        return None
    try:
        probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
        kind, _whence, _start, _len, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    finally:
        os.close(fd)
    return pid if kind != fcntl.F_UNLCK and pid > 0 else None


@contextmanager
def _checked(connection: CheckedConnection) -> Iterator[None]:
    try:
        yield
    except sqlite3.DatabaseError as error:
        if not is_damage(error):
            raise
        connection.damage = damaged(connection.path, f"is damaged ({error})")
        raise connection.damage from None


class CheckedCursor(sqlite3.Cursor):
    """A cursor whose damage errors, at execution or while rows are fetched, are
    :class:`CatalogDamaged`."""

    connection: CheckedConnection

    def execute(self, *args: Any) -> Self:
        with _checked(self.connection):
            super().execute(*args)
        return self

    def executemany(self, *args: Any) -> Self:
        with _checked(self.connection):
            super().executemany(*args)
        return self

    def executescript(self, *args: Any) -> Self:
        with _checked(self.connection):
            super().executescript(*args)
        return self

    def fetchone(self) -> Any:
        with _checked(self.connection):
            return super().fetchone()

    def fetchmany(self, *args: Any) -> list[Any]:
        with _checked(self.connection):
            return super().fetchmany(*args)

    def fetchall(self) -> list[Any]:
        with _checked(self.connection):
            return super().fetchall()

    def __next__(self) -> Any:
        with _checked(self.connection):
            return super().__next__()


class CheckedConnection(sqlite3.Connection):
    """``sqlite3.connect(path, factory=CheckedConnection)``: statements run through
    :class:`CheckedCursor`."""

    def __init__(self, path: Any, *args: Any, **kwargs: Any) -> None:
        self.path = Path(path)
        #: the damage this connection met, if any (``ebb engine`` stops on it)
        self.damage: CatalogDamaged | None = None
        #: called after each write transaction commits (engine/catalog/database.py)
        self.on_commit: Callable[[], None] | None = None
        with _checked(self):
            super().__init__(path, *args, **kwargs)

    def cursor(self, factory: Any = CheckedCursor) -> Any:
        return super().cursor(factory)

    def execute(self, *args: Any) -> CheckedCursor:
        return self.cursor().execute(*args)

    def executemany(self, *args: Any) -> CheckedCursor:
        return self.cursor().executemany(*args)

    def executescript(self, *args: Any) -> CheckedCursor:
        return self.cursor().executescript(*args)
