"""What the journal's retention trimmed, added up: the base the metrics' counters
count on from (engine/journal/totals.py).

A Prometheus counter must only go down when its process restarts: one that counted
only the rows the journal keeps would fall as its retention trims them, and
``increase()`` would take that fall for a restart and add everything still kept.
So, in the transaction that deletes them, the retention first adds the rows it
trims to these tables: cycles by trigger and status, their phase durations in the
histogram's buckets, and the segments deleted by topic and reason.
"""

from __future__ import annotations

import sqlite3

#: the histogram's bucket bounds in ms (its ``le``, in seconds, is each over 1000);
#: a duration falls in the first bucket whose bound it does not exceed, else +Inf
DURATION_BUCKETS_MS = (10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000)
#: each phase of a cycle, and the journal's column that times it
PHASE_COLUMNS = {"plan": "plan_ms", "apply": "apply_ms", "cycle": "duration_ms"}
#: the same of a journal older than the planning and applying times (read as it is,
#: engine/journal/rows.py): its duration was the applying alone
_OLD_PHASE_COLUMNS = {"apply": "duration_ms"}

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS trimmed_cycles (
        trigger TEXT NOT NULL,
        status TEXT NOT NULL,
        cycles INTEGER NOT NULL,
        PRIMARY KEY (trigger, status)
    )""",
    # bucket: the index in DURATION_BUCKETS_MS, len(DURATION_BUCKETS_MS) for +Inf
    """CREATE TABLE IF NOT EXISTS trimmed_durations (
        trigger TEXT NOT NULL,
        phase TEXT NOT NULL,
        bucket INTEGER NOT NULL,
        cycles INTEGER NOT NULL,
        total_ms INTEGER NOT NULL,
        PRIMARY KEY (trigger, phase, bucket)
    )""",
    """CREATE TABLE IF NOT EXISTS trimmed_deletions (
        topic TEXT NOT NULL,
        reason TEXT NOT NULL,
        segments INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        PRIMARY KEY (topic, reason)
    )""",
)
TABLES = ("trimmed_cycles", "trimmed_durations", "trimmed_deletions")

#: the actions the deletion counters count
DELETIONS = "action = 'delete_segment' AND status = 'applied' AND reason IS NOT NULL"


def phase_columns(conn: sqlite3.Connection) -> dict[str, str]:
    """Each phase the journal's ``cycles`` times, and its column there."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(cycles)")}
    return PHASE_COLUMNS if "apply_ms" in columns else _OLD_PHASE_COLUMNS


def bucket_of(column: str) -> str:
    """SQL: the histogram bucket of the duration in ``column`` (ms)."""
    cases = " ".join(f"WHEN {column} <= {bound} THEN {i}" for i, bound in enumerate(DURATION_BUCKETS_MS))
    return f"(CASE {cases} ELSE {len(DURATION_BUCKETS_MS)} END)"


def carry(conn: sqlite3.Connection, *, cycles: str, actions: str, cutoff: int) -> None:
    """Add the cycles and actions the retention is about to delete (``cycles`` and
    ``actions``: its WHERE clauses, with the parameter ``:cutoff``) to the trimmed
    tables. Run in the retention's transaction, before its deletes."""
    # "WHERE" before "ON CONFLICT": SQLite's upsert needs it to parse an INSERT ... SELECT.
    conn.execute(
        "INSERT INTO trimmed_cycles (trigger, status, cycles)"
        f" SELECT trigger, status, COUNT(*) FROM cycles WHERE {cycles} GROUP BY trigger, status"
        " ON CONFLICT (trigger, status) DO UPDATE SET cycles = cycles + excluded.cycles",
        {"cutoff": cutoff},
    )
    for phase, column in phase_columns(conn).items():
        conn.execute(
            "INSERT INTO trimmed_durations (trigger, phase, bucket, cycles, total_ms)"
            f" SELECT trigger, :phase, {bucket_of(column)} AS b, COUNT(*), SUM({column}) FROM cycles"
            f" WHERE ({cycles}) AND finished IS NOT NULL AND {column} IS NOT NULL GROUP BY trigger, b"
            " ON CONFLICT (trigger, phase, bucket) DO UPDATE"
            " SET cycles = cycles + excluded.cycles, total_ms = total_ms + excluded.total_ms",
            {"cutoff": cutoff, "phase": phase},
        )
    conn.execute(
        "INSERT INTO trimmed_deletions (topic, reason, segments, bytes)"
        f" SELECT topic, reason, COUNT(*), COALESCE(SUM(bytes), 0) FROM actions WHERE ({actions}) AND {DELETIONS}"
        " GROUP BY topic, reason"
        " ON CONFLICT (topic, reason) DO UPDATE"
        " SET segments = segments + excluded.segments, bytes = bytes + excluded.bytes",
        {"cutoff": cutoff},
    )
