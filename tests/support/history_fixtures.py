"""A journaled past for the charts: prune cycles every 5 minutes over the last hour of
the fixed console catalog (tests/support/console_fixtures.py), run by the real
executor at a moving clock, so that each cycle samples the bytes on disk; records
arrive between cycles and every fourth cycle deletes clickstream's oldest segments."""

from __future__ import annotations

from pathlib import Path

from engine.broker import Broker
from engine.prune.executor import execute
from engine.store.batch import NewRecord
from tests.support.console_fixtures import MINUTE, NOW, TOPICS
from tests.support.prune_driver import cut_work

CYCLES, STEP_MS = 12, 5 * MINUTE
#: what each cycle's plan took, as a warm Spark plans this catalog (the clock stands
#: still while a cycle applies, so its applying reads 0 ms)
PLAN_MS = 1_200


def write_disk_history(root: Path, step_ms: int = STEP_MS) -> None:
    """``CYCLES`` cycles ``step_ms`` apart, the last ``step_ms`` before the fixed clock."""
    clock = [NOW]
    with Broker(root, clock=lambda: clock[0]) as broker:
        for i in range(CYCLES):
            clock[0] = NOW - (CYCLES - i) * step_ms
            for name, (partitions, _policy) in TOPICS.items():
                count = 4 + 4 * (i % 3) if name != "legal" else 1
                for p in range(partitions):
                    records = [NewRecord(value=bytes(100), key=None, timestamp=clock[0] + j) for j in range(count)]
                    broker.produce(name, records, partition=p)
            work = []
            if i % 4 == 3:
                sealed = [s for s in broker.catalog.segments("clickstream", 0) if s.sealed]
                work = [cut_work(broker, "clickstream", {0: sealed[2].next_offset, 1: sealed[1].next_offset})]
            execute(broker, work, now=clock[0], spark_master="local[2]", plan_ms=PLAN_MS)
