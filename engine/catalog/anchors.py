"""Reading anchors: two earlier commits of a group's position on a partition, from
which the forecast measures how fast the group reads (engine/forecast/reading.py).

The catalog keeps one position per (group, partition), so a rate needs an earlier
observation. A commit at ``c`` rotates the anchors when the newer one is at least
:data:`READING_SPAN_MS` old (``older := newer; newer := (position, c)``): the rate
``(position - older.position) / (committed_at - older.at)`` is then measured over
between one and about two spans, never over the last few commits alone.

Moves that are not reading (a TTL skip, a backlog eviction, a reader moved up to
the log start) shift both anchors by the distance moved: the pace stays the
group's own. A rewind (a commit below the position, ``ebb group move``) clears
them: what was read before says nothing about the new place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the least time an observed reading rate is measured over: several commits of a
#: consumer that commits every few seconds (Kafka's auto-commit: every 5 s), and a
#: small part of the forecast's default ingest window (1 h), so the rate is recent
READING_SPAN_MS = 5 * 60_000

#: an anchor: (position, committed at ms)
Anchor = tuple[int, int]


@dataclass(frozen=True)
class Anchors:
    older: Anchor | None = None
    newer: Anchor | None = None

    def committed(self, old_position: int | None, position: int, at: int, span_ms: int) -> Anchors:
        """The anchors after a commit of ``position`` at ``at`` where the group was at
        ``old_position`` (None: no position yet)."""
        if (old_position is not None and position < old_position) or (self.newer is not None and at < self.newer[1]):
            return Anchors(None, (position, at))  # a rewind, or a clock gone back: start over
        if self.newer is None or at - self.newer[1] >= span_ms:
            return Anchors(self.newer, (position, at))
        return self

    def shifted(self, by: int) -> Anchors:
        def moved(anchor: Anchor | None) -> Anchor | None:
            return None if anchor is None else (anchor[0] + by, anchor[1])

        return Anchors(moved(self.older), moved(self.newer))

    def columns(self) -> dict[str, int | None]:
        """As the columns of a position row."""
        older, newer = self.older or (None, None), self.newer or (None, None)
        return {
            "anchor_position": older[0],
            "anchor_at": older[1],
            "next_anchor_position": newer[0],
            "next_anchor_at": newer[1],
        }

    @classmethod
    def of(cls, row: Mapping[str, Any] | None) -> Anchors:
        """From the columns of a position row (None: no row)."""
        if row is None:
            return cls()
        older, newer = (row["anchor_position"], row["anchor_at"]), (row["next_anchor_position"], row["next_anchor_at"])
        return cls(None if older[1] is None else older, None if newer[1] is None else newer)
