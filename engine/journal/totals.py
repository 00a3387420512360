"""What the journal adds up to, for the metrics (engine/metrics): cycles by status,
their durations, and what retention deleted, by reason.

Counted over the rows the journal keeps (``[engine] journal_retention``)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.journal.journal import Journal


@dataclass(frozen=True)
class Deleted:
    topic: str
    reason: str
    segments: int
    bytes: int


def cycles_by_status(journal: Journal) -> dict[str, int]:
    return dict(journal.db.conn.execute("SELECT status, COUNT(*) FROM cycles GROUP BY status ORDER BY status"))


def phase_durations_ms(journal: Journal) -> dict[str, list[int]]:
    """How long the finished cycles took, by phase: ``plan`` (snapshot and Spark),
    ``apply`` (from its start in the journal to its end) and ``cycle``, the whole
    cycle, as every view shows it. A time the journal does not know (a cycle
    journaled before planning times were) is left out."""
    cycles = [c for c in journal.cycles(limit=None) if c.finished is not None]
    return {
        "plan": [c.plan_ms for c in cycles if c.plan_ms is not None],
        "apply": [c.apply_ms for c in cycles if c.apply_ms is not None],
        "cycle": [c.duration_ms for c in cycles if c.duration_ms is not None],
    }


def deleted_by_reason(journal: Journal) -> list[Deleted]:
    """Segments deleted by retention and their bytes, per topic and reason code."""
    return [
        Deleted(*row)
        for row in journal.db.conn.execute(
            "SELECT topic, reason, COUNT(*), COALESCE(SUM(bytes), 0) FROM actions"
            " WHERE action = 'delete_segment' AND status = 'applied' AND reason IS NOT NULL"
            " GROUP BY topic, reason ORDER BY topic, reason"
        )
    ]
