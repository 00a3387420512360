"""Bytes on disk per topic over time: a sample per topic written by each prune cycle
that ran (``done`` or ``paused``), after it applied, next to the cycle in the journal.

The catalog holds only the present; the console's charts (bytes on disk per topic,
the Forecast view's past) need the past. A sample belongs to its cycle and to its
topic: the journal's retention and a topic's deletion take its samples with them
(foreign keys), and samples older than :data:`HISTORY_MS` go at each cycle, so the
table stays bounded whatever ``journal_retention`` says (a week at the demo's 10 s
interval is 60,480 rows a topic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.catalog.catalog import Catalog
from engine.journal.schema import ensure_journal_schema, write_or_join

#: how far back samples are kept: the Forecast view's past, as long as its horizon
HISTORY_MS = 7 * 24 * 3_600_000

_RECORD_SQL = """
INSERT OR REPLACE INTO disk_samples (cycle, time, topic, bytes, segments)
SELECT ?, ?, t.name, COALESCE(SUM(s.size_bytes), 0), COUNT(s.base_offset)
FROM topics t LEFT JOIN segments s ON s.topic = t.name
GROUP BY t.name
"""

#: the last sample of each topic in each bucket of ``bucket_ms`` (SQLite gives the
#: bare columns of the row holding the MAX); ``{topics}`` filters on ``topic``
_HISTORY_SQL = """
SELECT topic, MAX(time) AS time, bytes, segments
FROM disk_samples
WHERE time >= ? AND time <= ?{topics}
GROUP BY topic, time / ?
ORDER BY topic, time
"""

#: bytes a cycle deleted from one topic, per cycle
_FREED_SQL = """
SELECT cycle, COALESCE(SUM(bytes), 0)
FROM actions
WHERE topic = ? AND action = 'delete_segment' AND status = 'applied' AND cycle IN ({cycles})
GROUP BY cycle
"""


@dataclass(frozen=True)
class DiskSample:
    """One topic's bytes and segments on disk after a cycle."""

    topic: str
    time: int
    bytes: int
    segments: int


class DiskHistory:
    """The samples of one data directory, on its catalog's connection."""

    def __init__(self, catalog: Catalog) -> None:
        self.db = catalog.db
        ensure_journal_schema(self.db)

    def record(self, cycle: int, *, time: int) -> None:
        """Sample every topic's bytes and segments now, as of ``cycle`` (its sample
        time ``time``: the wall clock, never a simulated planning instant), and drop
        samples older than :data:`HISTORY_MS`."""
        with write_or_join(self.db):
            self.db.conn.execute(_RECORD_SQL, (cycle, time))
            self.db.conn.execute("DELETE FROM disk_samples WHERE time < ?", (time - HISTORY_MS,))

    def samples(
        self, *, since: int, until: int, bucket_ms: int = 1, topics: Sequence[str] | None = None
    ) -> list[DiskSample]:
        """Samples between ``since`` and ``until`` (included), the last of each topic in
        each ``bucket_ms`` (so that a week of 10 s cycles reads as a few hundred
        points), by topic then time."""
        where = "" if topics is None else f" AND topic IN ({','.join('?' * len(topics))})"
        params = (since, until, *(topics or ()), max(1, bucket_ms))
        return [DiskSample(*row) for row in self.db.conn.execute(_HISTORY_SQL.format(topics=where), params)]

    def oldest(self, topic: str) -> int | None:
        """When the oldest sample of ``topic`` kept was taken (None: none yet)."""
        row = self.db.conn.execute("SELECT MIN(time) FROM disk_samples WHERE topic = ?", (topic,)).fetchone()
        return None if row[0] is None else int(row[0])

    def freed(self, topic: str, cycles: Sequence[int]) -> dict[int, int]:
        """Bytes of ``topic`` each of ``cycles`` deleted (cycles that deleted none of
        it are absent)."""
        if not cycles:
            return {}
        sql = _FREED_SQL.format(cycles=",".join("?" * len(cycles)))
        return dict(self.db.conn.execute(sql, (topic, *cycles)))
