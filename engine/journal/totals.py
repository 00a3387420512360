"""What the journal adds up to, for the metrics (engine/metrics): cycles by status,
their durations, and what retention deleted, by reason.

Each is counted since the journal began: the rows it keeps (``[engine]
journal_retention``) and what its retention trimmed (engine/journal/trimmed.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from engine.journal.trimmed import DELETIONS, DURATION_BUCKETS_MS, PHASE_COLUMNS, bucket_of, phase_columns


@dataclass(frozen=True)
class Deleted:
    topic: str
    reason: str
    segments: int
    bytes: int


@dataclass
class Durations:
    """One phase's durations as a histogram: the cycles in each bucket of
    :data:`~engine.journal.trimmed.DURATION_BUCKETS_MS` and then +Inf (not cumulative),
    and the sum of the durations in ms."""

    counts: list[int]
    total_ms: int = 0

    @classmethod
    def empty(cls) -> Durations:
        return cls([0] * (len(DURATION_BUCKETS_MS) + 1))


def cycles_by_status(conn: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """(trigger, status) -> cycles."""
    rows = conn.execute(
        "SELECT trigger, status, SUM(n) FROM ("
        " SELECT trigger, status, COUNT(*) AS n FROM cycles GROUP BY trigger, status"
        " UNION ALL SELECT trigger, status, cycles FROM trimmed_cycles"
        ") GROUP BY trigger, status ORDER BY trigger, status"
    )
    return {(trigger, status): count for trigger, status, count in rows}


def phase_durations(conn: sqlite3.Connection) -> dict[tuple[str, str], Durations]:
    """How long the finished cycles took, by trigger (``schedule``, or ``manual``:
    ``ebb prune``, a truncate, a purge, a repair) and phase: ``plan`` (snapshot and
    Spark), ``apply`` (from its start in the journal to its end) and ``cycle``, the
    whole cycle, as every view shows it. A time the journal does not know (a cycle
    journaled before planning times were) is left out; every phase of a trigger
    that finished a cycle is there, so that a series does not come and go."""
    finished = conn.execute(
        "SELECT DISTINCT trigger FROM cycles WHERE finished IS NOT NULL"
        " UNION SELECT trigger FROM trimmed_durations ORDER BY trigger"
    )
    durations = {(trigger, phase): Durations.empty() for (trigger,) in finished for phase in PHASE_COLUMNS}
    timed = phase_columns(conn)
    kept = " UNION ALL ".join(
        f"SELECT trigger, ? AS phase, {bucket_of(column)} AS bucket, 1 AS cycles, {column} AS ms"
        f" FROM cycles WHERE finished IS NOT NULL AND {column} IS NOT NULL"
        for column in timed.values()
    )
    rows = conn.execute(
        f"SELECT trigger, phase, bucket, SUM(cycles), SUM(ms) FROM ({kept}"
        " UNION ALL SELECT trigger, phase, bucket, cycles, total_ms FROM trimmed_durations"
        ") GROUP BY trigger, phase, bucket",
        list(timed),
    )
    for trigger, phase, bucket, cycles, total_ms in rows:
        histogram = durations[(trigger, phase)]
        histogram.counts[bucket] += cycles
        histogram.total_ms += total_ms
    return durations


def deleted_by_reason(conn: sqlite3.Connection) -> list[Deleted]:
    """Segments deleted by retention and their bytes, per topic and reason code."""
    return [
        Deleted(*row)
        for row in conn.execute(
            "SELECT topic, reason, SUM(segments), SUM(bytes) FROM ("
            f" SELECT topic, reason, COUNT(*) AS segments, COALESCE(SUM(bytes), 0) AS bytes FROM actions"
            f" WHERE {DELETIONS} GROUP BY topic, reason"
            " UNION ALL SELECT topic, reason, segments, bytes FROM trimmed_deletions"
            ") GROUP BY topic, reason ORDER BY topic, reason"
        )
    ]
