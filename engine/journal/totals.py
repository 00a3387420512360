"""What the journal adds up to, for the metrics (engine/metrics): cycles by status,
their durations, and what retention deleted, by reason.

Counted over the rows the journal keeps (``[engine] journal_retention``)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.journal.journal import Journal

#: the trigger of the scheduler's cycles, whose planning instant is the clock when
#: planning began (a manual cycle may plan at any ``--now``)
SCHEDULED = "schedule"


@dataclass(frozen=True)
class Deleted:
    topic: str
    reason: str
    segments: int
    bytes: int


def cycles_by_status(journal: Journal) -> dict[str, int]:
    return dict(journal.db.conn.execute("SELECT status, COUNT(*) FROM cycles GROUP BY status ORDER BY status"))


def apply_durations_ms(journal: Journal) -> list[int]:
    """How long each finished cycle took from its start in the journal (the plan is
    made before it is journaled) to its end: the apply phase."""
    return [r[0] for r in journal.db.conn.execute("SELECT duration_ms FROM cycles WHERE duration_ms IS NOT NULL")]


def plan_durations_ms(journal: Journal) -> list[int]:
    """How long each scheduled cycle planned: from its planning instant (the clock
    when planning began) to its start in the journal."""
    return [
        r[0]
        for r in journal.db.conn.execute(
            "SELECT started - now FROM cycles WHERE trigger = ? AND started >= now", (SCHEDULED,)
        )
    ]


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
