"""What a capacity forecast says: per topic and instant, the bytes and segments on
disk after that instant's cycle, each partition's log start, the bytes deleted since
now by reason, and the first breach of each kind; as JSON for ``ebb forecast --json``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from engine.errors import NotFound
from engine.forecast.rates import Rate
from engine.forecast.reading import Reading


@dataclass(frozen=True)
class Breach:
    kind: str  # max_partition_size | max_time | backlog_quota | disk_budget
    at: int
    limit: int | None
    partition: int | None = None
    group: str | None = None
    #: of a backlog_quota breach: the quota exceeded (backlog_size, else backlog_age)
    quota: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at": self.at,
            "limit": self.limit,
            "partition": self.partition,
            "group": self.group,
            "quota": self.quota,
        }


@contextmanager
def many_points() -> Iterator[None]:
    """While a forecast's points are built, no cyclic garbage collection: they hold
    no cycles, and a week of 10,000 partitions is 1.68M partition points, whose
    building set off collections that scanned them again and again (3.4 s against
    0.8 s with collection paused, measured)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Not frozen: a forecast builds one per partition and instant (1.68M for a week of
# 10,000 partitions), and a frozen dataclass takes three times as long to build.
@dataclass(slots=True)
class PartitionPoint:
    partition: int
    bytes: int
    segments: int
    log_start: int


@dataclass(frozen=True)
class Point:
    """A topic at one instant, after that instant's cycle."""

    at: int
    bytes: int
    segments: int
    partitions: list[PartitionPoint]
    bytes_deleted: int
    segments_deleted: int
    #: reason code -> bytes deleted since now for it: each segment's reason at the instant it goes
    deleted_by_reason: dict[str, int]
    quota_exceeded: bool
    #: (group, partition) over a backlog quota
    over_quota: list[tuple[str, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "bytes": self.bytes,
            "segments": self.segments,
            "bytes_deleted": self.bytes_deleted,
            "segments_deleted": self.segments_deleted,
            "deleted_by_reason": self.deleted_by_reason,
            "quota_exceeded": self.quota_exceeded,
            "over_quota": [{"group": g, "partition": p} for g, p in self.over_quota],
            "partitions": [
                {"partition": p.partition, "bytes": p.bytes, "segments": p.segments, "log_start": p.log_start}
                for p in self.partitions
            ],
        }


@dataclass(frozen=True)
class TopicForecast:
    topic: str
    #: partition -> the ingest rate used
    rates: dict[int, Rate]
    points: list[Point]
    breaches: list[Breach]
    #: how each group reads each partition, by group and partition
    readings: list[Reading] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "rates": [
                {
                    "partition": p,
                    "source": r.source,
                    "since": r.since,
                    "bytes_per_second": r.bytes_per_second,
                    "records_per_second": r.records_per_second,
                    "record_bytes": r.record_bytes,
                    "batch": r.batch,
                }
                for p, r in sorted(self.rates.items())
            ],
            "readings": [r.to_json() for r in self.readings],
            "breaches": [b.to_json() for b in self.breaches],
            "points": [p.to_json() for p in self.points],
        }


@dataclass(frozen=True)
class Forecast:
    now: int
    instants: list[int]
    window_ms: int
    topics: list[TopicForecast]
    disk_budget: int | None
    #: the first instant at which the topics together hold more than the budget
    disk_breach: Breach | None
    #: with a what-if, the topics it changes under their saved policy (same job)
    saved: list[TopicForecast] | None = None
    #: topics left out, each with why: an invalid effective policy (a default changed
    #: under an override), which no plan can read; nor does the disk budget count them
    rejected: dict[str, str] = field(default_factory=dict)

    def of(self, topic: str) -> TopicForecast:
        """``topic``'s forecast (with a what-if, under the edited policy); NotFound
        where it was not forecast (deleted meanwhile)."""
        for forecast in self.topics:
            if forecast.topic == topic:
                return forecast
        raise NotFound(f"topic {topic!r} does not exist")

    def saved_of(self, topic: str) -> TopicForecast | None:
        """``topic``'s forecast under its saved policy, with a what-if; else None."""
        return next((t for t in self.saved if t.topic == topic), None) if self.saved else None

    def bytes_on_disk(self) -> list[int]:
        """The bytes on disk of all the topics forecast, at each instant: what the disk
        budget is held to."""
        return [sum(t.points[i].bytes for t in self.topics) for i in range(len(self.instants))]

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now,
            "instants": self.instants,
            "window_ms": self.window_ms,
            "disk_budget": self.disk_budget,
            "disk_breach": None if self.disk_breach is None else self.disk_breach.to_json(),
            "topics": [t.to_json() for t in self.topics],
            "saved": None if self.saved is None else [t.to_json() for t in self.saved],
            "rejected": self.rejected,
        }
