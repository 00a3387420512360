"""The seeds' own worked examples (shared/seeds/), as prune cycles on Spark.

Each test builds the seed's situation in a fresh data directory with explicit record
timestamps, plans or runs cycles at simulated times, and checks, against expectations
written out by hand from docs/RETENTION.md, which segments go and stay, their reason
codes, the log starts, the group positions and the journal.

Byte sizes are scaled down, shapes kept (tests/support/seed_scenarios.py): "1 GB" is 1000
bytes, one record is exactly 100 bytes ("0.1 GB"), a segment of 1000 bytes holds ten
records, so segment k of a partition is offsets [10k, 10k+10).

Where a seed and our semantics differ, the test follows RETENTION.md and says so:
time rules are strict (``max_ts < now - retention_time``), and a retention time of 0
means zero (Iggy's "0 = never" is spelled infinite / none / -1 here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.broker import Broker
from engine.errors import InvalidPolicy, NotFound
from engine.journal.journal import Journal
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from tests.support.seed_scenarios import (
    DAY,
    HOUR,
    MIN,
    SEC,
    T0,
    action_summary,
    actions,
    decisions,
    group_rows,
    layout,
    log_start,
    partition_row,
    positions,
    quota_exceeded,
    segment_rows,
    write,
)

KEEP, DELETE = "keep", "delete"


@pytest.fixture
def pruner(broker: Broker, spark_engine: SparkEngine) -> Pruner:
    pruner = Pruner(broker, spark_engine)
    # The examples read every segment's decision from the cycle's plan, as the
    # console's Topic view does; an engine's cycle keeps only the deletions.
    pruner.cycle_plans_every_segment = True
    return pruner


def _topic(broker: Broker, name: str, **policy: str) -> None:
    broker.create_topic(name, 1, {"segment_size": "1000", **policy})


# -- Fluvio (001) -------------------------------------------------------------------------


def test_fluvio_seven_day_lifecycle(broker: Broker, pruner: Pruner) -> None:
    """Fluvio's "Example data lifecycle": retention 7 days, "1 GB" segments.

    The seed's table counts days since the last write; our rule is the strict
    ``max_ts < now - retention_time``, shown at the exact 7-day instant too."""
    _topic(broker, "fluvio", retention_time="7 days")

    # Day 0: 2.5 GB written -> segments 0, 1 (1 GB) and 2 (0.5 GB, active).
    write(broker, "fluvio", [T0 + i * SEC for i in range(25)])
    assert layout(broker, "fluvio") == [(0, 10, 1000, True), (10, 20, 1000, True), (20, 25, 500, False)]
    day0 = pruner.cycle(now=T0 + HOUR, topics=["fluvio"])
    assert decisions(day0.plan, "fluvio") == [
        (0, KEEP, "KEEP_WITHIN_TIME"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    rows = segment_rows(day0.plan, "fluvio")
    # segment 0's last record is at T0+9s, segment 1's at T0+19s
    assert rows[0]["eligible_at"] == T0 + 9 * SEC + 7 * DAY + 1
    assert rows[10]["eligible_at"] == T0 + 19 * SEC + 7 * DAY + 1
    assert rows[20]["eligible_at"] is None  # the active segment does not age
    assert (day0.planned, day0.applied) == (0, 0)
    assert action_summary(broker, day0.cycle_id, "fluvio") == []
    assert layout(broker, "fluvio") == [(0, 10, 1000, True), (10, 20, 1000, True), (20, 25, 500, False)]

    # Day 6: another 2 GB -> segment 2 fills up, 3 is full, 4 is 0.5 GB and active.
    write(broker, "fluvio", [T0 + 6 * DAY + i * SEC for i in range(20)])
    assert layout(broker, "fluvio") == [
        (0, 10, 1000, True),
        (10, 20, 1000, True),
        (20, 30, 1000, True),
        (30, 40, 1000, True),
        (40, 45, 500, False),
    ]
    day6 = pruner.cycle(now=T0 + 6 * DAY + HOUR, topics=["fluvio"])
    assert decisions(day6.plan, "fluvio") == [
        (0, KEEP, "KEEP_WITHIN_TIME"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_WITHIN_TIME"),
        (30, KEEP, "KEEP_WITHIN_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert day6.applied == 0
    assert log_start(broker, "fluvio") == 0

    # Exactly 7 days after segment 1's last write: segment 0 is 10 s older than that
    # and goes, segment 1 is not *strictly* older than 7 days and stays.
    boundary = pruner.plan(now=T0 + 19 * SEC + 7 * DAY, topics=["fluvio"])
    assert decisions(boundary, "fluvio") == [
        (0, DELETE, "DELETE_TIME"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_WITHIN_TIME"),
        (30, KEEP, "KEEP_WITHIN_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert partition_row(boundary, "fluvio")["new_log_start_offset"] == 10

    # Day 7: the two segments of day 0 are older than 7 days and are pruned (2.5 GB left).
    day7 = pruner.cycle(now=T0 + 7 * DAY + HOUR, topics=["fluvio"])
    assert decisions(day7.plan, "fluvio") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_WITHIN_TIME"),
        (30, KEEP, "KEEP_WITHIN_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    rows = segment_rows(day7.plan, "fluvio")
    assert rows[20]["eligible_at"] == T0 + 6 * DAY + 4 * SEC + 7 * DAY + 1
    assert rows[30]["eligible_at"] == T0 + 6 * DAY + 14 * SEC + 7 * DAY + 1
    assert (day7.status, day7.planned, day7.applied, day7.bytes_freed) == (
        "done",
        2,
        2,
        2000,
    )
    assert layout(broker, "fluvio") == [(20, 30, 1000, True), (30, 40, 1000, True), (40, 45, 500, False)]
    assert broker.describe("fluvio").to_json()["partitions"][0]["size_bytes"] == 2500
    assert log_start(broker, "fluvio") == 20
    assert [r.offset for r in broker.read("fluvio", 0, 0, 100)] == list(range(20, 45))
    assert action_summary(broker, day7.cycle_id, "fluvio") == [
        ("move_log_start", 0, 0, 20, 20, None, None, "applied"),
        ("delete_segment", 0, 0, 10, 10, 1000, "DELETE_TIME", "applied"),
        ("delete_segment", 0, 10, 20, 10, 1000, "DELETE_TIME", "applied"),
    ]

    # Day 14: the two segments written on day 6 are now 8 days old and go; the newest
    # segment, although its records are as old, is the active one and stays (0.5 GB).
    day14 = pruner.cycle(now=T0 + 14 * DAY + HOUR, topics=["fluvio"])
    assert decisions(day14.plan, "fluvio") == [
        (20, DELETE, "DELETE_TIME"),
        (30, DELETE, "DELETE_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert layout(broker, "fluvio") == [(40, 45, 500, False)]
    assert log_start(broker, "fluvio") == 40
    assert action_summary(broker, day14.cycle_id, "fluvio") == [
        ("move_log_start", 0, 20, 40, 20, None, None, "applied"),
        ("delete_segment", 0, 20, 30, 10, 1000, "DELETE_TIME", "applied"),
        ("delete_segment", 0, 30, 40, 10, 1000, "DELETE_TIME", "applied"),
    ]


def test_fluvio_max_partition_size(broker: Broker, pruner: Pruner) -> None:
    """Fluvio: max partition size "3 GB" with "1 GB" segments; 2.5 GB, then +0.6 GB:
    the total becomes 3.1 GB and the first segment is pruned."""
    _topic(broker, "capped", max_partition_size="3000")
    write(broker, "capped", [T0 + i * SEC for i in range(25)])
    first = pruner.cycle(now=T0 + HOUR, topics=["capped"])
    assert decisions(first.plan, "capped") == [
        (0, KEEP, "KEEP_WITHIN_TIME"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    assert layout(broker, "capped") == [(0, 10, 1000, True), (10, 20, 1000, True), (20, 25, 500, False)]

    write(broker, "capped", [T0 + HOUR + i * SEC for i in range(6)])  # 600 MB
    assert layout(broker, "capped") == [
        (0, 10, 1000, True),
        (10, 20, 1000, True),
        (20, 30, 1000, True),
        (30, 31, 100, False),
    ]
    second = pruner.cycle(now=T0 + 2 * HOUR, topics=["capped"])
    assert decisions(second.plan, "capped") == [
        (0, DELETE, "DELETE_MAX_SIZE"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_WITHIN_TIME"),
        (30, KEEP, "KEEP_ACTIVE"),
    ]
    assert layout(broker, "capped") == [(10, 20, 1000, True), (20, 30, 1000, True), (30, 31, 100, False)]
    size = broker.describe("capped").to_json()["partitions"][0]["size_bytes"]
    assert size == 2100 and size <= 3000
    assert log_start(broker, "capped") == 10
    assert action_summary(broker, second.cycle_id, "capped") == [
        ("move_log_start", 0, 0, 10, 10, None, None, "applied"),
        ("delete_segment", 0, 0, 10, 10, 1000, "DELETE_MAX_SIZE", "applied"),
    ]


# -- Pulsar (003) -------------------------------------------------------------------------

# Pulsar's table of (time limit, size limit), with its own example values
# (3 hours, 10G, 1T); max_partition_size is infinite so that 1T is allowed.
PULSAR_VALID = [
    ("-1", "-1", None, None),  # infinite retention
    ("-1", "1T", None, 1 << 40),  # based on the size limit
    ("3h", "-1", 3 * HOUR, None),  # based on the time limit
    ("0", "0", 0, 0),  # retention disabled
    ("3h", "10G", 3 * HOUR, 10 << 30),  # either limit
]
PULSAR_INVALID = [("0", "10G"), ("3h", "0")]


@pytest.mark.parametrize(("time", "size", "time_ms", "size_bytes"), PULSAR_VALID)
def test_pulsar_retention_table_valid_rows(broker: Broker, time: str, size: str, time_ms, size_bytes) -> None:
    policy = broker.create_topic(
        "pulsar", 1, {"retention_time": time, "retention_size": size, "max_partition_size": "-1"}
    )
    assert (policy["retention_time"], policy["retention_size"]) == (time_ms, size_bytes)
    saved = broker.describe("pulsar").policy
    assert (saved["retention_time"], saved["retention_size"]) == (time_ms, size_bytes)


@pytest.mark.parametrize(("time", "size"), PULSAR_INVALID)
def test_pulsar_retention_table_invalid_rows(broker: Broker, time: str, size: str) -> None:
    with pytest.raises(InvalidPolicy) as refused:
        broker.create_topic("pulsar", 1, {"retention_time": time, "retention_size": size, "max_partition_size": "-1"})
    message = str(refused.value)
    assert "retention_time" in message and "retention_size" in message and "lone 0" in message
    with pytest.raises(NotFound):
        broker.describe("pulsar")


def test_pulsar_retention_behaviour(broker: Broker, pruner: Pruner) -> None:
    """The table's rows in action. Every topic holds records at one a minute, T0 to
    T0+44m: sealed segments 0, 10, 20, 30 (last records at 9, 19, 29, 39 min) and an
    active segment [40, 45); the cycle runs at T0+80m."""
    topics = {
        "p-zero": {"retention_time": "0", "retention_size": "0"},
        "p-infinite": {"retention_time": "-1", "retention_size": "-1", "max_partition_size": "-1"},
        "p-size": {"retention_time": "-1", "retention_size": "2000"},
        "p-time": {"retention_time": "1h", "retention_size": "-1"},
        "p-both": {"retention_time": "1h", "retention_size": "1500"},
        # Pulsar's default: no retention, messages kept only while in a backlog.
        "p-zero-sub": {"retention_time": "0", "retention_size": "0", "consumption": "protect"},
    }
    for name, policy in topics.items():
        _topic(broker, name, **policy)
        write(broker, name, [T0 + i * MIN for i in range(45)])
    broker.create_group("p-zero-sub", "sub", "subscriber", "earliest")
    broker.commit("p-zero-sub", "sub", 0, 25, at_ms=T0 + 70 * MIN)

    out = pruner.cycle(now=T0 + 80 * MIN)
    plan = out.plan
    # 0/0, no subscribers: every sealed segment goes
    assert decisions(plan, "p-zero") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, DELETE, "DELETE_TIME"),
        (30, DELETE, "DELETE_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert layout(broker, "p-zero") == [(40, 45, 500, False)]
    assert log_start(broker, "p-zero") == 40
    # -1/-1: infinite retention
    assert decisions(plan, "p-infinite") == [
        (0, KEEP, "KEEP_NO_LIMIT"),
        (10, KEEP, "KEEP_NO_LIMIT"),
        (20, KEEP, "KEEP_NO_LIMIT"),
        (30, KEEP, "KEEP_NO_LIMIT"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert all(r["eligible_at"] is None for r in segment_rows(plan, "p-infinite").values())
    assert log_start(broker, "p-infinite") == 0
    assert len(layout(broker, "p-infinite")) == 5
    # -1/size: newer segments hold >= 2000 bytes behind 0 (3500) and 10 (2500), not 20 (1500)
    assert decisions(plan, "p-size") == [
        (0, DELETE, "DELETE_SIZE"),
        (10, DELETE, "DELETE_SIZE"),
        (20, KEEP, "KEEP_SIZE_TARGET"),
        (30, KEEP, "KEEP_SIZE_TARGET"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert broker.describe("p-size").to_json()["partitions"][0]["size_bytes"] == 2500
    # time/-1: older than 1 h at T0+80m means a last record before T0+20m
    assert decisions(plan, "p-time") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_WITHIN_TIME"),
        (30, KEEP, "KEEP_WITHIN_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    rows = segment_rows(plan, "p-time")
    assert rows[20]["eligible_at"] == T0 + 29 * MIN + HOUR + 1
    assert rows[30]["eligible_at"] == T0 + 39 * MIN + HOUR + 1
    # time/size: either limit suffices; segment 20 goes by size alone (1500 behind it)
    assert decisions(plan, "p-both") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, DELETE, "DELETE_SIZE"),
        (30, KEEP, "KEEP_WITHIN_TIME"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "p-both") == 30
    # 0/0 with a subscriber at 25: only what it acknowledged goes
    assert decisions(plan, "p-zero-sub") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_BARRIER"),
        (30, KEEP, "KEEP_BARRIER"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    rows = segment_rows(plan, "p-zero-sub")
    assert rows[20]["detail"] == "group sub at 25" and rows[30]["detail"] == "group sub at 25"
    assert partition_row(plan, "p-zero-sub")["barrier"] == 25
    assert log_start(broker, "p-zero-sub") == 20
    assert positions(broker, "p-zero-sub") == {"sub": 25}
    assert out.applied == 4 + 2 + 2 + 3 + 2


def test_pulsar_backlog_quota_producer_policies(broker: Broker, pruner: Pruner) -> None:
    """producer_request_hold (size quota) and producer_exception (age quota): the topic
    enters the quota-exceeded state, positions do not move, and it leaves the state
    once the subscriber catches up. Records at one a minute from T0, offsets 0..44:
    segments 0..30 sealed, [40, 45) active (500 B)."""
    _topic(broker, "q-hold", backlog_size="1500", backlog_policy="producer_request_hold")
    _topic(broker, "q-exception", backlog_age="30m", backlog_policy="producer_exception")
    for name in ("q-hold", "q-exception"):
        write(broker, name, [T0 + i * MIN for i in range(45)])
        broker.create_group(name, "sub", "subscriber", "earliest")
    # a reader never counts against the quota
    broker.create_group("q-hold", "reader", "reader", "earliest")

    # At T0+60m: q-hold's subscriber at 0 has 4500 B unconsumed (> 1500: fitting means
    # starting at 30 or later); q-exception's oldest unconsumed record (T0) is older
    # than 30 min (the first record not older is offset 30).
    first = pruner.cycle(now=T0 + 60 * MIN)
    assert quota_exceeded(first.plan, "q-hold") is True
    assert quota_exceeded(first.plan, "q-exception") is True
    for name in ("q-hold", "q-exception"):
        sub = group_rows(first.plan, name)["sub"]
        assert (sub["over_quota"], sub["position"], sub["new_position"], sub["evicted_skipped"]) == (True, 0, 0, 0)
        assert [d for d in decisions(first.plan, name) if d[1] == DELETE] == []
    assert group_rows(first.plan, "q-hold")["reader"]["over_quota"] is False
    assert action_summary(broker, first.cycle_id, "q-hold") == [
        ("quota_exceeded", None, None, None, None, None, None, "applied")
    ]
    assert action_summary(broker, first.cycle_id, "q-exception") == [
        ("quota_exceeded", None, None, None, None, None, None, "applied")
    ]
    assert positions(broker, "q-hold") == {"sub": 0, "reader": 0}
    assert positions(broker, "q-exception") == {"sub": 0}

    # The subscribers catch up: q-hold's to 30 (backlog 1500 B, exactly the quota),
    # q-exception's to 35 (at T0+61m the first record not older than 30 min is 31).
    broker.commit("q-hold", "sub", 0, 30, at_ms=T0 + 60 * MIN)
    broker.commit("q-exception", "sub", 0, 35, at_ms=T0 + 60 * MIN)
    second = pruner.cycle(now=T0 + 61 * MIN)
    assert quota_exceeded(second.plan, "q-hold") is False
    assert quota_exceeded(second.plan, "q-exception") is False
    assert group_rows(second.plan, "q-hold")["sub"]["over_quota"] is False
    assert group_rows(second.plan, "q-exception")["sub"]["over_quota"] is False
    assert action_summary(broker, second.cycle_id, "q-hold") == [
        ("quota_cleared", None, None, None, None, None, None, "applied")
    ]
    assert action_summary(broker, second.cycle_id, "q-exception") == [
        ("quota_cleared", None, None, None, None, None, None, "applied")
    ]


def test_pulsar_consumer_backlog_eviction(broker: Broker, pruner: Pruner) -> None:
    """consumer_backlog_eviction moves a lagging subscriber until it fits its quota
    (size and age variants); the topic never enters the quota-exceeded state. Records
    at one a minute from T0, offsets 0..44; the cycle runs at T0+60m."""
    # size: 1500 B fit from offset 30 on (segment 30 + the active one)
    _topic(
        broker,
        "e-size",
        backlog_size="1500",
        backlog_policy="consumer_backlog_eviction",
        consumption="protect",
        retention_time="10m",
    )
    # age: at T0+60m the first record not older than 30 min is offset 30
    _topic(broker, "e-age", backlog_age="30m", backlog_policy="consumer_backlog_eviction")
    for name in ("e-size", "e-age"):
        write(broker, name, [T0 + i * MIN for i in range(45)])
        broker.create_group(name, "sub", "subscriber", "earliest")
    broker.commit("e-size", "sub", 0, 5, at_ms=T0 + 50 * MIN)

    out = pruner.cycle(now=T0 + 60 * MIN)
    plan = out.plan
    assert quota_exceeded(plan, "e-size") is False and quota_exceeded(plan, "e-age") is False
    size_sub = group_rows(plan, "e-size")["sub"]
    assert (size_sub["over_quota"], size_sub["position"], size_sub["new_position"], size_sub["evicted_skipped"]) == (
        True,
        5,
        30,
        25,
    )
    age_sub = group_rows(plan, "e-age")["sub"]
    assert (age_sub["over_quota"], age_sub["position"], age_sub["new_position"], age_sub["evicted_skipped"]) == (
        True,
        0,
        30,
        30,
    )
    # With consumption=protect, the evicted subscriber no longer holds back what it
    # skipped: every sealed segment is older than 10 min, the barrier is now 30.
    assert decisions(plan, "e-size") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, DELETE, "DELETE_TIME"),
        (30, KEEP, "KEEP_BARRIER"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(plan, "e-size")[30]["detail"] == "group sub at 30"
    assert positions(broker, "e-size") == {"sub": 30}
    assert positions(broker, "e-age") == {"sub": 30}
    assert log_start(broker, "e-size") == 30
    assert log_start(broker, "e-age") == 0
    evictions = actions(broker, out.cycle_id, action="backlog_eviction")
    assert sorted(
        (a.topic, a.partition, a.start_offset, a.end_offset, a.messages, a.details, a.status) for a in evictions
    ) == [
        ("e-age", 0, 0, 30, 30, {"group": "sub", "kind": "subscriber"}, "applied"),
        ("e-size", 0, 5, 30, 25, {"group": "sub", "kind": "subscriber"}, "applied"),
    ]
    assert actions(broker, out.cycle_id, action="quota_exceeded") == []


def test_pulsar_message_ttl(broker: Broker, pruner: Pruner) -> None:
    """TTL auto-acknowledges: the subscriber's position skips messages older than
    message_ttl, which lets consumption=protect data go. The same topic without TTL
    keeps everything behind the subscriber. Records at one a minute from T0, offsets
    0..44; the cycle runs at T0+60m; retention 10 min makes every sealed segment
    eligible by time."""
    _topic(broker, "ttl", consumption="protect", retention_time="10m", message_ttl="45m")
    _topic(broker, "no-ttl", consumption="protect", retention_time="10m")
    for name in ("ttl", "no-ttl"):
        write(broker, name, [T0 + i * MIN for i in range(45)])
        broker.create_group(name, "sub", "subscriber", "earliest")

    out = pruner.cycle(now=T0 + 60 * MIN)
    plan = out.plan
    # older than 45 min at T0+60m: records before T0+15m, offsets 0..14
    sub = group_rows(plan, "ttl")["sub"]
    assert (sub["position"], sub["new_position"], sub["ttl_skipped"]) == (0, 15, 15)
    assert decisions(plan, "ttl") == [
        (0, DELETE, "DELETE_TIME"),
        (10, KEEP, "KEEP_BARRIER"),
        (20, KEEP, "KEEP_BARRIER"),
        (30, KEEP, "KEEP_BARRIER"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(plan, "ttl")[10]["detail"] == "group sub at 15"
    assert positions(broker, "ttl") == {"sub": 15}
    assert log_start(broker, "ttl") == 10
    assert action_summary(broker, out.cycle_id, "ttl") == [
        ("ttl_advance", 0, 0, 15, 15, None, None, "applied"),
        ("move_log_start", 0, 0, 10, 10, None, None, "applied"),
        ("delete_segment", 0, 0, 10, 10, 1000, "DELETE_TIME", "applied"),
    ]
    assert actions(broker, out.cycle_id, action="ttl_advance")[0].details == {
        "group": "sub",
        "kind": "subscriber",
    }

    assert decisions(plan, "no-ttl") == [
        (0, KEEP, "KEEP_BARRIER"),
        (10, KEEP, "KEEP_BARRIER"),
        (20, KEEP, "KEEP_BARRIER"),
        (30, KEEP, "KEEP_BARRIER"),
        (40, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(plan, "no-ttl")[0]["detail"] == "group sub at 0"
    assert positions(broker, "no-ttl") == {"sub": 0}
    assert action_summary(broker, out.cycle_id, "no-ttl") == []


# -- Pravega (004) ------------------------------------------------------------------------


def test_pravega_consumption_based_retention_cases(broker: Broker, pruner: Pruner) -> None:
    """Pravega's cases i to v with consumption=protect, a min limit (retention_size)
    and a max limit (max_partition_size), a time variant, and the fallback without
    subscribers.

    Every topic holds 85 records at one a minute from T0: sealed segments 0..70 of
    1000 B and an active [80, 85) of 500 B, 8500 B in all. With min 2000 B, segments
    0..50 may go (6..: fewer than 2000 B behind them), so the target is 60; with max
    6000 B, segments 0..20 must go (from 30 on the partition is 5500 B), so the hard
    cut is 30. The cycle runs at T0+100m."""
    size_limits = {
        "consumption": "protect",
        "retention_time": "-1",
        "retention_size": "2000",
        "max_partition_size": "6000",
    }
    topics = {
        "pv-i": size_limits,  # SLB 45: within limits
        "pv-ii": size_limits,  # SLB 75: truncating there leaves less than the min
        "pv-iii": size_limits,  # SLB 5: truncating there leaves more than the max
        # min limit 2200 B falls inside segment 60 (2500 B from it on), as does SLB 65
        "pv-iv": {**size_limits, "retention_size": "2200"},
        "pv-v": size_limits,  # max limit falls inside segment 20, as does SLB 25
        # time limits: keep at least 30 min, at most 60 min; SLB 5
        "pv-time": {"consumption": "protect", "retention_time": "30m", "max_time": "60m"},
        # no subscriber: size only; a reader at 45 does not hold data back
        "pv-none": size_limits,
        # no subscriber: time only
        "pv-none-time": {"consumption": "protect", "retention_time": "30m"},
    }
    slb = {"pv-i": 45, "pv-ii": 75, "pv-iii": 5, "pv-iv": 65, "pv-v": 25, "pv-time": 5}
    for name, policy in topics.items():
        _topic(broker, name, **policy)
        write(broker, name, [T0 + i * MIN for i in range(85)])
    for name, position in slb.items():
        broker.create_group(name, "sub", "subscriber", "earliest")
        broker.commit(name, "sub", 0, position, at_ms=T0 + 90 * MIN)
    broker.create_group("pv-none", "reader", "reader", "earliest")
    broker.commit("pv-none", "reader", 0, 45, at_ms=T0 + 90 * MIN)
    broker.create_group("pv-none", "ahead", "reader", "earliest")
    broker.commit("pv-none", "ahead", 0, 70, at_ms=T0 + 90 * MIN)

    out = pruner.cycle(now=T0 + 100 * MIN)
    plan = out.plan
    cycle = out.cycle_id

    def bytes_of(name: str) -> int:
        return broker.describe(name).to_json()["partitions"][0]["size_bytes"]

    # i. within limits: truncate at the SLB (segment granularity: at 40, below 45)
    assert decisions(plan, "pv-i") == [
        (0, DELETE, "DELETE_SIZE"),
        (10, DELETE, "DELETE_SIZE"),
        (20, DELETE, "DELETE_SIZE"),
        (30, DELETE, "DELETE_SIZE"),
        (40, KEEP, "KEEP_BARRIER"),
        (50, KEEP, "KEEP_BARRIER"),
        (60, KEEP, "KEEP_SIZE_TARGET"),
        (70, KEEP, "KEEP_SIZE_TARGET"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(plan, "pv-i")[40]["detail"] == "group sub at 45"
    assert log_start(broker, "pv-i") == 40
    assert bytes_of("pv-i") == 4500  # between the min (2000) and the max (6000)
    assert positions(broker, "pv-i") == {"sub": 45}

    # ii. SLB past the min limit: the min wins, truncate at 60
    assert decisions(plan, "pv-ii") == [
        (0, DELETE, "DELETE_SIZE"),
        (10, DELETE, "DELETE_SIZE"),
        (20, DELETE, "DELETE_SIZE"),
        (30, DELETE, "DELETE_SIZE"),
        (40, DELETE, "DELETE_SIZE"),
        (50, DELETE, "DELETE_SIZE"),
        (60, KEEP, "KEEP_SIZE_TARGET"),
        (70, KEEP, "KEEP_SIZE_TARGET"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "pv-ii") == 60
    assert bytes_of("pv-ii") == 2500
    assert positions(broker, "pv-ii") == {"sub": 75}

    # iii. SLB before the max limit: the max wins, truncate at 30, the subscriber overrun
    assert decisions(plan, "pv-iii") == [
        (0, DELETE, "DELETE_MAX_SIZE"),
        (10, DELETE, "DELETE_MAX_SIZE"),
        (20, DELETE, "DELETE_MAX_SIZE"),
        (30, KEEP, "KEEP_BARRIER"),
        (40, KEEP, "KEEP_BARRIER"),
        (50, KEEP, "KEEP_BARRIER"),
        (60, KEEP, "KEEP_SIZE_TARGET"),
        (70, KEEP, "KEEP_SIZE_TARGET"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(plan, "pv-iii")[30]["detail"] == "group sub at 5"
    assert log_start(broker, "pv-iii") == 30
    assert bytes_of("pv-iii") == 5500
    assert positions(broker, "pv-iii") == {"sub": 30}
    assert action_summary(broker, cycle, "pv-iii")[:2] == [
        ("subscriber_overrun", 0, 5, 30, 25, None, None, "applied"),
        ("move_log_start", 0, 0, 30, 30, None, None, "applied"),
    ]

    # iv. SLB and min limit in the same segment: truncate at the boundary before both
    assert decisions(plan, "pv-iv") == [
        (0, DELETE, "DELETE_SIZE"),
        (10, DELETE, "DELETE_SIZE"),
        (20, DELETE, "DELETE_SIZE"),
        (30, DELETE, "DELETE_SIZE"),
        (40, DELETE, "DELETE_SIZE"),
        (50, DELETE, "DELETE_SIZE"),
        (60, KEEP, "KEEP_SIZE_TARGET"),
        (70, KEEP, "KEEP_SIZE_TARGET"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "pv-iv") == 60
    assert bytes_of("pv-iv") == 2500  # at least the min (2200)
    assert positions(broker, "pv-iv") == {"sub": 65}

    # v. SLB and max limit in the same segment: truncate at the boundary after both
    assert decisions(plan, "pv-v") == [
        (0, DELETE, "DELETE_SIZE"),
        (10, DELETE, "DELETE_SIZE"),
        (20, DELETE, "DELETE_MAX_SIZE"),
        (30, KEEP, "KEEP_BARRIER"),
        (40, KEEP, "KEEP_BARRIER"),
        (50, KEEP, "KEEP_BARRIER"),
        (60, KEEP, "KEEP_SIZE_TARGET"),
        (70, KEEP, "KEEP_SIZE_TARGET"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "pv-v") == 30
    assert bytes_of("pv-v") == 5500  # at most the max (6000)
    assert positions(broker, "pv-v") == {"sub": 30}
    assert action_summary(broker, cycle, "pv-v")[0] == ("subscriber_overrun", 0, 25, 30, 5, None, None, "applied")

    # time limits, SLB 5: older than 60 min (last record before T0+40m) must go:
    # segments 0..30; 40..60 are older than 30 min but the subscriber holds them
    assert decisions(plan, "pv-time") == [
        (0, DELETE, "DELETE_MAX_TIME"),
        (10, DELETE, "DELETE_MAX_TIME"),
        (20, DELETE, "DELETE_MAX_TIME"),
        (30, DELETE, "DELETE_MAX_TIME"),
        (40, KEEP, "KEEP_BARRIER"),
        (50, KEEP, "KEEP_BARRIER"),
        (60, KEEP, "KEEP_BARRIER"),
        (70, KEEP, "KEEP_WITHIN_TIME"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    rows = segment_rows(plan, "pv-time")
    assert rows[70]["eligible_at"] == T0 + 79 * MIN + 30 * MIN + 1
    assert rows[40]["eligible_at"] == T0 + 49 * MIN + 30 * MIN + 1
    assert log_start(broker, "pv-time") == 40
    assert positions(broker, "pv-time") == {"sub": 40}
    assert action_summary(broker, cycle, "pv-time")[0] == ("subscriber_overrun", 0, 5, 40, 35, None, None, "applied")

    # no subscriber: fall back to the size limits; the reader behind is moved up
    assert decisions(plan, "pv-none") == [
        (0, DELETE, "DELETE_SIZE"),
        (10, DELETE, "DELETE_SIZE"),
        (20, DELETE, "DELETE_SIZE"),
        (30, DELETE, "DELETE_SIZE"),
        (40, DELETE, "DELETE_SIZE"),
        (50, DELETE, "DELETE_SIZE"),
        (60, KEEP, "KEEP_SIZE_TARGET"),
        (70, KEEP, "KEEP_SIZE_TARGET"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert partition_row(plan, "pv-none")["barrier"] is None
    assert log_start(broker, "pv-none") == 60
    assert positions(broker, "pv-none") == {"reader": 60, "ahead": 70}
    reader = group_rows(plan, "pv-none")["reader"]
    assert (reader["new_position"], reader["moved_skipped"]) == (60, 15)
    summary = action_summary(broker, cycle, "pv-none")
    assert summary[:2] == [
        ("reader_moved", 0, 45, 60, 15, None, None, "applied"),
        ("move_log_start", 0, 0, 60, 60, None, None, "applied"),
    ]
    assert [a[0] for a in summary[2:]] == ["delete_segment"] * 6
    assert actions(broker, cycle, topic="pv-none", action="reader_moved")[0].details == {
        "group": "reader",
        "kind": "reader",
    }

    # no subscriber: time only; older than 30 min = last record before T0+70m
    assert decisions(plan, "pv-none-time") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, DELETE, "DELETE_TIME"),
        (30, DELETE, "DELETE_TIME"),
        (40, DELETE, "DELETE_TIME"),
        (50, DELETE, "DELETE_TIME"),
        (60, DELETE, "DELETE_TIME"),
        (70, KEEP, "KEEP_WITHIN_TIME"),
        (80, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "pv-none-time") == 70


# -- Iggy (002) ---------------------------------------------------------------------------


def test_iggy_segment_stays_while_one_message_is_unexpired_and_zero_means_zero(broker: Broker, pruner: Pruner) -> None:
    """Iggy: a segment goes only when all its messages have expired. And "0": Iggy
    reads message_expiry 0 as "never"; our semantics (SPEC §3) read 0 as zero, and
    spell "never" infinite / none / -1."""
    _topic(broker, "iggy", retention_time="1h")
    # segment 0: T0..T0+9m; segment 1: T0+10m..T0+18m and one record at T0+100m;
    # active [20, 25): T0+101m..T0+105m
    write(
        broker,
        "iggy",
        [T0 + i * MIN for i in range(19)] + [T0 + 100 * MIN] + [T0 + (101 + i) * MIN for i in range(5)],
    )
    zero_like = {
        "iggy-zero": {"retention_time": "0"},  # retention_size infinite (the default)
        "iggy-zero-zero": {"retention_time": "0", "retention_size": "0"},
        "iggy-infinite": {"retention_time": "infinite"},
        "iggy-none": {"retention_time": "none"},
        "iggy-minus-one": {"retention_time": "-1"},
    }
    for name, policy in zero_like.items():
        _topic(broker, name, **policy)
        write(broker, name, [T0 + i * MIN for i in range(25)])

    out = pruner.cycle(now=T0 + 120 * MIN)
    plan = out.plan
    assert decisions(plan, "iggy") == [
        (0, DELETE, "DELETE_TIME"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    eligible_at = segment_rows(plan, "iggy")[10]["eligible_at"]
    assert eligible_at == T0 + 100 * MIN + HOUR + 1
    assert layout(broker, "iggy") == [(10, 20, 1000, True), (20, 25, 500, False)]
    assert log_start(broker, "iggy") == 10

    for name in ("iggy-zero", "iggy-zero-zero"):
        assert broker.describe(name).policy["retention_time"] == 0
        assert decisions(plan, name) == [
            (0, DELETE, "DELETE_TIME"),
            (10, DELETE, "DELETE_TIME"),
            (20, KEEP, "KEEP_ACTIVE"),
        ], name
        assert layout(broker, name) == [(20, 25, 500, False)], name
        assert log_start(broker, name) == 20, name
    for name in ("iggy-infinite", "iggy-none", "iggy-minus-one"):
        assert broker.describe(name).policy["retention_time"] is None
        assert decisions(plan, name) == [
            (0, KEEP, "KEEP_NO_LIMIT"),
            (10, KEEP, "KEEP_NO_LIMIT"),
            (20, KEEP, "KEEP_ACTIVE"),
        ], name
        assert all(r["eligible_at"] is None for r in segment_rows(plan, name).values()), name
        assert log_start(broker, name) == 0, name

    # At the announced instant the last message of segment 1 has expired too.
    later = pruner.plan(now=eligible_at, topics=["iggy"])
    assert decisions(later, "iggy") == [(10, DELETE, "DELETE_TIME"), (20, KEEP, "KEEP_ACTIVE")]


# -- arrebato (000) -----------------------------------------------------------------------


def test_arrebato_message_granularity_stops_at_first_unexpired(broker: Broker, pruner: Pruner) -> None:
    """arrebato: the pruner starts at the oldest message and stops at the first one
    that is not outside the retention period. retention 1 h, cycle at T0+120m: a
    record is expired when its timestamp is before T0+60m."""
    for name in ("arr-sealed", "arr-active", "arr-all"):
        _topic(broker, name, granularity="message", retention_time="1h")
    # 0..13 expired; 14 not; 15 expired again (it must stay: pruning stopped at 14)
    write(
        broker,
        "arr-sealed",
        [T0 + i * MIN for i in range(14)]
        + [T0 + 100 * MIN, T0 + 15 * MIN]
        + [T0 + (90 + i) * MIN for i in range(16, 25)],
    )
    # 0..21 expired, 22..24 not: the first unexpired record is inside the active segment
    write(broker, "arr-active", [T0 + i * MIN for i in range(22)] + [T0 + (80 + i) * MIN for i in range(22, 25)])
    # everything expired
    write(broker, "arr-all", [T0 + i * MIN for i in range(25)])
    broker.create_group("arr-sealed", "reader", "reader", "earliest")

    out = pruner.cycle(now=T0 + 120 * MIN)
    plan = out.plan
    cycle = out.cycle_id

    assert decisions(plan, "arr-sealed") == [
        (0, DELETE, "DELETE_TIME"),
        (10, KEEP, "KEEP_WITHIN_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(plan, "arr-sealed")[10]["eligible_at"] == T0 + 109 * MIN + HOUR + 1
    assert partition_row(plan, "arr-sealed")["new_log_start_offset"] == 14
    assert log_start(broker, "arr-sealed") == 14  # inside segment [10, 20)
    assert layout(broker, "arr-sealed") == [(10, 20, 1000, True), (20, 25, 500, False)]
    records = broker.read("arr-sealed", 0, 0, 100)
    assert [r.offset for r in records] == list(range(14, 25))
    assert records[1].timestamp == T0 + 15 * MIN  # the expired record after the stop stays
    assert positions(broker, "arr-sealed") == {"reader": 14}
    assert action_summary(broker, cycle, "arr-sealed") == [
        ("reader_moved", 0, 0, 14, 14, None, None, "applied"),
        ("move_log_start", 0, 0, 14, 14, None, None, "applied"),
        ("delete_segment", 0, 0, 10, 10, 1000, "DELETE_TIME", "applied"),
    ]

    assert decisions(plan, "arr-active") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "arr-active") == 22  # inside the active segment [20, 25)
    assert layout(broker, "arr-active") == [(20, 25, 500, False)]
    assert [r.offset for r in broker.read("arr-active", 0, 0, 100)] == [22, 23, 24]

    assert decisions(plan, "arr-all") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "arr-all") == 25  # the whole active segment is logically gone
    assert layout(broker, "arr-all") == [(20, 25, 500, False)]
    assert broker.read("arr-all", 0, 0, 100) == []
    assert action_summary(broker, cycle, "arr-all")[0] == ("move_log_start", 0, 0, 25, 25, None, None, "applied")


def test_arrebato_consumer_index_expiry(broker: Broker, pruner: Pruner) -> None:
    """arrebato: consumer indexes not updated within the consumer retention period
    are removed (subscription_expiry, either kind of group). An expired subscriber no
    longer holds data back. Records at one a minute from T0, offsets 0..24; the cycle
    runs at T0+120m; retention 1 h makes segments 0 and 10 eligible by time."""
    _topic(broker, "arr-groups", subscription_expiry="1d", consumption="protect", retention_time="1h")
    write(broker, "arr-groups", [T0 + i * MIN for i in range(25)])
    for name, kind in (("stale", "subscriber"), ("idle-reader", "reader"), ("fresh", "subscriber")):
        broker.create_group("arr-groups", name, kind, "earliest")
    broker.commit("arr-groups", "stale", 0, 0, at_ms=T0 - 2 * DAY)
    broker.commit("arr-groups", "idle-reader", 0, 3, at_ms=T0 - 3 * DAY)
    broker.commit("arr-groups", "fresh", 0, 20, at_ms=T0 + 110 * MIN)

    out = pruner.cycle(now=T0 + 120 * MIN)
    groups = group_rows(out.plan, "arr-groups")
    assert {name: row["expired"] for name, row in groups.items()} == {
        "stale": True,
        "idle-reader": True,
        "fresh": False,
    }
    assert partition_row(out.plan, "arr-groups")["barrier"] == 20
    assert decisions(out.plan, "arr-groups") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    assert [g["name"] for g in broker.describe("arr-groups").to_json()["groups"]] == ["fresh"]
    assert positions(broker, "arr-groups") == {"fresh": 20}
    expired = actions(broker, out.cycle_id, topic="arr-groups", action="group_expired")
    assert sorted((a.details["group"], a.details["kind"], a.status) for a in expired) == [
        ("idle-reader", "reader", "applied"),
        ("stale", "subscriber", "applied"),
    ]
    assert log_start(broker, "arr-groups") == 20


# -- dry run, hold, budget, future timestamps -----------------------------------------------


def _files(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def test_dry_run_changes_nothing_and_decides_the_same(broker: Broker, pruner: Pruner) -> None:
    _topic(broker, "dry", retention_time="1h")
    write(broker, "dry", [T0 + i * MIN for i in range(25)])
    broker.create_group("dry", "reader", "reader", "earliest")
    topic_dir = broker.data.topic_dir("dry")
    files_before = _files(topic_dir)
    described_before = broker.describe("dry").to_json()

    dry = pruner.cycle(now=T0 + 120 * MIN, topics=["dry"], dry_run=True)
    expected = [(0, DELETE, "DELETE_TIME"), (10, DELETE, "DELETE_TIME"), (20, KEEP, "KEEP_ACTIVE")]
    assert decisions(dry.plan, "dry") == expected
    assert (dry.status, dry.planned, dry.applied, dry.bytes_freed) == ("dry_run", 2, 0, 0)
    assert _files(topic_dir) == files_before
    assert broker.describe("dry").to_json() == described_before
    assert actions(broker, dry.cycle_id) == []
    assert Journal(broker.catalog).cycle(dry.cycle_id).status == "dry_run"

    real = pruner.cycle(now=T0 + 120 * MIN, topics=["dry"])
    assert decisions(real.plan, "dry") == expected
    for table in ("segments", "partitions", "groups", "topics"):
        assert (
            real.plan.tables[table]
            .sort_by([(c, "ascending") for c in _keys(table)])
            .equals(dry.plan.tables[table].sort_by([(c, "ascending") for c in _keys(table)]))
        ), table
    assert (real.status, real.planned, real.applied, real.bytes_freed) == (
        "done",
        2,
        2,
        2000,
    )
    assert layout(broker, "dry") == [(20, 25, 500, False)]
    assert positions(broker, "dry") == {"reader": 20}


def _keys(table: str) -> list[str]:
    return {
        "segments": ["topic", "partition", "base_offset"],
        "partitions": ["topic", "partition"],
        "groups": ["topic", "group", "partition"],
        "topics": ["topic"],
    }[table]


def test_hold_keeps_everything_and_a_future_timestamp_blocks_time_retention(broker: Broker, pruner: Pruner) -> None:
    """hold: nothing goes, whatever the limits (retention 0 and a 1000 B cap here).
    A record stamped in the future keeps its segment (KEEP_FUTURE_TIMESTAMP), and so
    the expired segment after it too (a prefix: KEEP_PREFIX)."""
    _topic(broker, "held", hold="on", retention_time="0", max_partition_size="1000")
    write(broker, "held", [T0 + i * MIN for i in range(25)])
    _topic(broker, "future", retention_time="1h")
    future_ts = T0 + 120 * MIN + DAY
    write(broker, "future", [T0 + i * MIN for i in range(5)] + [future_ts] + [T0 + i * MIN for i in range(6, 25)])
    files_before = _files(broker.data.topic_dir("held"))

    out = pruner.cycle(now=T0 + 120 * MIN)
    assert decisions(out.plan, "held") == [
        (0, KEEP, "KEEP_HOLD"),
        (10, KEEP, "KEEP_HOLD"),
        (20, KEEP, "KEEP_HOLD"),
    ]
    assert partition_row(out.plan, "held")["new_log_start_offset"] == 0
    assert log_start(broker, "held") == 0
    assert _files(broker.data.topic_dir("held")) == files_before
    assert action_summary(broker, out.cycle_id, "held") == []

    assert decisions(out.plan, "future") == [
        (0, KEEP, "KEEP_FUTURE_TIMESTAMP"),
        (10, KEEP, "KEEP_PREFIX"),
        (20, KEEP, "KEEP_ACTIVE"),
    ]
    assert segment_rows(out.plan, "future")[0]["eligible_at"] == future_ts + HOUR + 1
    assert log_start(broker, "future") == 0
    assert out.applied == 0


def test_max_deletes_per_cycle_spreads_deletions_over_cycles(broker: Broker, pruner: Pruner) -> None:
    """Budget 2: six eligible segments go two per cycle, the rest wait (KEEP_BUDGET)."""
    _topic(broker, "budget", retention_time="1h", max_deletes_per_cycle="2")
    write(broker, "budget", [T0 + i * MIN for i in range(65)])  # sealed 0..50, active [60, 65)

    first = pruner.cycle(now=T0 + 120 * MIN, topics=["budget"])
    assert decisions(first.plan, "budget") == [
        (0, DELETE, "DELETE_TIME"),
        (10, DELETE, "DELETE_TIME"),
        (20, KEEP, "KEEP_BUDGET"),
        (30, KEEP, "KEEP_BUDGET"),
        (40, KEEP, "KEEP_BUDGET"),
        (50, KEEP, "KEEP_BUDGET"),
        (60, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "budget") == 20
    assert [s[0] for s in layout(broker, "budget")] == [20, 30, 40, 50, 60]

    second = pruner.cycle(now=T0 + 121 * MIN, topics=["budget"])
    assert decisions(second.plan, "budget") == [
        (20, DELETE, "DELETE_TIME"),
        (30, DELETE, "DELETE_TIME"),
        (40, KEEP, "KEEP_BUDGET"),
        (50, KEEP, "KEEP_BUDGET"),
        (60, KEEP, "KEEP_ACTIVE"),
    ]
    assert log_start(broker, "budget") == 40
    assert [s[0] for s in layout(broker, "budget")] == [40, 50, 60]
    assert action_summary(broker, second.cycle_id, "budget") == [
        ("move_log_start", 0, 20, 40, 20, None, None, "applied"),
        ("delete_segment", 0, 20, 30, 10, 1000, "DELETE_TIME", "applied"),
        ("delete_segment", 0, 30, 40, 10, 1000, "DELETE_TIME", "applied"),
    ]
