"""``ebb engine --metrics``: a real engine process serves Prometheus metrics on
loopback; a scrape over HTTP agrees exactly with ``ebb topic describe --json`` and
with the journal. Addresses other than loopback are refused."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.cli.main import main
from console.cli.metrics import serve_metrics
from engine.broker import Broker
from engine.clock import now_ms
from engine.config import Config
from engine.errors import InvalidInput
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.prune.operations import truncate
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from engine.store.batch import NewRecord
from tests.support.cli import REPO, ebb_command, subprocess_env
from tests.support.lag_catalog import POSITIONS, build_lag_catalog, record_time

HOUR = 3_600_000
START_TIMEOUT = 240.0  # a JVM on a shared machine


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def events(data_dir: Path) -> None:
    """``events``: 2 partitions, old records (retention_time 1h deletes them) and new
    ones; a subscriber part way; a reader at the start."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text(
        '[engine]\nfsync = "never"\n[spark.conf]\n"spark.sql.shuffle.partitions" = "2"\n'
    )
    now = int(time.time() * 1000)
    with Broker(data_dir) as broker:
        broker.create_topic("events", 2, {"segment_size": "2KiB", "retention_time": "1h"})
        for p in (0, 1):
            old = [NewRecord(b"o" * 200, timestamp=now - 3 * HOUR + i) for i in range(40)]
            new = [NewRecord(b"n" * 200, timestamp=now - 60_000 + i) for i in range(25)]
            for record in old + new:
                broker.produce("events", [record], partition=p)
        broker.create_group("events", "billing", "subscriber", "earliest")
        broker.commit("events", "billing", 0, 50)
        broker.commit("events", "billing", 1, 10)
        broker.create_group("events", "audit", "reader", "earliest")


def _samples(port: int) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _served_once(broker: Broker, port: int) -> dict[tuple[str, frozenset], float]:
    """One scrape of ``[engine] metrics`` (on ``port``) as this process serves them
    for ``broker``, the way the console does (no Spark session), then stopped."""
    server = serve_metrics(broker, None, lambda: "off", pytest.fail)
    assert server is not None
    try:
        return _samples(port)
    finally:
        server.stop()


