"""Tables of the catalog (what exists) and of the policy-change journal."""

from __future__ import annotations

import sqlite3

import sqlite_utils

from engine.catalog.database import write_transaction

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
-- One row: a count of the writes to segments, and the catalog's epoch (random, new
-- with each catalog file a rebuild makes). Triggers stamp a partition's
-- ``segments_changed`` with the count after each write to its segments, in every
-- process that writes, so that a reader holding an earlier snapshot re-reads only
-- the partitions stamped since (engine/catalog/bulk_reads.py).
CREATE TABLE IF NOT EXISTS segment_writes (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    epoch TEXT NOT NULL,
    count INTEGER NOT NULL
);
"""

#: the triggers that keep ``segment_writes`` and ``partitions.segments_changed``
_STAMP = """
    UPDATE segment_writes SET count = count + 1;
    UPDATE partitions SET segments_changed = (SELECT count FROM segment_writes)
        WHERE topic = {row}.topic AND partition = {row}.partition;"""
_STAMPED = (
    ("segment_added", "INSERT ON segments", "NEW"),
    ("segment_changed", "UPDATE ON segments", "NEW"),
    ("segment_removed", "DELETE ON segments", "OLD"),
    # a partition made again after its topic's deletion is never taken for the old one
    ("partition_added", "INSERT ON partitions", "NEW"),
)
_TRIGGER_NAMES = tuple(name for name, _, _ in _STAMPED)
_TRIGGERS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} BEGIN {_STAMP.format(row=row)} END"
    for name, event, row in _STAMPED
)


#: the reading anchors of each position (engine/catalog/anchors.py), added to every
#: catalog, older ones included, by the open that finds them missing
_ANCHOR_COLUMNS = {
    "anchor_position": "ALTER TABLE positions ADD COLUMN anchor_position INTEGER",
    "anchor_at": "ALTER TABLE positions ADD COLUMN anchor_at INTEGER",
    "next_anchor_position": "ALTER TABLE positions ADD COLUMN next_anchor_position INTEGER",
    "next_anchor_at": "ALTER TABLE positions ADD COLUMN next_anchor_at INTEGER",
}


def ensure_schema(db: sqlite_utils.Database) -> None:
    """Create the tables if this is a new data directory.

    An existing catalog is only read: setting ``user_version`` writes the database
    header even to the same value, and opening a catalog to read must write nothing."""
    db.conn.executescript(_TABLES)
    _track_segment_writes(db)
    _add_reading_anchors(db)
    if db.conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        # An int constant of this module, not input: PRAGMA takes no parameters.
        db.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _track_segment_writes(db: sqlite_utils.Database) -> None:
    """Add what :data:`_TRIGGERS` need to a catalog made before them, in one write
    transaction; a catalog that has them is only read."""
    conn = db.conn
    if _tracks_segment_writes(conn):
        return
    with write_transaction(db):
        if "segments_changed" not in {row[1] for row in conn.execute("PRAGMA table_info(partitions)")}:
            conn.execute("ALTER TABLE partitions ADD COLUMN segments_changed INTEGER NOT NULL DEFAULT 0")
        conn.execute(
            "INSERT INTO segment_writes SELECT 0, lower(hex(randomblob(16))), 0"
            " WHERE NOT EXISTS (SELECT 1 FROM segment_writes)"
        )
        for trigger in _TRIGGERS:
            conn.execute(trigger)


def _add_reading_anchors(db: sqlite_utils.Database) -> None:
    """Add the anchor columns a catalog lacks, in one write transaction; a catalog
    that has them is only read. Their rows start with no anchors (no observed rate)."""
    conn = db.conn

    def missing() -> set[str]:
        return _ANCHOR_COLUMNS.keys() - {row[1] for row in conn.execute("PRAGMA table_info(positions)")}

    if not missing():
        return
    with write_transaction(db):
        # Again under the lock: another process may have added them meanwhile.
        for column in sorted(missing()):
            conn.execute(_ANCHOR_COLUMNS[column])


def _tracks_segment_writes(conn: sqlite3.Connection) -> bool:
    triggers = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    return triggers >= set(_TRIGGER_NAMES) and conn.execute("SELECT 1 FROM segment_writes").fetchone() is not None
