"""The demo of ``ebb console --demo`` (engine/demo.py): seeding shows every policy and
is idempotent, the traffic produces and consumes with lagging groups, respects backlog
quotas, keeps going (silently) through errors, and stops promptly."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.config import load_config
from engine.demo import BACKFILL_MS, DEMO_PRUNE_INTERVAL, TOPICS, DemoTraffic
from engine.errors import StoreError
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.policy.units import parse_duration

NOW = 1_795_262_400_000  # a fixed clock: 2026-11-21T12:00:00Z
SECOND = 1000


def fast_demo(root: Path, config_path: Path | None = None) -> DemoTraffic:
    """The demo at a fixed clock, ticking and retrying quickly."""
    return DemoTraffic(root, config_path, clock=lambda: NOW, tick_seconds=0.05, retry_seconds=0.1)


def wait_until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def demo_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("ebb-demo-")]


@pytest.fixture
def running():
    """Demos started by a test, stopped however the test ends."""
    demos: list[DemoTraffic] = []
    yield demos.append
    for demo in demos:
        demo.stop()


def records(broker: Broker, topic: str) -> int:
    return sum(p.next_offset - p.log_start_offset for p in broker.catalog.partitions(topic))


def positions(broker: Broker, topic: str, group: str) -> dict[int, int]:
    return {p: pos for p, (pos, _at) in broker.catalog.group(topic, group).positions.items()}


def test_seed_creates_a_topic_per_policy(data_dir: Path) -> None:
    fast_demo(data_dir).seed()
    with Broker(data_dir) as broker:
        assert {t.name for t in broker.catalog.topics()} == {t.name for t in TOPICS}
        policy = {t.name: broker.policy(t.name) for t in TOPICS}
        groups = {t.name: {g.name: g.kind for g in broker.catalog.groups(t.name)} for t in TOPICS}

    def topics_where(test: Callable[[str], bool]) -> list[str]:
        return [name for name in policy if test(name)]

    minute = parse_duration("1m")
    # short time retention, with segments of a few KiB so that they roll and go
    assert topics_where(lambda t: (policy[t]["retention_time"] or 1 << 62) <= minute and not policy[t]["hold"])
    assert all(policy[t]["segment_size"] <= 8 * 1024 for t in policy)
    # a size cap
    assert topics_where(lambda t: (policy[t]["max_partition_size"] or 1 << 62) <= 64 * 1024)
    # protected consumption, with more than one subscriber (one of them lags)
    assert topics_where(
        lambda t: policy[t]["consumption"] == "protect" and list(groups[t].values()).count("subscriber") >= 2
    )
    # a backlog quota with eviction, and one that holds producers
    for backlog_policy in ("consumer_backlog_eviction", "producer_request_hold"):
        assert topics_where(
            lambda t, backlog_policy=backlog_policy: (
                policy[t]["backlog_policy"] == backlog_policy
                and policy[t]["backlog_size"] is not None
                and "subscriber" in groups[t].values()
            )
        ), backlog_policy
    # a TTL on a protected topic with a subscriber
    assert topics_where(lambda t: policy[t]["message_ttl"] is not None and "subscriber" in groups[t].values())
    # a hold
    assert topics_where(lambda t: policy[t]["hold"])


def test_seed_twice_reuses_the_topics(data_dir: Path) -> None:
    fast_demo(data_dir).seed()
    with Broker(data_dir) as broker:
        # The operator edits a demo topic and deletes a demo group between two runs.
        broker.alter_topic("demo-clickstream", {"retention_time": "5m"}, actor="operator")
        broker.delete_group("demo-orders", "audit")
        changes = len(Journal(broker.catalog).policy_changes(limit=None))
        created = {t.name: t.created_at for t in broker.catalog.topics()}

    fast_demo(data_dir).seed()
    with Broker(data_dir) as broker:
        assert len(Journal(broker.catalog).policy_changes(limit=None)) == changes  # no policy rewritten
        assert {t.name: t.created_at for t in broker.catalog.topics()} == created
        assert broker.policy("demo-clickstream")["retention_time"] == parse_duration("5m")
        # what is missing is created again, from the earliest offset
        assert positions(broker, "demo-orders", "audit") == {0: 0, 1: 0}


def test_seed_writes_a_prune_interval_only_where_there_is_no_config(data_dir: Path, tmp_path: Path) -> None:
    demo = fast_demo(data_dir)
    demo.seed()
    assert demo.wrote_config == data_dir / "ebb.toml"
    assert load_config(data_dir / "ebb.toml").prune_interval_ms == parse_duration(DEMO_PRUNE_INTERVAL)

    # An existing config (here the demo's own, edited by the operator) is left alone.
    (data_dir / "ebb.toml").write_text('[engine]\nprune_interval = "2m"\n')
    again = fast_demo(data_dir)
    again.seed()
    assert again.wrote_config is None
    assert (data_dir / "ebb.toml").read_text() == '[engine]\nprune_interval = "2m"\n'

    # A config named with --config is the operator's: nothing is written anywhere.
    other = tmp_path / "other-data"
    named = tmp_path / "operator.toml"
    named.write_text("")
    elsewhere = fast_demo(other, named)
    elsewhere.seed()
    assert elsewhere.wrote_config is None
    assert not (other / "ebb.toml").exists()
    assert named.read_text() == ""


def test_traffic_seeds_produces_and_consumes_with_lagging_groups(data_dir: Path, running) -> None:
    demo = fast_demo(data_dir)
    demo.start()  # alone, as the console does: the threads seed
    running(demo)
    assert len(demo_threads()) == len(TOPICS) + 1
    assert demo.wrote_config == data_dir / "ebb.toml"

    with Broker(data_dir) as broker:

        def busy() -> bool:
            # records() is 0 for a topic not created yet, so the groups exist after it.
            # Both groups must have read every partition: a step reads billing's
            # partitions before audit's, so a backfill that lands in between is read
            # by audit first, and billing reads it one step later.
            return all(records(broker, t.name) > 0 for t in TOPICS) and all(
                pos > 0 for group in ("billing", "audit") for pos in positions(broker, "demo-orders", group).values()
            )

        wait_until(busy)
        wait_until(lambda: demo.counters["ebb-demo-consume"].commits > 10)
        # busy() may see billing half-way through a backfill (appended a segment at a
        # time): on a slow machine the next reading step can come seconds later.
        backfilled = int(BACKFILL_MS / 1000 * next(t.rate for t in TOPICS if t.name == "demo-orders"))
        wait_until(lambda: min(positions(broker, "demo-orders", "billing").values()) >= backfilled)
        begun = time.monotonic()
        assert demo.stop()
        stopped_in = time.monotonic() - begun

        # Empty topics were backfilled with history up to the clock, so that
        # retention has something to act on from the first cycle.
        oldest = broker.catalog.db.execute("SELECT MIN(first_timestamp) FROM segments").fetchone()[0]
        assert oldest == NOW - BACKFILL_MS
        # Segments of a few KiB rolled.
        assert len(broker.catalog.segments("demo-metrics", 0)) > 3
        # A group that keeps up read the backfill; the lagging one is behind it; a
        # stalled one never moved; none of them is past the log end.
        ends = {p.partition: p.next_offset for p in broker.catalog.partitions("demo-orders")}
        billing, audit = positions(broker, "demo-orders", "billing"), positions(broker, "demo-orders", "audit")
        for p, end in ends.items():
            assert backfilled <= billing[p] <= end
            assert 0 < audit[p] < billing[p]
        assert positions(broker, "demo-sessions", "tracker") == {0: 0}

    assert stopped_in < 3  # threads wait on the stop event, never on a long sleep
    assert demo_threads() == []
    troubles = {name: (list(c.errors), c.refused) for name, c in demo.counters.items() if c.errors or c.refused}
    assert troubles == {}
    assert sum(c.produced for c in demo.counters.values()) > 0


def test_a_send_refused_by_a_quota_is_retried_later(data_dir: Path, running) -> None:
    demo = fast_demo(data_dir)
    demo.seed()
    with Broker(data_dir) as broker:
        # What a prune cycle records when a subscriber of demo-alerts is over quota.
        EngineState(broker.catalog).set_quota_state("demo-alerts", True, NOW)
        demo.start()
        running(demo)
        producer = demo.counters["ebb-demo-produce-demo-alerts"]
        wait_until(lambda: producer.refused >= 2)  # held, failed, and tried again
        assert records(broker, "demo-alerts") == 0
        assert records(broker, "demo-legal") > 0  # other producers are not held
        assert "ebb-demo-produce-demo-alerts" in demo_threads()

        EngineState(broker.catalog).set_quota_state("demo-alerts", False, NOW)
        wait_until(lambda: records(broker, "demo-alerts") > 0)
    assert demo.stop()
    assert not producer.errors


def test_errors_are_counted_not_printed_and_traffic_goes_on(
    data_dir: Path, running, capfd: pytest.CaptureFixture[str]
) -> None:
    demo = fast_demo(data_dir)
    demo.start()
    running(demo)
    producer = demo.counters["ebb-demo-produce-demo-legal"]
    with Broker(data_dir) as broker:
        wait_until(lambda: records(broker, "demo-legal") > 0)
        # an operator deletes a demo topic under the demo (held: released first)
        broker.alter_topic("demo-legal", {"hold": None}, actor="operator")
        broker.delete_topic("demo-legal")
        wait_until(lambda: len(producer.errors) >= 2)
        before = records(broker, "demo-metrics")
        wait_until(lambda: records(broker, "demo-metrics") > before)
    assert "ebb-demo-produce-demo-legal" in demo_threads()
    assert "demo-legal" in producer.errors[-1]
    assert demo.stop()
    assert capfd.readouterr() == ("", "")
    # what the console shows: each failure once, named by its thread
    failures = demo.new_failures()
    assert failures[-1] == f"ebb-demo-produce-demo-legal: {producer.errors[-1]}"
    assert len(failures) >= 2
    assert demo.new_failures() == []


def test_a_thread_whose_catalog_is_locked_at_start_tries_again(
    data_dir: Path, running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's threads open the new catalog together: one may find it locked by
    another. It used to give up, and its topic had no traffic for the whole demo."""
    opened = DemoTraffic._open
    refused: list[str] = []

    def locked_once(traffic: DemoTraffic) -> Broker:
        name = threading.current_thread().name
        if name == "ebb-demo-produce-demo-metrics" and not refused:
            refused.append(name)
            raise StoreError(f"cannot open the catalog {data_dir / 'catalog.db'}: database is locked")
        return opened(traffic)

    monkeypatch.setattr(DemoTraffic, "_open", locked_once)
    demo = fast_demo(data_dir)
    demo.start()
    running(demo)
    with Broker(data_dir) as broker:
        wait_until(lambda: "demo-metrics" in {t.name for t in broker.catalog.topics()})
        wait_until(lambda: records(broker, "demo-metrics") > 0)
    assert refused and "database is locked" in demo.counters["ebb-demo-produce-demo-metrics"].errors[0]
