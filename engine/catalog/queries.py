"""Read-only queries over several catalog tables at once, named for what they answer.

The console's views and the planner's snapshot ask these; call them inside
``catalog.read()`` so that one refresh (or one snapshot) sees one instant. The
positions query is written once here: the snapshot reads it as is, and the lag query
builds on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.catalog.catalog import Catalog
from engine.catalog.database import select_rows

#: every group's position on every partition, with the group's kind and its latest
#: commit on any partition; ``{where}`` filters on ``p.topic``
_POSITIONS_SQL = """
SELECT p.topic, p.group_name, g.kind, p.partition, p.position, p.committed_at,
       MAX(p.committed_at) OVER (PARTITION BY p.topic, p.group_name) AS group_committed_at
FROM positions p JOIN groups g ON g.topic = p.topic AND g.name = p.group_name
{where}
ORDER BY p.topic, p.group_name, p.partition
"""

#: per position: the topic's creation time, the partition's bounds, and the bytes and
#: the oldest first timestamp of the segments holding an offset at or past the group's
#: effective position
_LAG_SQL = """
WITH pos AS ({positions})
SELECT pos.topic, pos.group_name, pos.kind, pos.partition, pos.position, pos.committed_at,
       t.created_at AS topic_created_at, pa.log_start_offset, pa.next_offset,
       COALESCE(SUM(s.size_bytes), 0) AS lag_bytes,
       MIN(s.first_timestamp) AS segments_first_timestamp
FROM pos
JOIN topics t ON t.name = pos.topic
JOIN partitions pa ON pa.topic = pos.topic AND pa.partition = pos.partition
LEFT JOIN segments s
  ON s.topic = pos.topic AND s.partition = pos.partition
 AND s.next_offset > MAX(pos.position, pa.log_start_offset)
GROUP BY pos.topic, pos.group_name, pos.partition
ORDER BY pos.topic, pos.group_name, pos.partition
"""

_TOPIC_TOTALS_SQL = """
SELECT t.name, t.partitions,
       COUNT(s.base_offset) AS segments,
       COALESCE(SUM(s.size_bytes), 0) AS size_bytes,
       MIN(s.first_timestamp) AS oldest_timestamp
FROM topics t LEFT JOIN segments s ON s.topic = t.name
GROUP BY t.name ORDER BY t.name
"""


def _topics_filter(topics: Sequence[str] | None) -> tuple[str, tuple[str, ...]]:
    if topics is None:
        return "", ()
    return f"WHERE p.topic IN ({','.join('?' * len(topics))})", tuple(topics)


def group_positions(catalog: Catalog, topics: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """``(topic, group_name, kind, partition, position, committed_at,
    group_committed_at)`` for every position of ``topics`` (all if None)."""
    where, params = _topics_filter(topics)
    return list(catalog.db.conn.execute(_POSITIONS_SQL.format(where=where), params))


def group_lags(catalog: Catalog, topics: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every position of ``topics`` (all if None) with its ``topic_created_at`` and
    what lies past it: the partition's ``log_start_offset`` and ``next_offset``,
    ``lag_bytes`` (whole segments) and ``segments_first_timestamp`` (the first
    timestamp of the segment holding the position, or None)."""
    where, params = _topics_filter(topics)
    return list(select_rows(catalog.db, _LAG_SQL.format(positions=_POSITIONS_SQL.format(where=where)), params))


def topic_totals(catalog: Catalog) -> list[dict[str, Any]]:
    """Per topic, by name: ``partitions``, ``segments``, ``size_bytes`` and the
    ``oldest_timestamp`` of its segments (None when it holds nothing)."""
    return list(select_rows(catalog.db, _TOPIC_TOTALS_SQL))


def all_overrides(catalog: Catalog) -> dict[str, dict[str, str]]:
    """Every topic's policy overrides, ``{}`` for a topic without any, in one query."""
    overrides: dict[str, dict[str, str]] = {t.name: {} for t in catalog.topics()}
    for row in select_rows(catalog.db, "SELECT topic, field, value FROM policies"):
        overrides.setdefault(row["topic"], {})[row["field"]] = row["value"]
    return overrides


def topic_segments(catalog: Catalog, topic: str) -> list[dict[str, Any]]:
    """Every segment of ``topic`` by partition and base offset (no file paths)."""
    return list(
        select_rows(
            catalog.db,
            "SELECT partition, base_offset, next_offset, size_bytes, first_timestamp, max_timestamp, sealed"
            " FROM segments WHERE topic = ? ORDER BY partition, base_offset",
            (topic,),
        )
    )
