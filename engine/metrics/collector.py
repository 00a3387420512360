"""Prometheus metrics of a data directory, read from the catalog and the journal at
each scrape (one read transaction), so that they equal what ``ebb topic describe
--json``, ``ebb group list`` and ``ebb log`` say at that moment.

Names follow Prometheus conventions: base units (bytes, seconds), ``_total`` for
counters, one metric per quantity with ``topic``/``partition``/``group`` labels.
The journal's counters count since the journal began: the rows it keeps and what its
retention trimmed (engine/journal/trimmed.py), so that they never go down.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from itertools import accumulate
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.broker import Broker
from engine.catalog.lag import partition_lags
from engine.catalog.stats import partition_stats
from engine.config import Config, load_config
from engine.datadir import DataDir
from engine.errors import EbbError, InvalidPolicy
from engine.journal import totals
from engine.journal.state import EngineState
from engine.journal.totals import Durations
from engine.journal.trimmed import DURATION_BUCKETS_MS
from engine.policy.effective import EffectivePolicy
from engine.prune.record_times import RecordAges

#: the states of :attr:`engine.prune.session.SparkEngine.state`, and the console's
#: ``off`` (it runs no engine)
SPARK_STATES = ("off", "stopped", "starting", "ready", "not_answering", "failed")
#: cycle statuses a cycle leaves (``ebb log --cycles`` shows it): counted only once
#: it has ended, or the series of the one it leaves would go down
UNFINISHED = ("running",)
_READABLE_HELP = "1 when the scrape read the catalog, 0 when it could not (locked, damaged, gone: see ebb verify)"
_CONFIG_HELP = "1 when the config file is valid; 0: it is not (ebb verify names the error), and no other figure is read"

_PARTITION = ["topic", "partition"]
_GROUP = ["topic", "group", "kind", "partition"]


class EbbCollector(Collector):
    """Collects the metrics of the data directory ``root`` at each scrape; with
    ``spark_state``, also the state of the process's Spark session."""

    def __init__(self, root: Path, config_path: Path | None, spark_state: Callable[[], str] | None = None) -> None:
        self.root = root
        self.config_path = config_path
        self.spark_state = spark_state
        # Kept across scrapes, unlike the broker: a record's timestamp is read once.
        self.record_ages = RecordAges(DataDir(root))

    def describe(self) -> list[Metric]:
        return []  # the registry then needs no scrape to register it

    def collect(self) -> Iterator[Metric]:
        # The process's own, whatever the catalog and the config say.
        if self.spark_state is not None:
            current = self.spark_state()
            yield _gauge("ebbtide_spark_session_state", "1 for the state the engine's Spark session is in", ["state"],
                         {(s,): s == current for s in SPARK_STATES})  # fmt: skip
        try:
            config = load_config(self.config_path or DataDir(self.root).config_path)
        except EbbError:
            # Every other figure needs the config (policies, the clock's config);
            # the catalog is not to blame, so it is not said to be unreadable.
            yield _gauge("ebbtide_config_valid", _CONFIG_HELP, [], {(): 0})
            return
        yield _gauge("ebbtide_config_valid", _CONFIG_HELP, [], {(): 1})
        try:
            yield from self._collect(config)
        except (EbbError, sqlite3.Error, OSError):
            # A scrape that cannot read the catalog (locked, gone) says so as a metric:
            # the server's thread must not print a traceback on the engine's terminal.
            # Why is for `ebb verify`: a help text that changed with the error would
            # make the family's metadata differ from scrape to scrape.
            yield _gauge("ebbtide_catalog_readable", _READABLE_HELP, [], {(): 0})
            return
        yield _gauge("ebbtide_catalog_readable", _READABLE_HELP, [], {(): 1})

    def _collect(self, config: Config) -> Iterator[Metric]:
        # A broker per scrape: the HTTP server scrapes in threads of its own, and a
        # SQLite connection stays in the thread that opened it. It is given the config
        # read above: a file changed in between would else read as an unreadable catalog.
        with Broker(self.root, self.config_path, config=config) as broker:
            catalog = broker.catalog
            state = EngineState(catalog)  # the journal's tables made where an old catalog lacks them
            with catalog.read():
                now = broker.clock()
                stats = partition_stats(catalog)
                lags = partition_lags(catalog, self.record_ages)
                names = [t.name for t in catalog.topics()]
                policies = {name: _policy(broker, name) for name in names}
                quotas = state.quota_states()
                paused = state.is_paused()
                by_status = totals.cycles_by_status(catalog.db.conn)
                phases = totals.phase_durations(catalog.db.conn)
                deleted = totals.deleted_by_reason(catalog.db.conn)
        yield from _partitions(stats)
        yield from _lags(lags, now)
        yield _gauge("ebbtide_topic_quota_exceeded", "1 if the last cycle found the topic over its backlog quota",
                     ["topic"], {(n,): quotas[n].exceeded if n in quotas else 0 for n in names})  # fmt: skip
        yield _gauge("ebbtide_topic_hold", "1 if the topic is held (nothing of it is deleted)", ["topic"],
                     {(n,): bool(p["hold"]) for n, p in policies.items() if p is not None})  # fmt: skip
        yield _gauge("ebbtide_topic_policy_valid",
                     "1 if the topic's policy is valid; 0: it is not planned, nothing of it is deleted, until fixed",
                     ["topic"], {(n,): p is not None for n, p in policies.items()})  # fmt: skip
        yield _gauge("ebbtide_engine_paused", "1 while deletion is paused (ebb pause)", [], {(): paused})
        # trigger: a scheduled cycle's times apart from a manual truncate's or purge's
        cycles = CounterMetricFamily(
            "ebbtide_cycles",
            "prune cycles that ended, in the journal, by trigger and status",
            labels=["trigger", "status"],
        )
        for (trigger, status), count in by_status.items():
            if status not in UNFINISHED:
                cycles.add_metric([trigger, status], count)
        yield cycles
        durations = HistogramMetricFamily(
            "ebbtide_cycle_duration_seconds",
            "prune cycles: plan (snapshot and Spark), apply (journal start to end) and cycle (the two)",
            labels=["trigger", "phase"],
        )
        for (trigger, phase), histogram in phases.items():
            durations.add_metric([trigger, phase], *_buckets(histogram))
        yield durations
        segments = CounterMetricFamily(
            "ebbtide_deleted_segments", "segments deleted, by reason", labels=["topic", "reason"]
        )
        size = CounterMetricFamily(
            "ebbtide_deleted_bytes", "bytes of the segments deleted, by reason", labels=["topic", "reason"]
        )
        for d in deleted:
            segments.add_metric([d.topic, d.reason], d.segments)
            size.add_metric([d.topic, d.reason], d.bytes)
        yield segments
        yield size


