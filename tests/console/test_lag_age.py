"""The console's lag in time is the age of the record at a group's position, so that
its "over quota (age)" estimate is what the next cycle decides (tests/support/
lag_catalog.py: positions inside a segment begun hours before the record there)."""

from __future__ import annotations

from pathlib import Path

from console.model.groups import load_groups
from console.model.quotas import load_quotas
from console.model.topic import load_topic
from engine.broker import Broker
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from tests.support.console_fixtures import NOW
from tests.support.lag_catalog import HOUR, MINUTE, POSITIONS, build_lag_catalog, record_time


def test_lag_age_is_the_record_age_and_the_age_estimate_is_the_cycles_verdict(
    tmp_path: Path, spark_engine: SparkEngine
) -> None:
    root = tmp_path / "data"
    build_lag_catalog(root, NOW)
    with Broker(root, clock=lambda: NOW) as broker:
        groups = {g.group: g for g in load_groups(broker).groups}
        before = {t.topic: t.status for t in load_quotas(broker).topics}
        fresh = load_topic(broker, "fresh", None)
        Pruner(broker, spark_engine).cycle()
        after = {t.topic: t.status for t in load_quotas(broker).topics}

    # The segment holding the position began three hours ago; its record is younger.
    (segment_start,) = {s.first_timestamp for s in fresh.segments if s.partition == 0}
    assert NOW - segment_start == 3 * HOUR
    (slow,) = [g for g in fresh.groups if g.name == "slow"]
    assert [p.lag_ms(NOW) for p in slow.lag.partitions] == [
        NOW - record_time(NOW, p, at) for p, at in enumerate(POSITIONS["fresh", "slow"])
    ]
    assert groups["slow"].lag_ms == 10 * MINUTE and groups["slow"].over_quota == ()
    assert groups["stuck"].lag_ms == 90 * MINUTE and groups["stuck"].over_quota == ("age",)
    assert (before["fresh"].oldest_ms, before["fresh"].label(NOW)) == (10 * MINUTE, "ok")
    assert (before["stale"].oldest_ms, before["stale"].label(NOW)) == (90 * MINUTE, "over quota (age)")
    # The cycle decides what the estimate said: only the stale topic is over its quota.
    assert {t: s.engine.exceeded for t, s in after.items() if t in before} == {"fresh": False, "stale": True}
    assert after["fresh"].word == "ok" and after["stale"].label(NOW) == "quota exceeded 0s"
