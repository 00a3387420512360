"""How far behind each group is, per partition: the figure the console's Topic, Groups,
Quotas and Overview views, ``ebb group list`` and the metrics (engine/metrics) all
show, computed in one query of the catalog (engine/catalog/queries.py; the console
runs it off the UI thread) and one record lookup per position.

Lag is counted from the group's effective position, ``max(position, log_start)``: data
below the log start is gone, so a group cannot be behind on it.

- ``lag_messages``: offsets from that position to the partition's end;
- ``lag_bytes``: bytes of the segments holding any unconsumed offset. Whole segments,
  as the backlog quota counts them (docs/RETENTION.md), so that a gauge and the
  engine's verdict agree;
- ``oldest_unconsumed``: the timestamp of the record at that position, the oldest
  unconsumed one, so ``now - oldest_unconsumed`` is the lag in time: the age the
  ``backlog_age`` quota compares (the planner's time cut reads the same record). The
  store reads it (engine/prune/record_times.py, :class:`RecordAges`, which keeps what
  it read); the catalog reads no segment file. Where the record cannot be read (its
  segment pruned since the catalog was read, or its file lost), the first timestamp
  of the segment holding the position stands in: older than the record, never 0
  while a group is behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.catalog.catalog import Catalog
from engine.catalog.queries import group_lags

if TYPE_CHECKING:
    from engine.prune.record_times import RecordAges


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    group: str
    kind: str
    partition: int
    position: int
    committed_at: int
    log_start_offset: int
    next_offset: int
    lag_bytes: int
    oldest_unconsumed: int | None

    @property
    def effective_position(self) -> int:
        return max(self.position, self.log_start_offset)

    @property
    def lag_messages(self) -> int:
        return max(0, self.next_offset - self.effective_position)

    def lag_ms(self, now: int) -> int:
        """How old the oldest unconsumed record is; 0 when the group is caught up."""
        if self.lag_messages == 0 or self.oldest_unconsumed is None:
            return 0
        return max(0, now - self.oldest_unconsumed)


def partition_lags(catalog: Catalog, ages: RecordAges, topic: str | None = None) -> list[PartitionLag]:
    """Every group's lag on every partition, or only ``topic``'s, with the timestamps
    of the records at the groups' positions from ``ages``; call it inside
    ``catalog.read()`` to have it agree with the other queries of one refresh."""
    lags = []
    for r in group_lags(catalog, None if topic is None else [topic]):
        at = max(r["position"], r["log_start_offset"])
        oldest = None
        if at < r["next_offset"]:
            read = ages.timestamp_at(catalog, r["topic"], r["topic_created_at"], r["partition"], at)
            oldest = r["segments_first_timestamp"] if read is None else read
        lags.append(
            PartitionLag(
                topic=r["topic"],
                group=r["group_name"],
                kind=r["kind"],
                partition=r["partition"],
                position=r["position"],
                committed_at=r["committed_at"],
                log_start_offset=r["log_start_offset"],
                next_offset=r["next_offset"],
                lag_bytes=r["lag_bytes"],
                oldest_unconsumed=oldest,
            )
        )
    return lags


@dataclass(frozen=True)
class GroupLag:
    """One group over all its partitions."""

    topic: str
    group: str
    kind: str
    partitions: tuple[PartitionLag, ...]

    @property
    def lag_messages(self) -> int:
        return sum(p.lag_messages for p in self.partitions)

    @property
    def lag_bytes(self) -> int:
        return sum(p.lag_bytes for p in self.partitions)

    def lag_ms(self, now: int) -> int:
        return max((p.lag_ms(now) for p in self.partitions), default=0)

    @property
    def last_commit(self) -> int | None:
        return max((p.committed_at for p in self.partitions), default=None)


def by_group(lags: list[PartitionLag]) -> list[GroupLag]:
    """``lags`` (in query order) gathered per group."""
    groups: dict[tuple[str, str], list[PartitionLag]] = {}
    for lag in lags:
        groups.setdefault((lag.topic, lag.group), []).append(lag)
    return [GroupLag(t, g, rows[0].kind, tuple(rows)) for (t, g), rows in groups.items()]