def _first_cycle(proc: subprocess.Popen[bytes]) -> dict:
    """The engine's first line (``--json``: its first cycle), within START_TIMEOUT."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
    assert ready, f"no cycle within {START_TIMEOUT:g} s"
    line = proc.stdout.readline()
    assert line, f"ebb engine exited ({proc.wait()}): {proc.stderr.read().decode() if proc.stderr else ''}"
    return json.loads(line)


def test_a_scrape_agrees_with_describe_and_the_journal(
    events: None, data_dir: Path, ebb, spark_connect_server: str
) -> None:
    port = _free_port()
    # Planning on the run's Connect server: the scrape is what is tested, and the
    # engine plans the same there without a JVM of its own to start.
    where = ("--spark-remote", spark_connect_server)
    proc = subprocess.Popen(
        ebb_command(data_dir, "engine", "--json", "--prune-interval", "1h", "--metrics", f"127.0.0.1:{port}", *where),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, start_new_session=True,
        env=subprocess_env(),
    )  # fmt: skip
    try:
        cycle = _first_cycle(proc)
        assert cycle["status"] == "done" and cycle["applied"] > 0
        samples = _samples(port)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    described = json.loads(ebb("topic", "describe", "events", "--json").out)

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    for p in described["partitions"]:
        where = {"topic": "events", "partition": str(p["partition"])}
        assert value("ebbtide_partition_bytes", **where) == p["size_bytes"]
        assert value("ebbtide_partition_segments", **where) == len(p["segments"])
        assert value("ebbtide_partition_log_start_offset", **where) == p["log_start_offset"]
        assert value("ebbtide_partition_log_end_offset", **where) == p["next_offset"]
        for group in described["groups"]:
            at = max(group["positions"][str(p["partition"])], p["log_start_offset"])
            unread = [s for s in p["segments"] if s["next_offset"] > at]
            labels = {**where, "group": group["name"], "kind": group["kind"]}
            assert value("ebbtide_group_lag_messages", **labels) == p["next_offset"] - at
            assert value("ebbtide_group_lag_bytes", **labels) == sum(s["size_bytes"] for s in unread)
            assert value("ebbtide_group_lag_seconds", **labels) >= 0
    with Broker(data_dir) as broker:
        journal = Journal(broker.catalog)
        cycles = journal.cycles(limit=None)
        deleted = [a for a in journal.actions(limit=None) if a.action == "delete_segment" and a.status == "applied"]
    done = len([c for c in cycles if c.status == "done" and c.trigger == "schedule"])
    assert value("ebbtide_cycles_total", trigger="schedule", status="done") == done == 1
    reasons = {a.reason for a in deleted}
    assert reasons == {"DELETE_TIME"}
    assert value("ebbtide_deleted_segments_total", topic="events", reason="DELETE_TIME") == len(deleted)
    assert value("ebbtide_deleted_bytes_total", topic="events", reason="DELETE_TIME") == sum(a.bytes for a in deleted)
    for phase in ("apply", "plan", "cycle"):
        assert value("ebbtide_cycle_duration_seconds_count", trigger="schedule", phase=phase) == 1
    assert (
        value("ebbtide_cycle_duration_seconds_sum", trigger="schedule", phase="cycle") == cycles[0].duration_ms / 1000
    )
    assert value("ebbtide_topic_hold", topic="events") == 0
    assert value("ebbtide_engine_paused") == 0
    assert value("ebbtide_topic_quota_exceeded", topic="events") == described["quota"]["exceeded"] == 0
    assert value("ebbtide_spark_session_state", state="ready") == 1
    assert value("ebbtide_catalog_readable") == 1


@pytest.mark.parametrize("address", ["0.0.0.0:9464", "192.0.2.1:9464", "example.com:9464", "127.0.0.1", "[::1]:0"])
def test_only_a_loopback_address_is_served(ebb, address: str) -> None:
    result = ebb("engine", "--metrics", address)
    assert result.code == 2 and result.out == ""
    (line,) = result.err.splitlines()
    assert line.startswith("ebb: error: metrics address") and address in line


def test_the_config_key_is_checked(data_dir: Path, ebb) -> None:
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nmetrics = "10.0.0.1:9464"\n')
    result = ebb("topic", "list")
    assert result.code == 2 and "[engine] metrics address" in result.err


def test_the_configured_address_is_served_until_stopped(events: None, data_dir: Path) -> None:
    """``[engine] metrics``, as the console serves it (console/cli/metrics.py)."""
    port = _free_port()
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
    with Broker(data_dir) as broker:
        samples = _served_once(broker, port)
        for p in broker.describe("events").partitions:
            key = ("ebbtide_partition_bytes", frozenset({"topic": "events", "partition": str(p.row.partition)}.items()))
            assert samples[key] == p.size_bytes
    assert samples[("ebbtide_spark_session_state", frozenset({"state": "off"}.items()))] == 1
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_the_quota_verdict_is_described_as_it_is_scraped(events: None, data_dir: Path, ebb) -> None:
    """``describe --json`` carries the quota verdict the gauge shows (it was only in the
    journal, whose last row for a name can be a deleted topic's)."""
    port = _free_port()
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
    with Broker(data_dir) as broker:
        EngineState(broker.catalog).set_quota_state("events", True, 1_700_000_000_000)
        samples = _served_once(broker, port)
    described = json.loads(ebb("topic", "describe", "events", "--json").out)
    assert described["quota"] == {"exceeded": True, "since": 1_700_000_000_000}
    assert samples[("ebbtide_topic_quota_exceeded", frozenset({"topic": "events"}.items()))] == 1
    text = ebb("topic", "describe", "events").out.splitlines()[0]
    assert text == "topic events: 2 partition(s); backlog quota exceeded since 2023-11-14T22:13:20.000Z"


def test_a_scrape_while_the_console_starts_is_answered(
    events: None, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console serves ``[engine] metrics`` from its start: a scrape that arrives
    before its host is built is answered (no Spark session yet), not a 500 with a
    traceback on the operator's terminal."""
    port = _free_port()
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
    scrapes: list[dict[tuple[str, frozenset], float]] = []

    class ScrapedWhileBuilt:
        """The console's host, scraped while it is being built; no UI is run."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            scrapes.append(_samples(port))

        def close(self) -> None:
            pass

    class NoUI:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def run(self) -> None:
            pass

    monkeypatch.setattr("console.host.ConsoleHost", ScrapedWhileBuilt)
    monkeypatch.setattr("console.app.EbbApp", NoUI)
    assert main(["--data-dir", str(data_dir)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    (samples,) = scrapes
    assert samples[("ebbtide_spark_session_state", frozenset({"state": "off"}.items()))] == 1
    key = ("ebbtide_partition_log_end_offset", frozenset({"topic": "events", "partition": "0"}.items()))
    assert samples[key] == 65


def test_a_console_that_cannot_be_built_stops_its_metrics_and_its_host(
    events: None, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port is served before the console is built; a console that then fails to
    build (its app here) leaves no port open behind its one error line, and closes
    the host it had built."""
    port = _free_port()
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
    closed: list[bool] = []

    class Host:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def close(self) -> None:
            closed.append(True)

    class UnbuildableUI:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise InvalidInput("the app cannot be built")

    monkeypatch.setattr("console.host.ConsoleHost", Host)
    monkeypatch.setattr("console.app.EbbApp", UnbuildableUI)
    assert main(["--data-dir", str(data_dir)]) == 2
    assert capsys.readouterr().err.strip() == "ebb: error: the app cannot be built"
    assert closed == [True]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_manual_truncate_is_counted_apart_from_scheduled_cycles(events: None, data_dir: Path) -> None:
    """A truncate is journaled as a cycle with a plan of milliseconds: under the same
    labels as the scheduled cycles it pulled their plan-time quantiles down."""
    port = _free_port()
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
    with Broker(data_dir) as broker:
        truncate(broker, "events", 0, before_offset=20)
        (cycle,) = Journal(broker.catalog).cycles(limit=None)
        samples = _served_once(broker, port)
    assert cycle.trigger == "manual" and cycle.status == "done"
    assert samples[("ebbtide_cycles_total", frozenset({"trigger": "manual", "status": "done"}.items()))] == 1
    count = "ebbtide_cycle_duration_seconds_count"
    assert samples[(count, frozenset({"trigger": "manual", "phase": "plan"}.items()))] == 1
    assert not [key for key in samples if key[0] == count and ("trigger", "schedule") in key[1]]


def test_lag_seconds_is_the_age_of_the_record_at_the_position_and_agrees_with_the_quota(
    data_dir: Path, spark_engine: SparkEngine
) -> None:
    """Groups inside a segment begun 3 h before the record at their position, under a
    1 h ``backlog_age`` (tests/support/lag_catalog.py): the gauge reads that record's
    age, so that it is over ``backlog_age`` exactly where the cycle finds the quota
    exceeded."""
    built = now_ms()
    build_lag_catalog(data_dir, built)
    port = _free_port()
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
    with Broker(data_dir) as broker:
        before = now_ms()
        samples = _served_once(broker, port)
        after = now_ms()
        Pruner(broker, spark_engine).cycle()
        verdicts = _served_once(broker, port)
        described = {topic: broker.describe(topic).to_json()["quota"]["exceeded"] for topic, _ in POSITIONS}
    over: dict[str, bool] = {}
    for (topic, group), positions in POSITIONS.items():
        for p, at in enumerate(positions):
            labels = {"topic": topic, "group": group, "kind": "subscriber", "partition": str(p)}
            seconds = samples[("ebbtide_group_lag_seconds", frozenset(labels.items()))]
            oldest = record_time(built, p, at)
            assert (before - oldest) / 1000 <= seconds <= (after - oldest) / 1000
            over[topic] = over.get(topic, False) or seconds > HOUR / 1000
    assert over == {"fresh": False, "stale": True}
    quota = {t: bool(verdicts[("ebbtide_topic_quota_exceeded", frozenset({"topic": t}.items()))]) for t in over}
    assert quota == described == over


def test_an_unreadable_catalog_is_a_zero_under_the_same_help(ebb, data_dir: Path) -> None:
    """Prometheus keeps one help text per family: the reason a scrape failed is for
    ``ebb verify``, not the metadata, which would otherwise change with each error."""
    from engine.metrics.collector import EbbCollector

    ebb("topic", "create", "orders")

    def readable() -> tuple[str, float]:
        (family,) = [f for f in EbbCollector(data_dir, None).collect() if f.name == "ebbtide_catalog_readable"]
        return family.documentation, family.samples[0].value

    help_text, value = readable()
    assert value == 1
    catalog = data_dir / "catalog.db"
    catalog.rename(data_dir / "catalog.moved")
    catalog.mkdir()  # a directory where the catalog was: SQLite cannot open it
    assert readable() == (help_text, 0)


def test_counters_never_go_down_as_the_journal_trims_its_rows(broker: Broker, data_dir: Path) -> None:
    """A counter that fell when the journal's retention trimmed old rows read to
    Prometheus as a restart: ``increase()`` then added everything still kept (after
    90 days, the 90-day total in one step), or went flat while cycles ran."""
    from engine.journal.journal import Entry
    from engine.metrics.collector import EbbCollector

    journal = Journal(broker.catalog)
    day = 86_400_000

    def cycle(started: int, trigger: str, status: str, ms: tuple[int, int], deleted: int) -> None:
        plan_ms, apply_ms = ms
        cycle_id = journal.start_cycle(
            trigger=trigger, actor="e", scope="all", now=started, started=started, spark_master=None, plan_ms=plan_ms
        )
        entries = [
            Entry("delete_segment", "t", 0, segment=i, bytes=100 + i, reason="DELETE_TIME") for i in range(deleted)
        ]
        journal.append(entries, time=started, trigger=trigger, actor="e", status="applied", cycle=cycle_id)
        journal.finish_cycle(
            cycle_id, status=status, finished=started + apply_ms, planned=deleted, applied=deleted, bytes_freed=0
        )

    def counters() -> dict[tuple[str, frozenset], float]:
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in EbbCollector(data_dir, None).collect()
            if family.type in ("counter", "histogram")
            for sample in family.samples
        }

    start = 1_760_000_000_000
    for i, (ms, deleted) in enumerate([((40, 7), 2), ((3_000, 20), 1), ((900_000, 0), 0), ((40, 70), 3)]):
        cycle(start + i * day, "schedule", "done", ms, deleted)
    cycle(start, "manual", "failed", (5, 1), 0)
    before = counters()
    assert before[("ebbtide_deleted_segments_total", frozenset({"topic": "t", "reason": "DELETE_TIME"}.items()))] == 6
    assert before[("ebbtide_cycles_total", frozenset({"trigger": "schedule", "status": "done"}.items()))] == 4

    # A retention that keeps two days trims the first two scheduled cycles and the manual one.
    removed = journal.apply_retention(now=start + 4 * day, retention_ms=2 * day)
    assert (removed.cycles, removed.actions) == (3, 3)
    assert counters() == before
    removed = journal.apply_retention(now=start + 9 * day, retention_ms=2 * day)  # and then the rest
    assert (removed.cycles, removed.actions) == (2, 3)
    assert counters() == before

    cycle(start + 9 * day, "schedule", "done", (40, 7), 1)
    after = counters()
    grew = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    expected: dict[tuple[str, frozenset], float] = {
        ("ebbtide_cycles_total", frozenset({"trigger": "schedule", "status": "done"}.items())): 1,
        ("ebbtide_deleted_segments_total", frozenset({"topic": "t", "reason": "DELETE_TIME"}.items())): 1,
        ("ebbtide_deleted_bytes_total", frozenset({"topic": "t", "reason": "DELETE_TIME"}.items())): 100,
    }
    bounds = ["0.01", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0", "60.0", "120.0", "300.0",
              "600.0", "+Inf"]  # fmt: skip
    for phase, seconds in (("plan", 0.040), ("apply", 0.007), ("cycle", 0.047)):
        labels = frozenset({"trigger": "schedule", "phase": phase}.items())
        expected[("ebbtide_cycle_duration_seconds_count", labels)] = 1
        expected[("ebbtide_cycle_duration_seconds_sum", labels)] = pytest.approx(seconds)
        for le in bounds:
            if le == "+Inf" or seconds <= float(le):
                expected[("ebbtide_cycle_duration_seconds_bucket", labels | {("le", le)})] = 1
    assert grew == expected


def test_a_configured_address_another_process_serves_is_a_warning_and_a_given_one_an_error(
    events: None, data_dir: Path, ebb, spark_connect_server: str
) -> None:
    """``[engine] metrics`` is read by every process of the data directory: a console
    opened beside ``ebb engine`` (or a second engine) failed to start on the port the
    first one serves, with the same figures. ``--metrics`` asks for that address."""
    from engine.errors import AddressInUse

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "127.0.0.1:{port}"\n')
        warned: list[str] = []
        with Broker(data_dir) as broker:
            assert serve_metrics(broker, None, lambda: "off", warned.append) is None
            with pytest.raises(AddressInUse, match=f"127.0.0.1:{port}: cannot listen"):
                serve_metrics(broker, f"127.0.0.1:{port}", lambda: "off", pytest.fail)
        assert warned == [
            f"metrics address 127.0.0.1:{port}: cannot listen (Address already in use): another process serves it "
            "(ebb engine or a console of this data directory?); not served here"
        ]
        engine = ebb("engine", "--cycles", "1", "--spark-remote", spark_connect_server)
        assert engine.code == 0, engine.err
        assert engine.err == f"ebb: warning: {warned[0]}\n"
        assert "metrics on" not in engine.out
        given = ebb("engine", "--cycles", "1", "--metrics", f"127.0.0.1:{port}", "--spark-remote", spark_connect_server)
        assert (given.code, given.err) == (
            2,
            f"ebb: error: metrics address 127.0.0.1:{port}: cannot listen (Address already in use)\n",
        )


def test_a_config_error_and_an_invalid_policy_are_said_by_their_own_gauges(ebb, data_dir: Path) -> None:
    """A typo in ``ebb.toml`` left only ``ebbtide_catalog_readable 0``, blaming a sound
    catalog and dropping the Spark state; a topic whose policy a config default made
    invalid (it is no longer planned) only lost its hold series."""
    from engine.metrics.collector import EbbCollector

    assert ebb("topic", "create", "badpol", "--retention-size", "3GiB", "--hold").code == 0
    assert ebb("topic", "create", "fine").code == 0

    def scrape() -> dict[tuple[str, frozenset], float]:
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in EbbCollector(data_dir, None, lambda: "ready").collect()
            for sample in family.samples
        }

    ready = ("ebbtide_spark_session_state", frozenset({"state": "ready"}.items()))
    before = scrape()
    assert before[("ebbtide_config_valid", frozenset())] == 1
    assert before[("ebbtide_topic_policy_valid", frozenset({"topic": "badpol"}.items()))] == 1
    assert before[("ebbtide_topic_hold", frozenset({"topic": "badpol"}.items()))] == 1

    (data_dir / "ebb.toml").write_text('[policy]\nmax_partition_size = "2GiB"\n')
    invalid = scrape()
    assert "policy_error" in json.loads(ebb("topic", "list", "--json").out)[0]
    assert invalid[("ebbtide_topic_policy_valid", frozenset({"topic": "badpol"}.items()))] == 0
    assert invalid[("ebbtide_topic_policy_valid", frozenset({"topic": "fine"}.items()))] == 1
    assert ("ebbtide_topic_hold", frozenset({"topic": "badpol"}.items())) not in invalid
    assert invalid[("ebbtide_catalog_readable", frozenset())] == 1

    (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "7 parsecs"\n')
    broken = scrape()
    assert broken == {("ebbtide_config_valid", frozenset()): 0, ready: 1} | {
        ("ebbtide_spark_session_state", frozenset({"state": s}.items())): 0
        for s in ("off", "stopped", "starting", "not_answering", "failed")
    }


def test_a_config_edited_during_a_scrape_is_not_read_as_an_unreadable_catalog(
    ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scrape read ``ebb.toml`` to check it, then its broker read it again: a file
    broken by an edit in between made the scrape say the catalog was unreadable. The
    scrape reads the file once, and its figures follow that reading."""
    import engine.metrics.collector as collector

    assert ebb("topic", "create", "kept", "--hold").code == 0
    checked = collector.load_config

    def read_then_edited(path: Path) -> Config:
        config = checked(path)
        (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "7 parsecs"\n')
        return config

    monkeypatch.setattr(collector, "load_config", read_then_edited)
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in collector.EbbCollector(data_dir, None).collect()
        for sample in family.samples
    }
    assert samples[("ebbtide_config_valid", frozenset())] == 1
    assert samples[("ebbtide_catalog_readable", frozenset())] == 1
    assert samples[("ebbtide_topic_hold", frozenset({"topic": "kept"}.items()))] == 1
