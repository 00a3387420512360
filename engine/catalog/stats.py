"""Per-partition figures for the metrics (engine/metrics): what ``topic describe``
shows of each partition, for every topic in one query."""

from __future__ import annotations

from dataclasses import dataclass

from engine.catalog.catalog import Catalog

_STATS_SQL = """
SELECT p.topic, p.partition, p.log_start_offset, p.next_offset,
       COALESCE(SUM(s.size_bytes), 0) AS size_bytes, COUNT(s.base_offset) AS segments
FROM partitions p
LEFT JOIN segments s ON s.topic = p.topic AND s.partition = p.partition
GROUP BY p.topic, p.partition
ORDER BY p.topic, p.partition
"""


@dataclass(frozen=True)
class PartitionStats:
    topic: str
    partition: int
    log_start_offset: int
    next_offset: int
    #: the sum of its segments' sizes, as ``topic describe`` counts it
    size_bytes: int
    segments: int


def partition_stats(catalog: Catalog) -> list[PartitionStats]:
    """Every partition of every topic; call it inside ``catalog.read()`` to have it
    agree with the other queries of one scrape."""
    return [PartitionStats(*row) for row in catalog.db.conn.execute(_STATS_SQL)]
