"""A snapshot read since an earlier one (engine/catalog/bulk_reads.py ``read_since``:
only the partitions whose segments were written since are read again) equals a fresh
full snapshot after any sequence of catalog writes, whoever makes them; and plans
the same.

Writes come from two brokers on the same data directory (two SQLite connections,
as the console and ``ebb produce`` are two processes): the change stamps are kept
by the catalog's triggers, not by the process that reads.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.broker import Broker
from engine.catalog import bulk_reads
from engine.catalog.catalog import Catalog
from engine.errors import EbbError
from engine.integrity.repair import repair
from engine.prune import operations
from engine.prune.planner import Planner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.store.batch import NewRecord
from tests.support.seed_scenarios import MIN, T0

TOPICS = ("a", "b", "c")
POLICY = {"segment_size": "300", "retention_time": "30m", "granularity": "message"}

_topic = st.sampled_from(TOPICS)
_partition = st.integers(0, 1)
_ACTIONS = st.one_of(
    st.tuples(st.just("append"), _topic, _partition, st.integers(1, 6)),
    st.tuples(st.just("create"), _topic, st.integers(1, 2)),
    st.tuples(st.just("delete_topic"), _topic),
    st.tuples(st.just("delete_oldest"), _topic, _partition, st.integers(1, 3)),
    st.tuples(st.just("truncate"), _topic, _partition, st.integers(0, 12)),
    st.tuples(st.just("commit"), _topic, _partition, st.integers(0, 12)),
    st.tuples(st.just("group_delete"), _topic),
    st.tuples(st.just("repair"), _topic),
    st.tuples(st.just("snapshot")),
)


class _Writers:
    """Brokers on one data directory, writing by turns; the records' clock."""

    def __init__(self, *brokers: Broker) -> None:
        self.brokers = brokers
        self.clock = T0

    def apply(self, turn: int, action: tuple) -> None:
        broker = self.brokers[turn % len(self.brokers)]
        kind, *args = action
        try:
            if kind == "append":
                topic, partition, count = args
                self.clock += MIN
                records = [NewRecord(b"x" * 60, None, self.clock + i) for i in range(count)]
                broker.produce(topic, records, partition=partition % broker.catalog.topic(topic).partitions)
            elif kind == "create":
                broker.create_topic(args[0], args[1], POLICY)
                broker.create_group(args[0], "g", "subscriber", "earliest")
            elif kind == "delete_topic":
                broker.delete_topic(args[0])
            elif kind == "delete_oldest":
                operations.delete_oldest(broker, args[0], args[1], args[2])
            elif kind == "truncate":
                operations.truncate(broker, args[0], args[1], before_offset=args[2])
            elif kind == "commit":
                broker.commit(args[0], "g", args[1], args[2])
            elif kind == "group_delete":
                broker.delete_group(args[0], "g")
            elif kind == "repair":
                repair(broker, [args[0]])
        except EbbError:
            pass  # refused (no such topic, group or partition, an offset out of range): nothing written


def _full(catalog: Catalog, records: StoreRecordTimes, now: int, child: bool = False) -> Snapshot:
    """A snapshot read whole (by the ADBC child with ``child``, as at a million segments)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bulk_reads, "BULK_FROM", 0 if child else bulk_reads.BULK_FROM)
        return build_snapshot(catalog, records, defaults={}, now=now)


def _same(since: Snapshot, full: Snapshot) -> None:
    for name, table in full.tables.items():
        assert since.tables[name].to_pylist() == table.to_pylist(), name
    assert since.rejected == full.rejected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(actions=st.lists(_ACTIONS, min_size=1, max_size=40), child=st.booleans())
def test_a_snapshot_since_an_earlier_one_equals_a_full_one(actions: list[tuple], child: bool) -> None:
    """With ``child``, each snapshot since starts from a full one the ADBC child read
    (as at a million segments); else from the snapshot since before it."""
    with tempfile.TemporaryDirectory() as tmp, Broker(Path(tmp)) as reader, Broker(Path(tmp)) as other:
        writers = _Writers(reader, other)
        records = StoreRecordTimes(reader.data)
        writers.apply(0, ("create", "a", 2))
        last = _full(reader.catalog, records, writers.clock, child)
        for turn, action in enumerate([*actions, ("snapshot",)]):
            if action[0] != "snapshot":
                writers.apply(turn, action)
                continue
            now = writers.clock + 40 * MIN
            assert last.read is not None
            read = bulk_reads.read_since(reader.catalog.db.conn, last.read, child_allowed=True)
            assert read is not None, "the earlier read is a base for this one"
            since = build_snapshot(reader.catalog, records, defaults={}, now=now, since=last.read)
            full = _full(reader.catalog, records, now, child)
            _same(since, full)
            last = full if child else since


def test_a_rebuilt_catalog_is_read_whole(broker: Broker) -> None:
    """Another catalog file (a rebuild) has another epoch: nothing of the old read is kept,
    even where its counts of writes happen to match."""
    broker.create_topic("a", 1, POLICY)
    records = StoreRecordTimes(broker.data)
    first = _full(broker.catalog, records, T0)
    assert first.read is not None
    other = Catalog.open(Path(tempfile.mkdtemp()) / "catalog.db")
    try:
        assert bulk_reads.read_since(other.db.conn, first.read, child_allowed=False) is None
    finally:
        other.close()


def test_the_plan_from_a_snapshot_since_equals_the_plan_from_a_full_one(
    broker: Broker, spark_engine: SparkEngine, tmp_path: Path
) -> None:
    writers = _Writers(broker)
    for action in [("create", "a", 2), ("create", "b", 1), *[("append", "a", p, 5) for p in (0, 1, 0)]]:
        writers.apply(0, action)
    records = StoreRecordTimes(broker.data)
    last = _full(broker.catalog, records, writers.clock)
    for action in [("append", "a", 1, 6), ("delete_oldest", "a", 0, 1), ("commit", "a", 0, 3), ("append", "b", 0, 4)]:
        writers.apply(0, action)
    now = writers.clock + 40 * MIN
    since = build_snapshot(broker.catalog, records, defaults={}, now=now, since=last.read)
    planner = Planner(spark_engine, tmp_path / "scratch")
    got, want = planner.plan(since).tables, planner.plan(_full(broker.catalog, records, now)).tables
    assert got.keys() == want.keys()
    for name, table in want.items():
        assert isinstance(table, pa.Table)
        assert got[name].equals(table), name
    assert got["segments"].num_rows > 0


def test_a_catalog_made_before_the_stamps_gets_them_when_opened(tmp_path: Path) -> None:
    """An older catalog (no triggers, no stamp column, no count) is brought up to date by
    the first open, and its snapshots read since are exact from then on."""
    with Broker(tmp_path) as broker:
        _Writers(broker).apply(0, ("create", "a", 2))
        conn = broker.catalog.db.conn
        for name in ("segment_added", "segment_changed", "segment_removed", "partition_added"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("ALTER TABLE partitions DROP COLUMN segments_changed")
        conn.execute("DELETE FROM segment_writes")
    with Broker(tmp_path) as broker:
        writers = _Writers(broker)
        records = StoreRecordTimes(broker.data)
        last = _full(broker.catalog, records, writers.clock)
        writers.apply(0, ("append", "a", 1, 5))
        now = writers.clock + 40 * MIN
        since = build_snapshot(broker.catalog, records, defaults={}, now=now, since=last.read)
        _same(since, _full(broker.catalog, records, now))
        assert since.tables["segments"].num_rows > last.tables["segments"].num_rows