def _policy(broker: Broker, topic: str) -> EffectivePolicy | None:
    """The topic's effective policy; None where it is invalid (not planned until fixed)."""
    try:
        return broker.policy(topic)
    except InvalidPolicy:
        return None


def _gauge(name: str, doc: str, labels: list[str], values: dict[tuple, float | bool | int]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, doc, labels=labels)
    for key, value in values.items():
        gauge.add_metric([str(k) for k in key], float(value))
    return gauge


def _partitions(stats: list) -> Iterator[Metric]:
    figures = {
        "ebbtide_partition_bytes": ("bytes of the partition's segments", "size_bytes"),
        "ebbtide_partition_segments": ("segments of the partition, the active one included", "segments"),
        "ebbtide_partition_log_start_offset": ("the partition's log start offset", "log_start_offset"),
        "ebbtide_partition_log_end_offset": ("the partition's next offset", "next_offset"),
    }
    for name, (doc, field) in figures.items():
        yield _gauge(name, doc, _PARTITION, {(s.topic, s.partition): getattr(s, field) for s in stats})


def _lags(lags: list, now: int) -> Iterator[Metric]:
    """Lag from the effective position (``max(position, log start)``), as the console shows it."""
    key = {lag: (lag.topic, lag.group, lag.kind, lag.partition) for lag in lags}
    yield _gauge("ebbtide_group_lag_messages", "offsets from the group's position to the partition's end", _GROUP,
                 {key[lag]: lag.lag_messages for lag in lags})  # fmt: skip
    yield _gauge("ebbtide_group_lag_bytes", "bytes of the segments holding unconsumed offsets", _GROUP,
                 {key[lag]: lag.lag_bytes for lag in lags})  # fmt: skip
    yield _gauge("ebbtide_group_lag_seconds", "age of the oldest unconsumed record", _GROUP,
                 {key[lag]: lag.lag_ms(now) / 1000 for lag in lags})  # fmt: skip


def _buckets(histogram: Durations) -> tuple[list[tuple[str, float]], float]:
    """Cumulative bucket counts of ``histogram`` (the last one ``+Inf``), and its sum
    in seconds. The sum is of the milliseconds, divided once: adding each cycle's
    seconds gives 0.024999999999999998 for 22 + 1 + 1 + 1 ms, not the 0.025 that the
    journal's ``log --cycles`` adds up to."""
    bounds = [str(bound / 1000) for bound in DURATION_BUCKETS_MS] + ["+Inf"]
    return list(zip(bounds, map(float, accumulate(histogram.counts)))), histogram.total_ms / 1000
