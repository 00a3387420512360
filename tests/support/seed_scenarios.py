"""Small helpers for tests/prune/test_seed_examples.py: the seeds' worked examples with
their byte sizes scaled down and their shapes kept.

Scale: "1 GB" of the seeds is 1000 bytes here, so "0.1 GB" is one record of exactly
100 bytes. Every record is appended on its own, so it is one batch of exactly
:data:`RECORD` bytes (batch header + record framing + value), and a segment of
``segment_size = 1000`` holds exactly ten records: segment ``k`` of a partition
written from offset 0 is ``[10k, 10k + 10)``.

Nothing here computes an expectation: the tests state theirs by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.broker import Broker
from engine.journal.journal import Journal
from engine.journal.rows import Action
from engine.prune.planner import Plan
from engine.store.batch import HEADER_SIZE, RECORD_OVERHEAD, NewRecord

#: a fixed epoch (ms) for simulated time: 2025-11-01T12:26:40Z
T0 = 1_762_000_000_000
SEC = 1000
MIN = 60 * SEC
HOUR = 60 * MIN
DAY = 24 * HOUR

#: "1 GB" scaled: one segment
SEGMENT = 1000
#: "0.1 GB" scaled: one record, alone in its batch
RECORD = 100
VALUE = b"v" * (RECORD - HEADER_SIZE - RECORD_OVERHEAD)
assert HEADER_SIZE + RECORD_OVERHEAD + len(VALUE) == RECORD


def write(broker: Broker, topic: str, timestamps: Iterable[int], partition: int = 0) -> None:
    """Append one record per timestamp, each in its own batch of RECORD bytes."""
    for ts in timestamps:
        broker.produce(topic, [NewRecord(VALUE, None, ts)], partition=partition)


def layout(broker: Broker, topic: str, partition: int = 0) -> list[tuple[int, int, int, bool]]:
    """(base, next, size, sealed) of every segment, oldest first, from describe."""
    (p,) = [p for p in broker.describe(topic).to_json()["partitions"] if p["partition"] == partition]
    return [(s["base_offset"], s["next_offset"], s["size_bytes"], s["sealed"]) for s in p["segments"]]


def log_start(broker: Broker, topic: str, partition: int = 0) -> int:
    return broker.catalog.partition(topic, partition).log_start_offset


def positions(broker: Broker, topic: str, partition: int = 0) -> dict[str, int]:
    """group name -> position on ``partition``, from describe."""
    return {g["name"]: g["positions"][str(partition)] for g in broker.describe(topic).to_json()["groups"]}


def decisions(plan: Plan, topic: str, partition: int = 0) -> list[tuple[int, str, str]]:
    """(base, decision, reason) of the plan's segments of one partition, oldest first."""
    rows = [r for r in plan.tables["segments"].to_pylist() if r["topic"] == topic and r["partition"] == partition]
    return [(r["base_offset"], r["decision"], r["reason"]) for r in sorted(rows, key=lambda r: r["base_offset"])]


def segment_rows(plan: Plan, topic: str, partition: int = 0) -> dict[int, dict[str, Any]]:
    """base offset -> the plan's full segment row."""
    return {
        r["base_offset"]: r
        for r in plan.tables["segments"].to_pylist()
        if r["topic"] == topic and r["partition"] == partition
    }


def partition_row(plan: Plan, topic: str, partition: int = 0) -> dict[str, Any]:
    (row,) = [r for r in plan.tables["partitions"].to_pylist() if r["topic"] == topic and r["partition"] == partition]
    return row


def group_rows(plan: Plan, topic: str, partition: int = 0) -> dict[str, dict[str, Any]]:
    return {
        r["group"]: r for r in plan.tables["groups"].to_pylist() if r["topic"] == topic and r["partition"] == partition
    }


def quota_exceeded(plan: Plan, topic: str) -> bool:
    (row,) = [r for r in plan.tables["topics"].to_pylist() if r["topic"] == topic]
    return row["quota_exceeded"]


def actions(broker: Broker, cycle: int, topic: str | None = None, action: str | None = None) -> list[Action]:
    """The journal's actions of one cycle, oldest first."""
    rows = Journal(broker.catalog).actions(cycle=cycle, topic=topic, action=action, limit=None)
    return sorted(rows, key=lambda r: r.id)


def action_summary(broker: Broker, cycle: int, topic: str) -> list[tuple]:
    """(action, partition, start, end, messages, bytes, reason, status) per action of
    one topic in one cycle, oldest first: the shape the tests compare by hand."""
    return [
        (
            a.action,
            a.partition,
            a.start_offset,
            a.end_offset,
            a.messages,
            a.bytes,
            a.reason,
            a.status,
        )
        for a in actions(broker, cycle, topic)
    ]
