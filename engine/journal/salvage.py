"""The journal's history kept across a catalog rebuild (engine/integrity/rebuild.py):
the rows of the old file's cycles, actions, policy changes and disk samples that can
still be read."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from engine.catalog.database import write_transaction
from engine.journal import trimmed
from engine.journal.rows import current_cycle_row

#: the journal's history, kept from the old catalog as far as it can be read
_HISTORY = {
    "cycles": "SELECT * FROM cycles",
    "actions": "SELECT * FROM actions",
    "policy_changes": "SELECT * FROM policy_changes",
    # what the metrics' counters count on from (engine/journal/trimmed.py)
    **{table: f"SELECT * FROM {table}" for table in trimmed.TABLES},
}


Row = dict[str, object]

#: table -> its old rows as the current schema has them
_UPGRADES: dict[str, Callable[[Row], Row]] = {"cycles": lambda row: dict(current_cycle_row(row))}


def salvage_history(path: Path, db: sqlite_utils.Database, notes: list[str]) -> int:
    """Copy the rows of the old catalog's journal that can still be read (a table is
    read up to its first damaged page); returns how many were kept."""
    return _salvage(path, db, notes, _HISTORY, lambda _row: True)


def salvage_samples(path: Path, db: sqlite_utils.Database, notes: list[str]) -> int:
    """Copy the old catalog's disk samples (the charts' past, engine/journal/history.py)
    of the topics and cycles the new catalog has: run once the topics are back."""
    topics = {row[0] for row in db.conn.execute("SELECT name FROM topics")}
    cycles = {row[0] for row in db.conn.execute("SELECT id FROM cycles")}
    queries = {"disk_samples": "SELECT * FROM disk_samples"}
    return _salvage(path, db, notes, queries, lambda row: row["topic"] in topics and row["cycle"] in cycles)


def _note(notes: list[str], note: str) -> None:
    """Add ``note`` once: the journal and the disk samples are salvaged from the same
    file, and an unreadable one said so twice."""
    if note not in notes:
        notes.append(note)


def _salvage(
    path: Path,
    db: sqlite_utils.Database,
    notes: list[str],
    queries: dict[str, str],
    keep: Callable[[Row], bool],
) -> int:
    """Copy the rows of ``queries`` (table -> query) that can be read and that ``keep``
    keeps from the old catalog at ``path`` into the same tables of ``db``."""
    if not path.is_file():
        return 0  # none, or a directory in its place: no history to keep
    kept = 0
    try:
        old = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as error:
        _note(notes, f"the old journal could not be opened ({error}): its history stays in the file moved aside")
        return 0
    try:
        try:
            present = {r[0] for r in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as error:
            _note(notes, f"the old journal could not be read ({error}): its history stays in the file moved aside")
            return 0
        for table, query in queries.items():
            if table not in present:
                continue  # an emptied catalog: nothing to keep
            rows: list[Row] = []
            try:
                cursor = old.execute(query)
                names = [d[0] for d in cursor.description]
                upgrade = _UPGRADES.get(table, lambda row: row)
                for values in cursor:
                    row = upgrade(dict(zip(names, values)))
                    if keep(row):
                        rows.append(row)
            except sqlite3.DatabaseError as error:
                notes.append(f"the old journal's {table} was read up to row {len(rows)} ({error})")
            with write_transaction(db):
                db.table(table).insert_all(rows, ignore=True)
            kept += len(rows)
    finally:
        old.close()
    return kept
