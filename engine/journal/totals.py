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


def cycles_by_status(journal: Journal) -> dict[tuple[str, str], int]:
    """(trigger, status) -> cycles."""
    rows = journal.db.conn.execute(
        "SELECT trigger, status, COUNT(*) FROM cycles GROUP BY trigger, status ORDER BY trigger, status"
    )
    return {(trigger, status): count for trigger, status, count in rows}


def phase_durations_ms(journal: Journal) -> dict[tuple[str, str], list[int]]:
    """How long the finished cycles took, by trigger (``schedule``, or ``manual``:
    ``ebb prune``, a truncate, a purge, a repair) and phase: ``plan`` (snapshot and
    Spark), ``apply`` (from its start in the journal to its end) and ``cycle``, the
    whole cycle, as every view shows it. A time the journal does not know (a cycle
    journaled before planning times were) is left out; every phase of a trigger
    that finished a cycle is there, so that a series does not come and go."""
    durations: dict[tuple[str, str], list[int]] = {}
    for c in journal.cycles(limit=None):
        if c.finished is None:
            continue
        for phase, ms in (("plan", c.plan_ms), ("apply", c.apply_ms), ("cycle", c.duration_ms)):
            known = durations.setdefault((c.trigger, phase), [])
            if ms is not None:
                known.append(ms)
    return durations


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
