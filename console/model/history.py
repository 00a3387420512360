"""What the history charts show: bytes on disk per topic over the span of the recent
cycles (the journal's samples, engine/journal/history.py), and bytes freed per cycle
(the cycles table; for one topic, its applied deletions). Read in a worker, inside
the caller's read transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.catalog.catalog import Catalog
from engine.journal.history import DiskHistory
from engine.journal.rows import Cycle

#: points per line at most: a chart is at most ~110 cells wide
CHART_POINTS = 120
#: the span charted before any cycle is journaled
DEFAULT_SPAN_MS = 3_600_000


@dataclass(frozen=True)
class TopicHistory:
    topic: str
    times: tuple[int, ...]
    bytes: tuple[int, ...]


@dataclass(frozen=True)
class History:
    now: int
    #: the first instant charted
    since: int
    #: each topic's bytes on disk, oldest first; the topics largest (at their last sample) first
    topics: tuple[TopicHistory, ...]
    #: (start, bytes freed) of each finished cycle, oldest first
    freed: tuple[tuple[int, int], ...]

    @property
    def span_ms(self) -> int:
        return max(1, self.now - self.since)


def load_history(
    catalog: Catalog, cycles: Sequence[Cycle], now: int, *, topic: str | None = None, since: int | None = None
) -> History:
    """History from ``since`` (default: the oldest of ``cycles``, journal rows newest
    first) to ``now``, of every topic or of ``topic`` alone (its own bytes freed). With
    ``topic``, the span starts no earlier than its oldest sample, so that a young
    history is not thinned as if it were ``since`` long."""
    done = [c for c in reversed(cycles) if c.status == "done"]
    start = since if since is not None else min((c.started for c in cycles), default=now - DEFAULT_SPAN_MS)
    history = DiskHistory(catalog)
    if topic is not None and (oldest := history.oldest(topic)) is not None:
        start = max(start, oldest)
    samples = history.samples(
        since=start,
        until=now,
        bucket_ms=max(1, (now - start) // CHART_POINTS),
        topics=None if topic is None else [topic],
    )
    series: dict[str, list[tuple[int, int]]] = {}
    for s in samples:
        series.setdefault(s.topic, []).append((s.time, s.bytes))
    topics = sorted(
        (
            TopicHistory(name, tuple(t for t, _ in points), tuple(b for _, b in points))
            for name, points in series.items()
        ),
        key=lambda h: (-h.bytes[-1], h.topic),
    )
    if topic is None:
        freed = tuple((c.started, c.bytes_freed) for c in done)
    else:
        mine = history.freed(topic, [c.id for c in done])
        freed = tuple((c.started, mine.get(c.id, 0)) for c in done)
    return History(now, start, tuple(topics), freed)
