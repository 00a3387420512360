"""The engine's own switches, kept next to the journal: the pause of all deletion
(``ebb pause``) and each topic's backlog-quota state (SPEC §4).

Writes join the caller's transaction when one is open, so that a switch and the
journal row recording it commit together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.journal.schema import ensure_journal_schema, write_or_join

if TYPE_CHECKING:
    # Only its connection is used: the catalog itself keeps the pause in engine.json.
    from engine.catalog.catalog import Catalog

_PAUSED = "paused"


@dataclass(frozen=True)
class QuotaState:
    exceeded: bool
    #: when the topic entered its current state (ms); None: never recorded
    since: int | None


NOT_EXCEEDED = QuotaState(False, None)


class EngineState:
    def __init__(self, catalog: Catalog) -> None:
        self.db = catalog.db
        ensure_journal_schema(self.db)

    def is_paused(self) -> bool:
        row = self.db.conn.execute("SELECT value FROM engine_state WHERE key = ?", (_PAUSED,)).fetchone()
        return row is not None and row[0] == "1"

    def set_paused(self, paused: bool) -> None:
        with write_or_join(self.db):
            self.db.conn.execute(
                "INSERT INTO engine_state (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (_PAUSED, "1" if paused else "0"),
            )

    def quota_state(self, topic: str) -> QuotaState:
        row = self.db.conn.execute("SELECT quota_exceeded, since FROM topic_state WHERE topic = ?", (topic,)).fetchone()
        return NOT_EXCEEDED if row is None else QuotaState(bool(row[0]), row[1])

    def quota_states(self) -> dict[str, QuotaState]:
        """Every topic whose quota state was ever recorded."""
        return {
            topic: QuotaState(bool(exceeded), since)
            for topic, exceeded, since in self.db.conn.execute("SELECT topic, quota_exceeded, since FROM topic_state")
        }

    def set_quota_state(self, topic: str, exceeded: bool, since: int) -> None:
        with write_or_join(self.db):
            self.db.conn.execute(
                "INSERT INTO topic_state (topic, quota_exceeded, since) VALUES (?, ?, ?) "
                "ON CONFLICT(topic) DO UPDATE SET quota_exceeded = excluded.quota_exceeded, since = excluded.since",
                (topic, int(exceeded), since),
            )
