"""The history of bytes on disk (engine/journal/history.py): each cycle that ran
samples every topic after applying; samples follow the journal's retention and their
topic; an old catalog gains the table on open; reads thin a long history to buckets."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.broker import Broker
from engine.journal.history import HISTORY_MS, DiskHistory, DiskSample
from engine.journal.journal import Journal
from engine.prune.executor import execute
from tests.support.prune_driver import NOW, cut_work, make_topic, produce


def _cycle(journal: Journal, started: int) -> int:
    cycle = journal.start_cycle(
        trigger="schedule", actor="engine", scope="all", now=started, started=started, spark_master=None
    )
    journal.finish_cycle(cycle, status="done", finished=started, planned=0, applied=0, bytes_freed=0)
    return cycle


def test_a_cycle_samples_every_topic_after_it_deleted(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", clock=lambda: NOW) as broker:
        make_topic(broker, "orders", partitions=2)
        make_topic(broker, "audit", partitions=1)
        before = {t: sum(s.size_bytes for p in range(n) for s in broker.catalog.segments(t, p)) for t, n in
                  (("orders", 2), ("audit", 1))}  # fmt: skip
        result = execute(broker, [cut_work(broker, "orders", {0: 100})], now=NOW)
        assert result.bytes_freed > 0
        history = DiskHistory(broker.catalog)
        samples = history.samples(since=0, until=NOW)
        assert history.freed("orders", [result.cycle_id]) == {result.cycle_id: result.bytes_freed}
        assert history.freed("audit", [result.cycle_id]) == {}
    assert samples == [
        DiskSample("audit", NOW, before["audit"], samples[0].segments),
        DiskSample("orders", NOW, before["orders"] - result.bytes_freed, samples[1].segments),
    ]
    assert all(s.segments > 0 for s in samples)


def test_a_dry_run_samples_nothing(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", clock=lambda: NOW) as broker:
        make_topic(broker, "orders", partitions=1)
        execute(broker, [cut_work(broker, "orders", {0: 100})], now=NOW, dry_run=True)
        assert DiskHistory(broker.catalog).samples(since=0, until=NOW) == []


def test_samples_go_with_their_cycle_their_topic_and_age(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", clock=lambda: NOW) as broker:
        make_topic(broker, "orders", partitions=1)
        make_topic(broker, "audit", partitions=1)
        journal, history = Journal(broker.catalog), DiskHistory(broker.catalog)
        old = _cycle(journal, NOW - 3 * 86_400_000)
        history.record(old, time=NOW - 3 * 86_400_000)
        recent = _cycle(journal, NOW)
        history.record(recent, time=NOW)
        assert len(history.samples(since=0, until=NOW)) == 4
        journal.apply_retention(now=NOW, retention_ms=86_400_000)
        assert [(s.topic, s.time) for s in history.samples(since=0, until=NOW)] == [("audit", NOW), ("orders", NOW)]
        broker.delete_topic("audit")
        assert [s.topic for s in history.samples(since=0, until=NOW)] == ["orders"]
        # A sample older than the history's window goes at the next cycle, whatever the journal keeps.
        later = _cycle(journal, NOW + HISTORY_MS + 1)
        history.record(later, time=NOW + HISTORY_MS + 1)
        assert [s.time for s in history.samples(since=0, until=NOW + HISTORY_MS + 1)] == [NOW + HISTORY_MS + 1]


def test_reads_keep_the_last_sample_of_each_bucket(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", clock=lambda: NOW) as broker:
        make_topic(broker, "orders", partitions=1, records=50)
        journal, history = Journal(broker.catalog), DiskHistory(broker.catalog)
        for step in range(6):  # one cycle every 10 s, the data growing between them
            history.record(_cycle(journal, NOW + step * 10_000), time=NOW + step * 10_000)
            produce(broker, "orders", 0, 10)
        every = history.samples(since=NOW, until=NOW + 60_000)
        thinned = history.samples(since=NOW, until=NOW + 60_000, bucket_ms=30_000)
    assert len(every) == 6 and [s.bytes for s in every] == sorted(s.bytes for s in every)
    assert every[0].bytes < every[-1].bytes
    last_of_bucket: dict[int, DiskSample] = {}
    for sample in every:
        last_of_bucket[sample.time // 30_000] = sample
    assert thinned == list(last_of_bucket.values())
    assert 2 <= len(thinned) < len(every)


def test_an_old_catalog_gains_the_table_on_open(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", clock=lambda: NOW) as broker:
        make_topic(broker, "orders", partitions=1)
        Journal(broker.catalog)
    with sqlite3.connect(tmp_path / "data" / "catalog.db") as db:
        db.execute("DROP TABLE disk_samples")
    with Broker(tmp_path / "data", clock=lambda: NOW) as broker:
        result = execute(broker, [cut_work(broker, "orders", {0: 100})], now=NOW)
        samples = DiskHistory(broker.catalog).samples(since=0, until=NOW)
    assert result.status == "done"
    assert [s.topic for s in samples] == ["orders"]
