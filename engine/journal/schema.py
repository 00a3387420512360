"""Tables of the journal (SPEC §6) and of the engine's own state, in the catalog
database next to what they describe.

The journal's policy-change table belongs to the catalog schema (the catalog writes
it as it changes a policy); the journal only reads it and applies its retention.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import sqlite_utils

from engine.catalog.database import write_transaction
from engine.journal import trimmed

#: one statement each: they may run inside a caller's transaction, which
#: ``executescript`` would commit
_STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS cycles (
        id INTEGER PRIMARY KEY,
        trigger TEXT NOT NULL,
        actor TEXT NOT NULL,
        scope TEXT NOT NULL,          -- JSON: a list of topics, or "all"
        now INTEGER NOT NULL,         -- the planning time (ms)
        started INTEGER NOT NULL,
        finished INTEGER,
        status TEXT NOT NULL
            CHECK (status IN ('running', 'done', 'failed', 'interrupted', 'dry_run', 'paused')),
        planned INTEGER NOT NULL DEFAULT 0,   -- segment deletions planned
        applied INTEGER NOT NULL DEFAULT 0,   -- segment deletions done
        bytes_freed INTEGER NOT NULL DEFAULT 0,
        spark_master TEXT,
        duration_ms INTEGER,          -- the whole cycle: plan_ms + apply_ms (null: unknown)
        error TEXT,
        plan_ms INTEGER,              -- planning: snapshot and Spark (null: unknown)
        apply_ms INTEGER              -- applying: from its start in the journal to its end
    )""",
    "CREATE INDEX IF NOT EXISTS cycles_started ON cycles(started)",
    "CREATE INDEX IF NOT EXISTS cycles_status ON cycles(status)",
    """CREATE TABLE IF NOT EXISTS actions (
        id INTEGER PRIMARY KEY,
        cycle INTEGER,                -- null: a manual operation outside any cycle
        time INTEGER NOT NULL,        -- when the action was recorded
        settled INTEGER,              -- when its status became final (null while planned)
        trigger TEXT NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        topic TEXT,
        partition INTEGER,
        segment INTEGER,              -- base offset
        start_offset INTEGER,
        end_offset INTEGER,
        messages INTEGER,
        bytes INTEGER,
        reason TEXT,                  -- the plan's reason code
        details TEXT,                 -- JSON object
        status TEXT NOT NULL CHECK (status IN ('planned', 'applied', 'rolled_back', 'skipped'))
    )""",
    "CREATE INDEX IF NOT EXISTS actions_time ON actions(time)",
    "CREATE INDEX IF NOT EXISTS actions_cycle ON actions(cycle)",
    "CREATE INDEX IF NOT EXISTS actions_topic_time ON actions(topic, time)",
    """CREATE TABLE IF NOT EXISTS engine_state (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS topic_state (
        topic TEXT PRIMARY KEY REFERENCES topics(name) ON DELETE CASCADE,
        quota_exceeded INTEGER NOT NULL,
        since INTEGER NOT NULL        -- when the state last changed (ms)
    )""",
    # engine/journal/history.py: bytes on disk per topic after each cycle
    """CREATE TABLE IF NOT EXISTS disk_samples (
        cycle INTEGER NOT NULL REFERENCES cycles(id) ON DELETE CASCADE,
        time INTEGER NOT NULL,
        topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
        bytes INTEGER NOT NULL,
        segments INTEGER NOT NULL,
        PRIMARY KEY (topic, cycle)
    )""",
    "CREATE INDEX IF NOT EXISTS disk_samples_time ON disk_samples(time)",
    *trimmed.SCHEMA,
)

_TABLES = ("cycles", "actions", "engine_state", "topic_state", "disk_samples", *trimmed.TABLES)


def ensure_journal_schema(db: sqlite_utils.Database) -> None:
    """Create the journal and state tables if they are missing (the catalog's own
    tables must exist: topic state refers to topics). A data directory that has them
    is not written to, so that read-only users never wait for the write lock."""
    present = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if present.issuperset(_TABLES):
        return
    with write_or_join(db):
        for statement in _STATEMENTS:
            db.conn.execute(statement)


#: columns added to ``cycles`` after journals were written without them; a journal
#: lacking them is read as they would have it (engine/journal/rows.py) and gains them
#: on its next cycle, so that only a writer ever alters it
_PHASE_COLUMNS = ("plan_ms", "apply_ms")


def ensure_cycle_phases(db: sqlite_utils.Database) -> None:
    """Add the planning and applying times to an older journal's cycles. Its
    ``duration_ms`` was the applying alone: it moves to ``apply_ms`` and the whole
    cycle's time becomes unknown (null), as the planning was never recorded."""
    present = {r[1] for r in db.conn.execute("PRAGMA table_info(cycles)")}
    if present.issuperset(_PHASE_COLUMNS):
        return
    with write_or_join(db):
        for column in _PHASE_COLUMNS:
            # a name of this module, not input: ALTER TABLE takes no parameters
            db.conn.execute(f"ALTER TABLE cycles ADD COLUMN {column} INTEGER")
        db.conn.execute("UPDATE cycles SET apply_ms = duration_ms, duration_ms = NULL")


def write_or_join(db: sqlite_utils.Database) -> AbstractContextManager[object]:
    """A write transaction of its own, or the caller's if one is open: journal rows
    then commit atomically with the change they record."""
    return nullcontext() if db.conn.in_transaction else write_transaction(db)
