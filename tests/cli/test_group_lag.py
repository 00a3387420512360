"""``ebb group list`` shows each group's lag in time: the age of the record at its
position, which the ``backlog_age`` quota compares, so that a lag over the quota is
what the next cycle finds (tests/support/lag_catalog.py)."""

from __future__ import annotations

import json
from pathlib import Path

from console import format
from engine.clock import now_ms
from engine.prune.session import SparkEngine
from tests.support.lag_catalog import HOUR, POSITIONS, build_lag_catalog, record_time


def test_group_list_shows_the_age_of_the_record_at_each_position_as_the_quota_reads_it(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    built = now_ms()
    build_lag_catalog(data_dir, built)
    ages: dict[tuple[str, int], tuple[int, int]] = {}
    cells: dict[tuple[str, int], str] = {}
    for (topic, group), positions in POSITIONS.items():
        before = now_ms()
        (listed,) = json.loads(ebb("group", "list", topic, "--json").out)
        table = ebb("group", "list", topic).out.splitlines()
        after = now_ms()
        assert listed["name"] == group
        header = table[0]
        assert header.split() == ["GROUP", "KIND", "PARTITION", "POSITION", "LAG", "LAG", "AGE", "LAST", "COMMIT"]
        column = slice(header.index("LAG AGE"), header.index("LAST COMMIT"))
        for p, at in enumerate(positions):
            oldest = record_time(built, p, at)
            assert listed["lag"][str(p)] == 180 - at
            # now - the record's timestamp, now read between before and after
            assert before - oldest <= listed["lag_ms"][str(p)] <= after - oldest
            ages[topic, p] = (before - oldest, after - oldest)
            cells[topic, p] = table[1 + p][column].strip()
    assert all(cells[key] in {format.age(low), format.age(high)} for key, (low, high) in ages.items())
    # (read from the segments' first records, every lag would be 3 h: both topics over)
    over = {t: any(low > HOUR for (topic, _), (low, _) in ages.items() if topic == t) for t, _ in POSITIONS}
    assert over == {"fresh": False, "stale": True}

    assert ebb("prune", "--json").code == 0
    for topic, expected in over.items():
        assert json.loads(ebb("topic", "describe", topic, "--json").out)["quota"]["exceeded"] == expected
