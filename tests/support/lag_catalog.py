"""Groups whose position is inside a segment begun hours before the record there:
what tells a lag read from the record at the position (what the ``backlog_age`` quota
compares) from one read from the segment's first record.

Two topics under a 1 h ``backlog_age`` (producer_request_hold), a record a minute for
the last three hours per partition, all in one segment (1 MiB):

- ``fresh`` (2 partitions): subscriber ``slow`` at offsets 170 and 175, records 10 and
  5 minutes old: under the quota, though its segment began 3 h ago;
- ``stale`` (1 partition): subscriber ``stuck`` at offset 90, a record 90 minutes old:
  over the quota.
"""

from __future__ import annotations

from pathlib import Path

from engine.broker import Broker
from engine.store.batch import NewRecord

MINUTE = 60_000
HOUR = 60 * MINUTE
RECORDS = 180
POLICY = {"segment_size": "1 MiB", "backlog_age": "1h"}
#: (topic, group) -> the position on each partition
POSITIONS: dict[tuple[str, str], tuple[int, ...]] = {("fresh", "slow"): (170, 175), ("stale", "stuck"): (90,)}


def record_time(now: int, partition: int, offset: int) -> int:
    """The timestamp of the record at ``offset`` of ``partition``: one a minute from
    three hours before ``now``, shifted by the partition (in ms) so that partitions differ."""
    return now - RECORDS * MINUTE + offset * MINUTE + partition


def build_lag_catalog(root: Path, now: int) -> None:
    """The two topics, their records written as of ``now``, and the groups."""
    with Broker(root, clock=lambda: now) as broker:
        for (topic, group), positions in POSITIONS.items():
            broker.create_topic(topic, len(positions), POLICY, actor="test")
            for p in range(len(positions)):
                records = [NewRecord(bytes(100), timestamp=record_time(now, p, m)) for m in range(RECORDS)]
                for start in range(0, RECORDS, 20):
                    broker.produce(topic, records[start : start + 20], partition=p)
            broker.create_group(topic, group, "subscriber")
            for p, position in enumerate(positions):
                broker.commit(topic, group, p, position, at_ms=now - MINUTE)
