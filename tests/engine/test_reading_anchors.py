"""Reading anchors (engine/catalog/anchors.py): commits rotate them at least a span
apart; engine moves (a TTL skip, an eviction, a reader moved up to the log start)
shift them; a rewind and ``ebb group move`` clear them; an older catalog gains them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.broker import Broker
from engine.catalog.anchors import READING_SPAN_MS
from engine.prune.operations import move_group
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from tests.support.seed_scenarios import MIN, T0, write

SPAN = READING_SPAN_MS


def _anchor(broker: Broker, topic: str, group: str, partition: int = 0) -> tuple[int, int] | None:
    """(anchor position, anchor time) of the group's row, None without one."""
    rows = [r for r in broker.catalog.reading_anchors([topic]) if r[1] == group and r[2] == partition]
    return (rows[0][5], rows[0][6]) if rows else None


def _reading(data_dir: Path, records: int = 20) -> Broker:
    """A topic ``t`` of ``records`` records at T0 and a subscriber ``g`` at 0."""
    broker = Broker(data_dir, clock=lambda: T0)
    broker.create_topic("t", 1, {"segment_size": "1000"})
    write(broker, "t", [T0 + i for i in range(records)])
    broker.create_group("t", "g", "subscriber", "earliest")
    return broker


def test_commits_rotate_the_anchors_a_span_apart(data_dir: Path) -> None:
    with _reading(data_dir) as broker:
        broker.commit("t", "g", 0, 1, at_ms=T0)
        broker.commit("t", "g", 0, 2, at_ms=T0 + SPAN - 1)
        assert _anchor(broker, "t", "g") is None  # one anchor only: no span measured yet
        broker.commit("t", "g", 0, 3, at_ms=T0 + SPAN)
        assert _anchor(broker, "t", "g") == (1, T0)
        broker.commit("t", "g", 0, 4, at_ms=T0 + 2 * SPAN - 1)
        assert _anchor(broker, "t", "g") == (1, T0)  # still a span from the newer one
        broker.commit("t", "g", 0, 5, at_ms=T0 + 2 * SPAN)
        assert _anchor(broker, "t", "g") == (3, T0 + SPAN)


def test_a_rewind_or_a_move_by_the_operator_clears_them(data_dir: Path) -> None:
    with _reading(data_dir) as broker:
        broker.commit("t", "g", 0, 4, at_ms=T0)
        broker.commit("t", "g", 0, 8, at_ms=T0 + SPAN)
        broker.commit("t", "g", 0, 2, at_ms=T0 + SPAN + 1)  # back: a reset by the consumer
        assert _anchor(broker, "t", "g") is None
        broker.commit("t", "g", 0, 6, at_ms=T0 + 2 * SPAN + 1)
        assert _anchor(broker, "t", "g") == (2, T0 + SPAN + 1)
        move_group(broker, "t", "g", 0, to_offset=10)
        assert _anchor(broker, "t", "g") is None
        assert broker.catalog.group("t", "g").positions[0][0] == 10


def test_a_reader_moved_up_to_the_log_start_shifts_them(data_dir: Path) -> None:
    with _reading(data_dir) as broker:
        broker.create_group("t", "r", "reader", "earliest")
        broker.commit("t", "r", 0, 0, at_ms=T0 - 2 * SPAN)
        broker.commit("t", "r", 0, 2, at_ms=T0 - SPAN)
        broker.catalog.set_log_start("t", 0, 10)  # as retention does, readers are left behind
        broker.consume("t", "r", max_records=3)  # reads 10, 11, 12 at T0
        assert broker.catalog.group("t", "r").positions[0] == (13, T0)
        # 8 offsets skipped, not read: the anchor moved up by as many
        assert _anchor(broker, "t", "r") == (2 + 8, T0 - SPAN)


def test_engine_moves_shift_them(data_dir: Path, spark_engine: SparkEngine) -> None:
    """A cycle's TTL skip and backlog eviction move a subscriber on, keeping its
    commit time: its anchors shift by as much, and its pace reads the same."""
    with Broker(data_dir, clock=lambda: T0 + 60 * MIN) as broker:
        broker.create_topic("ttl", 1, {"segment_size": "1000", "message_ttl": "30m"})
        broker.create_topic(
            "evict", 1, {"segment_size": "1000", "backlog_age": "30m", "backlog_policy": "consumer_backlog_eviction"}
        )
        for name in ("ttl", "evict"):
            write(broker, name, [T0 + i * MIN for i in range(45)])
            broker.create_group(name, "g", "subscriber", "earliest")
            broker.commit(name, "g", 0, 0, at_ms=T0 + 40 * MIN)
            broker.commit(name, "g", 0, 5, at_ms=T0 + 50 * MIN)
        Pruner(broker, spark_engine).cycle(now=T0 + 60 * MIN)
        for name in ("ttl", "evict"):
            position, committed_at = broker.catalog.group(name, "g").positions[0]
            assert position == 30 and committed_at == T0 + 50 * MIN, name  # records from 30 on are 30 min old
            assert _anchor(broker, name, "g") == (25, T0 + 40 * MIN), name


def test_an_older_catalog_gains_them_when_opened(data_dir: Path) -> None:
    with _reading(data_dir) as broker:
        broker.commit("t", "g", 0, 7, at_ms=T0)
    conn = sqlite3.connect(data_dir / "catalog.db")
    for column in ("anchor_position", "anchor_at", "next_anchor_position", "next_anchor_at"):
        conn.execute(f"ALTER TABLE positions DROP COLUMN {column}")
    conn.commit()
    conn.close()
    with Broker(data_dir, clock=lambda: T0) as broker:
        assert broker.catalog.group("t", "g").positions[0] == (7, T0)
        assert _anchor(broker, "t", "g") is None  # no observed rate yet
        broker.commit("t", "g", 0, 9, at_ms=T0 + SPAN)
        broker.commit("t", "g", 0, 12, at_ms=T0 + 2 * SPAN)
        assert _anchor(broker, "t", "g") == (9, T0 + SPAN)
