"""How the forecast reads a group that no consumer has committed for since it was
created (engine/forecast/reading.py): its creation stamps its commit time, often
within the rate window, yet it reads nothing, so it is ``idle``; a group that
committed, even in its creation's millisecond, and then was moved, repaired or
rebuilt, still reads."""

from __future__ import annotations

from pathlib import Path

from engine.broker import Broker
from engine.datadir import DataDir
from engine.forecast.reading import Reading, observed_reads, readings
from engine.integrity.rebuild import rebuild_catalog
from engine.prune.operations import move_group
from engine.prune.record_times import StoreRecordTimes
from engine.prune.snapshot import build_snapshot
from tests.support.seed_scenarios import MIN, T0, write

WINDOW = 60 * MIN


def _readings(broker: Broker, now: int, stalled: frozenset[str] = frozenset()) -> list[Reading]:
    """How each group of topic ``t`` reads from ``now`` on, as the forecast asks."""
    catalog = broker.catalog
    snapshot = build_snapshot(catalog, StoreRecordTimes(broker.data), defaults={}, now=now, topics=["t"])
    observed, never = observed_reads(catalog, ["t"]), catalog.never_committed(["t"])
    return readings(snapshot.tables, observed, now, WINDOW, stalled, never)


def _topic(data_dir: Path) -> Broker:
    """A topic ``t`` of 2 partitions, 10 records each, a minute apart until T0."""
    broker = Broker(data_dir, clock=lambda: T0)
    broker.create_topic("t", 2, {"segment_size": "1000"})
    for partition in (0, 1):
        write(broker, "t", [T0 - (10 - k) * MIN for k in range(10)], partition)
    return broker


def test_a_group_created_within_the_window_that_never_committed_reads_nothing(data_dir: Path) -> None:
    """Created a minute ago from earliest, it is 10 records behind with a commit time
    in the window (its creation's): it was read as keeping up, its barrier moving on
    with the ingest, where it holds every record."""
    with _topic(data_dir) as broker:
        broker.clock = lambda: T0 - MIN
        broker.create_group("t", "never", "subscriber", "earliest")
        broker.create_group("t", "late", "subscriber", "latest")
        assert _readings(broker, T0) == [
            Reading("late", 0, "idle", never_committed=True),
            Reading("late", 1, "idle", never_committed=True),
            Reading("never", 0, "idle", never_committed=True),
            Reading("never", 1, "idle", never_committed=True),
        ]
        # named --stalled, it says so, and that it never committed all the same
        assert _readings(broker, T0, frozenset({"never"}))[2] == Reading("never", 0, "stalled", never_committed=True)
        assert _readings(broker, T0)[0].to_json() == {
            "group": "late",
            "partition": 0,
            "source": "idle",
            "records_per_second": None,
            "never_committed": True,
        }


def test_a_commit_on_one_partition_in_the_creations_millisecond_is_reading(data_dir: Path) -> None:
    """A consumer that commits in the millisecond its group was made (``ebb consume``
    makes its reader and commits at once): the commit time is the creation's, but a
    commit sets an anchor. One partition committed is the group's commit (as the
    window's rule is the group's latest commit)."""
    with _topic(data_dir) as broker:
        broker.create_group("t", "g", "subscriber", "earliest")
        broker.commit("t", "g", 0, 3, at_ms=T0)
        assert broker.catalog.group("t", "g").created_at == T0
        assert [(r.source, r.never_committed) for r in _readings(broker, T0)] == [("keeps_up", False)] * 2


def test_moves_that_are_not_reading_leave_a_group_as_it_was(data_dir: Path) -> None:
    """``ebb group move`` (and a repair, which moves a group the same way) keeps the
    commit time and clears the anchors: a group that never committed has still not;
    one that did is still reading, by its commit time. A catalog rebuilt from the
    metadata files has no anchors either, and tells them apart the same way."""
    with _topic(data_dir) as broker:
        broker.create_group("t", "never", "subscriber", "earliest")
        broker.create_group("t", "read", "subscriber", "earliest")
        broker.commit("t", "read", 0, 4, at_ms=T0 + 1)
        for group in ("never", "read"):
            move_group(broker, "t", group, 0, to_offset=6)
        sources = [(r.group, r.partition, r.source) for r in _readings(broker, T0 + MIN)]
        assert sources == [("never", 0, "idle"), ("never", 1, "idle"), ("read", 0, "keeps_up"), ("read", 1, "keeps_up")]
    rebuild_catalog(DataDir(data_dir), {}, now=T0 + MIN, actor="test")
    with Broker(data_dir, clock=lambda: T0 + MIN) as broker:
        assert broker.catalog.reading_anchors(["t"]) == []
        assert [(r.group, r.partition, r.source) for r in _readings(broker, T0 + MIN)] == sources


def test_never_committed_names_only_the_topics_asked(data_dir: Path) -> None:
    with _topic(data_dir) as broker:
        broker.create_topic("u", 1, {})
        broker.create_group("t", "g", "subscriber", "earliest")
        broker.create_group("u", "g", "subscriber", "earliest")
        assert broker.catalog.never_committed(["t"]) == {("t", "g")}
        assert broker.catalog.never_committed(["t", "u"]) == {("t", "g"), ("u", "g")}
