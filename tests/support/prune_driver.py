"""Data and hand-built work for the executor tests, and the child process of the
prune crash tests.

As a script: ``python -m tests.support.prune_driver DATA_DIR TOPIC CUTS_JSON`` opens the data
directory, builds the work that cuts each partition at the given offset
(``{"0": 120, "1": 80}``) and executes it, printing the cycle result as JSON. The crash
tests run it with ``EBB_KILL_AT`` set, so it dies at a fault point.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from engine.broker import Broker
from engine.journal.journal import Journal
from engine.prune.executor import execute
from engine.prune.work import PartitionWork, SegmentDeletion, TopicWork
from engine.store.batch import NewRecord, Record

T0 = 1_762_000_000_000  # epoch ms
#: the planning time the tests use: every record is older than a day
NOW = T0 + 86_400_000


def value_of(topic: str, partition: int, offset: int) -> bytes:
    return f"{topic}/{partition}/{offset}:".encode() + bytes([offset % 251]) * 90


def ts_of(offset: int) -> int:
    return T0 + 10 * offset


def produce(broker: Broker, topic: str, partition: int, count: int, per_append: int = 25) -> None:
    """Append ``count`` records after what the partition holds, in appends of
    ``per_append`` (so that segments hold several batches)."""
    start = broker.catalog.partition(topic, partition).next_offset
    for first in range(start, start + count, per_append):
        offsets = range(first, min(first + per_append, start + count))
        broker.produce(
            topic,
            [NewRecord(value_of(topic, partition, o), b"k%d" % o, ts_of(o)) for o in offsets],
            partition=partition,
        )


def make_topic(broker: Broker, topic: str, partitions: int = 2, records: int = 300, segment_size: str = "4KiB") -> None:
    broker.create_topic(topic, partitions, {"segment_size": segment_size, "retention_time": "1h"})
    for p in range(partitions):
        produce(broker, topic, p, records)


def assert_records(records: list[Record], topic: str, partition: int, start: int, end: int) -> None:
    """``records`` are exactly offsets [start, end) as produced."""
    assert [r.offset for r in records] == list(range(start, end)), f"{topic}/{partition}: offsets"
    for r in records:
        assert (r.value, r.key, r.timestamp) == (
            value_of(topic, partition, r.offset),
            b"k%d" % r.offset,
            ts_of(r.offset),
        )


def read_all(broker: Broker, topic: str, partition: int) -> list[Record]:
    """Every record from the log start on."""
    out: list[Record] = []
    offset = broker.catalog.partition(topic, partition).log_start_offset
    while batch := broker.read(topic, partition, offset, 1000):
        out.extend(batch)
        offset = batch[-1].offset + 1
    return out


def sealed_bases(broker: Broker, topic: str, partition: int) -> list[tuple[int, int]]:
    """(base, next) of each sealed segment, oldest first."""
    return [(s.base_offset, s.next_offset) for s in broker.catalog.segments(topic, partition) if s.sealed]


def cut_work(
    broker: Broker, topic: str, cuts: Mapping[int, int], *, reason: str = "DELETE_TIME", quota_exceeded: bool = False
) -> TopicWork:
    """The work a plan would give to cut each partition at a segment boundary: the
    log start moves to the cut, sealed segments wholly below it go."""
    partitions = []
    for p, cut in sorted(cuts.items()):
        row = broker.catalog.partition(topic, p)
        doomed = [s for s in broker.catalog.segments(topic, p) if s.sealed and s.next_offset <= cut]
        partitions.append(
            PartitionWork(
                topic,
                p,
                row.log_start_offset,
                max(row.log_start_offset, cut),
                tuple(SegmentDeletion(s.base_offset, s.next_offset, s.size_bytes, reason) for s in doomed),
                (),
                False,
            )
        )
    return TopicWork(topic, Journal(broker.catalog).policy_version(topic), quota_exceeded, (), tuple(partitions))


def main(argv: list[str]) -> int:
    data_dir, topic, cuts = argv
    with Broker(Path(data_dir)) as broker:
        work = cut_work(broker, topic, {int(p): cut for p, cut in json.loads(cuts).items()})
        result = execute(broker, [work], now=NOW, trigger="manual", actor="crash-test")
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
