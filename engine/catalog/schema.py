"""Tables of the catalog (what exists) and of the policy-change journal."""

from __future__ import annotations

import sqlite_utils

SCHEMA_VERSION = 1

_TABLES = """
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    partitions INTEGER NOT NULL CHECK (partitions > 0),
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS policies (
    topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (topic, field)
);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    next_offset INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS segments (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    size_bytes INTEGER NOT NULL,
    first_timestamp INTEGER,
    max_timestamp INTEGER,
    sealed INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, base_offset),
    FOREIGN KEY (topic, partition) REFERENCES partitions(topic, partition) ON DELETE CASCADE
);
-- Offset ranges whose records are gone without retention having deleted them:
-- segments quarantined as corrupt, or files found missing (engine/integrity).
-- Reads of a range above the log start fail naming it instead of skipping it.
CREATE TABLE IF NOT EXISTS quarantined (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    next_offset INTEGER NOT NULL CHECK (next_offset > base_offset),
    path TEXT,                    -- the quarantined file, relative to the data directory; null if none
    reason TEXT NOT NULL,
    quarantined_at INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, base_offset),
    FOREIGN KEY (topic, partition) REFERENCES partitions(topic, partition) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS groups (
    topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('subscriber', 'reader')),
    start_from TEXT NOT NULL CHECK (start_from IN ('earliest', 'latest')),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (topic, name)
);
CREATE TABLE IF NOT EXISTS positions (
    topic TEXT NOT NULL,
    group_name TEXT NOT NULL,
    partition INTEGER NOT NULL,
    position INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    PRIMARY KEY (topic, group_name, partition),
    FOREIGN KEY (topic, group_name) REFERENCES groups(topic, name) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS policy_changes (
    id INTEGER PRIMARY KEY,
    time INTEGER NOT NULL,
    actor TEXT NOT NULL,
    topic TEXT NOT NULL,
    field TEXT NOT NULL,
    old TEXT,
    new TEXT
);
CREATE INDEX IF NOT EXISTS policy_changes_time ON policy_changes(time);
"""


def ensure_schema(db: sqlite_utils.Database) -> None:
    """Create the tables if this is a new data directory.

    An existing catalog is only read: setting ``user_version`` writes the database
    header even to the same value, and opening a catalog to read must write nothing."""
    db.conn.executescript(_TABLES)
    if db.conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        # An int constant of this module, not input: PRAGMA takes no parameters.
        db.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
